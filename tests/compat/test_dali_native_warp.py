"""fastload.compat.dali's warp samplers in native code (``_native_warp.c``) against their numpy/torch versions,
bit for bit, on random images, types, matrices and fill values of awkward sizes: DALI's WarpCPU (fn.warp_affine,
fn.rotate) and OpenCV's float32 warpPerspective (fn.experimental.warp_perspective). The DALI comparisons
(tests/compat/test_dali_geometry.py, test_dali_imageops.py, test_dali_remap.py) run through the native code
where it is built. The AVX2 versions are held to the scalar code (``set_vector``); warp_perspective's prepared
constant matrices and ``float32.libm_float`` of one value to the paths they skip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastload.compat import float32
from fastload.compat.dali import remap, warping

pytestmark = pytest.mark.skipif(warping._native_warp is None, reason="fastload.compat.dali._native_warp not built")

_TYPES = [torch.uint8, torch.int8, torch.uint16, torch.int16, torch.int32, torch.float32]


def _image(rng, shape, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.float32:
        return torch.from_numpy(rng.uniform(-300, 300, shape).astype(np.float32))
    info = torch.iinfo(dtype)
    low, high = max(info.min, -(2 ** 20)), min(info.max, 2 ** 20)
    return torch.from_numpy(rng.integers(low, high, shape, endpoint=True)).to(dtype)


def _same(a, b) -> bool:
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.is_floating_point:
        return bool(np.array_equal(a.numpy(), b.numpy(), equal_nan=True))
    return torch.equal(a, b)


@st.composite
def affine_cases(draw):
    height, width = draw(st.integers(1, 31)), draw(st.integers(1, 40))
    out_h, out_w = draw(st.integers(0, 29)), draw(st.sampled_from([0, 1, 7, 24, 255, 256, 257, 300]))
    channels = draw(st.sampled_from([1, 3, 4]))
    in_type, out_type = draw(st.sampled_from(_TYPES)), draw(st.sampled_from(_TYPES))
    interp = draw(st.sampled_from(["nn", "linear"]))
    fill = draw(st.one_of(st.none(), st.floats(-400, 70000, allow_nan=False), st.integers(-5, 300)))
    scale = draw(st.sampled_from([0.01, 0.5, 1.0, 3.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    return height, width, out_h, out_w, channels, in_type, out_type, interp, fill, scale, seed


@settings(max_examples=150, deadline=None)
@given(affine_cases())
def test_the_native_affine_sampler_equals_the_torch_one(case):
    height, width, out_h, out_w, channels, in_type, out_type, interp, fill, scale, seed = case
    rng = np.random.default_rng(seed)
    image = _image(rng, (height, width, channels), in_type)
    matrix = np.concatenate([rng.normal(0, scale, (2, 2)), rng.uniform(-20, 50, (2, 1))], axis=1)
    matrix = matrix.astype(np.float32)
    native = warping.warp(image, matrix, out_h, out_w, fill_value=fill, interp=interp, dtype=out_type)
    saved, warping._native_warp = warping._native_warp, None
    try:
        expected = warping.warp(image, matrix, out_h, out_w, fill_value=fill, interp=interp, dtype=out_type)
    finally:
        warping._native_warp = saved
    assert _same(native, expected)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 33), st.integers(1, 29), st.floats(-360, 360), st.booleans(), st.sampled_from(["nn", "linear"]),
       st.integers(0, 2**32 - 1))
def test_rotate_runs_the_native_sampler_unchanged(height, width, angle, keep_size, interp, seed):
    image = _image(np.random.default_rng(seed), (height, width, 3), torch.uint8)
    native = warping.rotate(image, angle, fill_value=None if seed % 2 else 7, keep_size=keep_size, interp_type=interp)
    saved, warping._native_warp = warping._native_warp, None
    try:
        expected = warping.rotate(image, angle, fill_value=None if seed % 2 else 7, keep_size=keep_size,
                                  interp_type=interp)
    finally:
        warping._native_warp = saved
    assert _same(native, expected)


@st.composite
def perspective_cases(draw):
    height, width = draw(st.integers(1, 31)), draw(st.integers(1, 40))
    out_h, out_w = draw(st.integers(0, 29)), draw(st.sampled_from([0, 1, 9, 15, 16, 17, 31, 33, 48]))
    channels = draw(st.sampled_from([1, 2, 3, 4]))
    kind = draw(st.sampled_from([np.uint8, np.uint16, np.float32]))
    interp = draw(st.sampled_from(["nn", "linear"]))
    border = draw(st.sampled_from(sorted(remap._NATIVE_BORDERS)))
    perspective = draw(st.sampled_from([0.0, 1e-3, 2e-2]))
    return height, width, out_h, out_w, channels, kind, interp, border, perspective, draw(st.integers(0, 2**32 - 1))


@settings(max_examples=150, deadline=None)
@given(perspective_cases())
def test_the_native_perspective_warp_equals_the_numpy_one(case):
    height, width, out_h, out_w, channels, kind, interp, border, perspective, seed = case
    rng = np.random.default_rng(seed)
    if kind == np.float32:
        data = rng.uniform(-300, 300, (height, width, channels)).astype(np.float32)
    else:
        data = rng.integers(0, np.iinfo(kind).max, (height, width, channels), endpoint=True).astype(kind)
    m = np.eye(3) + rng.normal(0, 0.3, (3, 3)) * [[1, 1, 0], [1, 1, 0], [0, 0, 0]]
    m[:2, 2] = rng.uniform(-10, 30, 2)
    m[2, :2] = rng.normal(0, perspective, 2)
    fill = remap._fill_values(list(rng.uniform(-10, 300, 1 if seed % 2 else channels)), channels, kind)
    native = remap._warp_native(data, m, out_h, out_w, interp, border, fill)
    expected = remap._warp_float(data, m, out_h, out_w, interp, border, fill)
    assert _same(torch.from_numpy(np.ascontiguousarray(native)), torch.from_numpy(np.ascontiguousarray(expected)))


def test_warp_perspective_takes_the_native_kernel_for_its_types():
    image = torch.arange(13 * 17 * 3, dtype=torch.int32).reshape(13, 17, 3).to(torch.uint8)
    m = [1.0, 0.05, 0.0, 0.02, 1.0, 0.0, 0.0001, 0.0002, 1.0]
    args = dict(matrix=m, out_h=11, out_w=19, inverse_map=True, corner=True, interp="linear", border="constant",
                fill_value=(0.0,))
    native = remap.warp_perspective_image(image, **args)
    saved, remap._native_warp = remap._native_warp, None
    try:
        expected = remap.warp_perspective_image(image, **args)
    finally:
        remap._native_warp = saved
    assert _same(native, expected)


def test_bad_buffers_are_refused_not_read_past():
    native = warping._native_warp
    image, m = np.zeros((4, 5, 3), np.uint8), np.eye(2, 3, dtype=np.float32)
    with pytest.raises(ValueError, match="size does not match"):
        native.warp_affine(image, np.empty((4, 5, 3), np.uint8), 4, 6, 3, "B", 4, 5, "B", m, True, False, 0.0)
    with pytest.raises(ValueError, match="size does not match"):
        native.warp_affine(image, np.empty((4, 5, 2), np.uint8), 4, 5, 3, "B", 4, 5, "B", m, True, False, 0.0)
    with pytest.raises(ValueError, match="types"):
        native.warp_affine(image, np.empty((4, 5, 3), np.uint8), 4, 5, 3, "q", 4, 5, "B", m, True, False, 0.0)
    fill = np.zeros(3, np.uint8)
    with pytest.raises(ValueError, match="size does not match"):
        native.warp_perspective(image, np.empty((4, 5, 3), np.uint8), 4, 5, 3, "B", 4, 5, m, True, 0, fill)
    with pytest.raises(ValueError, match="border"):
        native.warp_perspective(image, np.empty((4, 5, 3), np.uint8), 4, 5, 3, "B", 4, 5, np.eye(3, dtype=np.float32),
                                True, 5, fill)


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # the reference's NaN
@pytest.mark.parametrize("out_type", _TYPES)
def test_conversion_of_ties_and_special_values(out_type):
    values = [2.5, -2.5, 0.5, -0.5, 0.49999997, 1.5, 254.5, 255.5, -128.5, 127.5, 65535.5, 32767.5, 1e10, -1e10,
              float("inf"), -float("inf"), float("nan"), 2.0 ** 23 + 1, -(2.0 ** 31) - 1000, 7.0]
    image = torch.tensor(values, dtype=torch.float32).reshape(4, 5, 1)
    identity = np.array([[1, 0, 0], [0, 1, 0]], np.float32)
    native = warping.warp(image, identity, 4, 5, interp="nn", dtype=out_type)
    saved, warping._native_warp = warping._native_warp, None
    try:
        expected = warping.warp(image, identity, 4, 5, interp="nn", dtype=out_type)
    finally:
        warping._native_warp = saved
    assert _same(native, expected)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["sin", "cos", "tan", "log2"]),
       st.one_of(st.floats(width=32), st.sampled_from([0.0, -0.0, 1e30, -1e30, 7.5, float("nan")])),
       st.sampled_from(["python", "numpy", "0-d", "(1,)", "(1, 1)"]))
def test_libm_float_of_one_value_equals_its_array_version(name, value, form):
    # rotate's and fn.transforms.rotation's angle: one value, which skips np.unique; two copies take the array path
    x = {"python": value, "numpy": np.float32(value), "0-d": np.array(value, np.float32),
         "(1,)": np.array([value], np.float32), "(1, 1)": np.array([[value]], np.float32)}[form]
    got = float32.libm_float(name, x)
    pair = np.stack([np.asarray(x, np.float32)] * 2)
    expected = float32.libm_float(name, pair)[0]
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.floats(-3, 3, width=32), st.sampled_from([0.0, -0.0])), min_size=9, max_size=9),
       st.booleans(), st.booleans(),
       st.integers(1, 13), st.integers(1, 17), st.integers(0, 2**32 - 1))
def test_a_constant_perspective_matrix_is_prepared_once_and_the_same(values, corner, inverse_map, height, width,
                                                                     seed):
    matrix = tuple(values)
    image = _image(np.random.default_rng(seed), (height, width, 3), torch.uint8)
    kwargs = dict(matrix=matrix, out_h=height + 2, out_w=width, inverse_map=inverse_map, corner=corner,
                  interp="linear", border="constant", fill_value=(5.0,))
    cached = remap.warp_perspective_image(image, **kwargs)
    key = np.array(matrix, dtype=np.float64).tobytes()  # -0.0 and 0.0 apart: they may give different matrices
    prepared = remap._constant_source_matrix(key, corner, inverse_map)
    assert prepared.tobytes() == remap.source_matrix(matrix, corner, inverse_map).tobytes()
    remap.warp_perspective_image(image, **kwargs)  # a second sample must not alter the stored matrix
    assert remap._constant_source_matrix(key, corner, inverse_map).tobytes() == prepared.tobytes()
    remap._cache_matrices = False
    try:
        assert _same(cached, remap.warp_perspective_image(image, **kwargs))
    finally:
        remap._cache_matrices = True


def _scalar(function, *args, **kwargs):
    """``function`` with the native code's AVX2 + FMA versions off: its scalar loops, their reference."""
    was = warping._native_warp.set_vector(False)
    try:
        return function(*args, **kwargs)
    finally:
        warping._native_warp.set_vector(was)


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 31), st.integers(2, 40), st.integers(1, 29), st.integers(1, 45), st.floats(-0.6, 0.6),
       st.sampled_from([0.5, 0.9, 1.0, 1.7]), st.sampled_from(_TYPES), st.sampled_from([None, 7.0]),
       st.integers(0, 2**32 - 1))
def test_the_vector_affine_rows_equal_the_scalar_ones(height, width, out_h, out_w, angle, scale, out_type, fill,
                                                       seed):
    # three-channel uint8, linear: mostly whole blocks inside the image, some crossing its edges
    rng = np.random.default_rng(seed)
    image = _image(rng, (height, width, 3), torch.uint8)
    c, s = np.cos(angle) * scale, np.sin(angle) * scale
    matrix = np.array([[c, -s, rng.uniform(-3, 6)], [s, c, rng.uniform(-3, 6)]], np.float32)
    got = warping.warp(image, matrix, out_h, out_w, fill_value=fill, interp="linear", dtype=out_type)
    assert _same(got, _scalar(warping.warp, image, matrix, out_h, out_w, fill_value=fill, interp="linear",
                              dtype=out_type))


def test_set_vector_answers_the_previous_setting():
    native = warping._native_warp
    first = native.set_vector(False)
    assert native.set_vector(first) is False
    assert native.set_vector(first) is first


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 31), st.integers(2, 40), st.integers(1, 21), st.sampled_from([7, 16, 17, 33, 48, 50]),
       st.sampled_from(sorted(remap._NATIVE_BORDERS)), st.sampled_from([0.0, 1e-3, 2e-2]), st.integers(0, 2**32 - 1))
def test_the_vector_perspective_rows_equal_the_scalar_ones(height, width, out_h, out_w, border, perspective, seed):
    # three-channel uint8, linear: the vector rows' blocks inside the image, the others and the last columns scalar
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 255, (height, width, 3), endpoint=True).astype(np.uint8)
    m = np.eye(3) + rng.normal(0, 0.1, (3, 3)) * [[1, 1, 0], [1, 1, 0], [0, 0, 0]]
    m[:2, 2] = rng.uniform(-3, 6, 2)
    m[2, :2] = rng.normal(0, perspective, 2)
    fill = remap._fill_values([rng.uniform(0, 255)], 3, np.uint8)
    got = remap._warp_native(data, m, out_h, out_w, "linear", border, fill)
    expected = _scalar(remap._warp_native, data, m, out_h, out_w, "linear", border, fill)
    assert np.array_equal(got, expected)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 13), st.integers(1, 40), st.sampled_from([1, 3, 4]), st.sampled_from(["nn", "linear"]),
       st.integers(0, 2**32 - 1))
def test_the_vector_uint8_store_equals_the_scalar_one(height, width, channels, interp, seed):
    # float32 values through an identity warp into uint8: ties, values past the range, infinities and NaN
    rng = np.random.default_rng(seed)
    values = rng.uniform(-3, 258, (height, width, channels)).astype(np.float32)
    values = np.where(rng.random(values.shape) < 0.3, np.round(values) + np.float32(0.5), values).astype(np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 0.49999997, -0.5, 254.5, 255.49998, -1.5], np.float32)
    picks = rng.random(values.shape) < 0.1
    values[picks] = rng.choice(specials, int(picks.sum()))
    image, matrix = torch.from_numpy(values), np.eye(2, 3, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        got = warping.warp(image, matrix, height, width, fill_value=None, interp=interp, dtype=torch.uint8)
        assert _same(got, _scalar(warping.warp, image, matrix, height, width, fill_value=None, interp=interp,
                                  dtype=torch.uint8))
