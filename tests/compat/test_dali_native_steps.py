"""fastload.compat.dali's native steps (``_native.c``) against the torch and numpy versions they replace, bit for
bit, on random inputs of awkward shapes and types: fn.resize's rounding and saturation to an integer type
(``resampling._round_output``), the first pass of a uint8 image read as it is (``resample_uint8``), the
filters' tap weights (``_axis_weights``), whole resizes, and fn.crop_mirror_normalize's window of a uint8
image (``crops``). The old versions stay as the fallback where the extension is not built, and are the
reference here."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastload.compat.dali import crops, resampling

pytestmark = pytest.mark.skipif(resampling._native is None, reason="fastload.compat.dali._native not built")

_INTEGER_TYPES = [torch.uint8, torch.int8, torch.uint16, torch.int16]


@contextlib.contextmanager
def _torch_only(*modules):
    saved = [module._native for module in modules]
    for module in modules:
        module._native = None
    try:
        yield
    finally:
        for module, native in zip(modules, saved):
            module._native = native


def _awkward_floats(rng, shape, spread):
    """Values around the output range, a third of them exact halves (the ties the two roundings split),
    with the odd infinity, NaN and huge value."""
    values = rng.uniform(-spread, spread, shape).astype(np.float32)
    halves = (np.floor(values) + np.float32(0.5)).astype(np.float32)
    values = np.where(rng.random(shape) < 0.35, halves, values)
    specials = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 0.49999997, -0.49999997, -0.5, 0.5], np.float32)
    picks = rng.random(shape) < 0.03
    values[picks] = rng.choice(specials, int(picks.sum()))
    return torch.from_numpy(values)


@settings(max_examples=120, deadline=None)
@given(st.integers(1, 13), st.integers(1, 17), st.sampled_from([1, 3, 4]), st.sampled_from(_INTEGER_TYPES),
       st.sampled_from(["none", "columns", "elements", "prefix"]), st.integers(0, 2 ** 32 - 1))
def test_the_native_rounding_equals_the_torch_rounding(height, width, channels, dtype, lanes, seed):
    rng = np.random.default_rng(seed)
    spread = {torch.uint8: 300, torch.int8: 150, torch.uint16: 70000, torch.int16: 35000}[dtype]
    x = _awkward_floats(rng, (height, width, channels), spread)
    even = None  # _simd_lanes' two shapes: per output column (horizontal pass), per element of a row
    if lanes == "columns":
        even = torch.from_numpy(rng.random(width) < 0.5).view(1, width, 1)
    elif lanes == "elements":
        even = torch.from_numpy(rng.random(width * channels) < 0.5).view(1, width, channels)
    elif lanes == "prefix":  # the vertical pass's lanes: whole blocks of each row, then a scalar tail
        even = (torch.arange(width * channels) < int(rng.integers(0, width * channels + 1))).view(1, width, channels)
    native = resampling._round_output(x, even, dtype)
    with _torch_only(resampling), np.errstate(invalid="ignore"):
        expected = resampling._round_output(x, even, dtype)
    assert native.dtype == expected.dtype == dtype and torch.equal(native, expected)


def test_a_strided_pass_output_rounds_as_a_contiguous_one():
    x = _awkward_floats(np.random.default_rng(5), (9, 14, 3), 300).transpose(0, 1)
    native = resampling._round_output(x, None, torch.uint8)
    with _torch_only(resampling), np.errstate(invalid="ignore"):
        assert torch.equal(native, resampling._round_output(x, None, torch.uint8))


def test_bad_rounding_buffers_are_refused_not_written_past():
    x = np.zeros(12, np.float32)
    with pytest.raises(ValueError, match="size does not match"):
        resampling._native.round_saturate(x, np.zeros(11, np.uint8), 12, 4, b"", "B")
    with pytest.raises(ValueError, match="size does not match"):
        resampling._native.round_saturate(x, np.zeros(12, np.uint8), 12, 4, b"\0\0\0", "B")
    with pytest.raises(ValueError, match="whole rows"):
        resampling._native.round_saturate(x, np.zeros(12, np.uint8), 12, 5, b"", "B")
    with pytest.raises(ValueError, match="type"):
        resampling._native.round_saturate(x, np.zeros(12, np.int32), 12, 4, b"", "i")


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 23), st.integers(1, 23), st.sampled_from([1, 3, 4]), st.sampled_from([0, 1]),
       st.integers(0, 19), st.integers(1, 7), st.integers(0, 2 ** 32 - 1))
def test_the_uint8_pass_equals_the_torch_pass_of_the_float_image(height, width, channels, axis, out_size, support,
                                                                  seed):
    rng = np.random.default_rng(seed)
    image = torch.from_numpy(rng.integers(0, 256, (height, width, channels), dtype=np.uint8))
    extent = height if axis == 0 else width
    lo = int(rng.integers(0, extent))
    hi = int(rng.integers(lo, extent))
    first = rng.integers(-5, max(height, width) + 5, out_size).astype(np.int64)
    weights = rng.normal(0, 1, (out_size, support)).astype(np.float32)
    native = resampling._native_pass(image, axis, first, weights, lo, hi)
    with _torch_only(resampling):
        expected = resampling._resample_axis(image.float(), axis, first, weights, lo, hi)
    assert torch.equal(native, expected)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 31), st.integers(1, 40), st.sampled_from([1, 3]), st.integers(1, 45), st.integers(1, 45),
       st.sampled_from(["linear", "nn", "cubic", "lanczos3", "triangular", "gaussian"]), st.booleans(),
       st.sampled_from([torch.uint8, torch.int16]), st.integers(0, 2 ** 32 - 1))
def test_a_whole_resize_equals_the_torch_resize(height, width, channels, out_h, out_w, interp, antialias, dtype,
                                                seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 256, (height, width, channels)) * (1 if dtype == torch.uint8 else 97) - 3
    image = torch.from_numpy(values.astype(np.uint8 if dtype == torch.uint8 else np.int16))
    args = dict(resize_x=out_w, resize_y=out_h, interp_type=interp, antialias=antialias)
    native = resampling.resize(image, **args)
    with _torch_only(resampling):
        expected = resampling.resize(image, **args)
    assert native.dtype == expected.dtype == dtype and torch.equal(native, expected)


def test_bad_uint8_buffers_are_refused_not_read_past():
    out = np.empty((2, 5, 3), np.float32)
    with pytest.raises(ValueError, match="resample_uint8: a buffer's size"):
        resampling._native.resample_uint8(np.zeros((4, 5, 3), np.float32), out, 4, 5, 3, 0, np.zeros(2, np.int64),
                                          np.ones((2, 1), np.float32), 2, 1, 0, 3)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["linear", "triangular", "cubic", "lanczos3", "gaussian"]), st.booleans(),
       st.floats(0.001, 600), st.integers(1, 60), st.floats(-40, 600), st.booleans())
def test_the_native_axis_weights_equal_the_numpy_ones(kind, antialias, in_extent, out_size, origin, flipped):
    in_extent, origin = np.float32(in_extent), np.float32(origin)
    flt = resampling._axis_filter(kind, antialias, in_extent, out_size)
    scale = (-in_extent if flipped else in_extent) / np.float32(out_size)
    first, weights = resampling._axis_weights(flt, out_size, origin, scale)
    with _torch_only(resampling):
        expected_first, expected_weights = resampling._axis_weights(flt, out_size, origin, scale)
    assert first.dtype == expected_first.dtype and np.array_equal(first, expected_first)
    assert weights.dtype == expected_weights.dtype == np.float32
    assert np.array_equal(weights.view(np.int32), expected_weights.view(np.int32))


@st.composite
def normalizations(draw):
    height, width, channels = draw(st.integers(1, 31)), draw(st.integers(1, 40)), draw(st.sampled_from([1, 3, 4]))
    per_channel = draw(st.booleans())
    count = channels if per_channel else 1
    values = st.floats(-300, 300)
    spreads = st.floats(0.01, 300)
    return dict(
        shape=(height, width, channels),
        crop_h=draw(st.sampled_from([0, 1, height // 2, height, height + 3])),
        crop_w=draw(st.sampled_from([0, 1, width // 3, width, width + 2])),
        crop_pos_x=draw(st.floats(0, 1)), crop_pos_y=draw(st.floats(0, 1)), mirror=draw(st.booleans()),
        mean=draw(st.lists(values, min_size=count, max_size=count)),
        std=draw(st.lists(spreads, min_size=count, max_size=count)),
        scale=draw(st.sampled_from([1.0, 1 / 255, 64.0])), shift=draw(st.sampled_from([0.0, 128.0, -0.5])),
        output_layout=draw(st.sampled_from(["CHW", "HWC", ""])),
        out_of_bounds_policy=draw(st.sampled_from(["error", "pad", "trim_to_shape"])),
        rounding=draw(st.sampled_from(["round", "truncate"])), seed=draw(st.integers(0, 2 ** 32 - 1)))


@settings(max_examples=120, deadline=None)
@given(normalizations())
def test_the_native_normalization_equals_the_torch_one(case):
    seed, shape = case.pop("seed"), case.pop("shape")
    image = torch.from_numpy(np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8))
    try:
        with _torch_only(crops):
            expected = crops.crop_mirror_normalize(image, **case)
    except ValueError:  # a window out of bounds with "error": the native path must refuse it too
        with pytest.raises(ValueError):
            crops.crop_mirror_normalize(image, **case)
        return
    native = crops.crop_mirror_normalize(image, **case)
    assert native.dtype == expected.dtype and native.shape == expected.shape and torch.equal(native, expected)


def test_a_strided_image_normalizes_as_a_contiguous_one():
    image = torch.from_numpy(np.random.default_rng(3).integers(0, 256, (17, 13, 3), dtype=np.uint8)).transpose(0, 1)
    args = dict(crop_h=9, crop_w=11, mean=[10.0, 20.0, 30.0], std=[2.0, 3.0, 5.0], mirror=True)
    with _torch_only(crops):
        expected = crops.crop_mirror_normalize(image, **args)
    assert torch.equal(crops.crop_mirror_normalize(image, **args), expected)


def test_bad_normalize_buffers_are_refused_not_read_past():
    image, ones = np.zeros((4, 5, 3), np.uint8), np.ones(3, np.float32)
    with pytest.raises(ValueError, match="not inside"):
        crops._native.normalize(image, np.zeros(27, np.float32), 4, 5, 3, 2, 0, 3, 3, ones, ones, True, False)
    with pytest.raises(ValueError, match="size does not match"):
        crops._native.normalize(image, np.zeros(26, np.float32), 4, 5, 3, 0, 0, 3, 3, ones, ones, True, False)
    with pytest.raises(ValueError, match="size does not match"):
        crops._native.normalize(image, np.zeros(27, np.float32), 4, 5, 3, 0, 0, 3, 3, ones[:2], ones, True, False)


_CROP_TYPES = [torch.uint8, torch.int8, torch.uint16, torch.int16, torch.int32, torch.float16, torch.float32,
               torch.bool]


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 13), st.integers(1, 17), st.sampled_from([1, 3]), st.sampled_from(_CROP_TYPES),
       st.integers(0, 20), st.integers(0, 20), st.floats(0, 1), st.floats(0, 1),
       st.sampled_from(["pad", "trim_to_shape", "error"]), st.sampled_from(["HWC", "CHW"]),
       st.integers(0, 2 ** 32 - 1))
def test_a_same_type_crop_equals_the_float64_crop(height, width, channels, dtype, crop_h, crop_w, pos_x, pos_y,
                                                   policy, layout, seed):
    rng = np.random.default_rng(seed)
    if dtype.is_floating_point:
        values = rng.uniform(-1e4, 1e4, (height, width, channels)).astype(np.float32)
        values[rng.random(values.shape) < 0.05] = np.nan
        image = torch.from_numpy(values).to(dtype)
    elif dtype == torch.bool:
        image = torch.from_numpy(rng.random((height, width, channels)) < 0.5)
    else:
        info = torch.iinfo(dtype)
        image = torch.from_numpy(rng.integers(info.min, info.max, (height, width, channels), endpoint=True)).to(dtype)
    if layout == "CHW":
        image = image.permute(2, 0, 1)  # strided: the copy must come out contiguous all the same
    arguments = dict(crop_h=crop_h, crop_w=crop_w, crop_pos_x=pos_x, crop_pos_y=pos_y, fill_values=[7, 300, -2.5][
        :channels] if channels == 3 else 300, out_of_bounds_policy=policy, layout=layout)
    try:
        expected = _crop_float64(image, **arguments)
    except ValueError:
        with pytest.raises(ValueError):
            crops.crop(image, **arguments)
        return
    got = crops.crop(image, **arguments)
    assert got.dtype == expected.dtype and got.shape == expected.shape and got.is_contiguous()
    assert got.view(torch.uint8).equal(expected.view(torch.uint8)) if dtype != torch.bool else got.equal(expected)


def _crop_float64(image, **arguments):
    saved, crops._EXACT_IN_DOUBLE = crops._EXACT_IN_DOUBLE, frozenset()
    try:
        return crops.crop(image, **arguments)
    finally:
        crops._EXACT_IN_DOUBLE = saved


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 9), st.integers(1, 11), st.sampled_from(_CROP_TYPES), st.lists(st.integers(-3, 12), min_size=4,
       max_size=4), st.sampled_from([[0, 1], [1, 0], [1], [2], [0, 1, 2]]), st.sampled_from(["pad", "trim_to_shape",
       "error"]), st.integers(0, 2 ** 32 - 1))
def test_a_same_type_slice_equals_the_float64_slice(height, width, dtype, bounds, axes, policy, seed):
    from fastload.compat.dali import geometry
    rng = np.random.default_rng(seed)
    if dtype.is_floating_point:
        data = torch.from_numpy(rng.uniform(-1e4, 1e4, (height, width, 3)).astype(np.float32)).to(dtype)
    elif dtype == torch.bool:
        data = torch.from_numpy(rng.random((height, width, 3)) < 0.5)
    else:
        info = torch.iinfo(dtype)
        data = torch.from_numpy(rng.integers(info.min, info.max, (height, width, 3), endpoint=True)).to(dtype)
    window = [(bounds[2 * i % 4], bounds[(2 * i + 1) % 4]) for i in range(len(axes))]
    fill = geometry._fill([5, 300, -1], dtype, 3)
    arguments = (data.permute(1, 0, 2), axes, window, policy, fill, 2, dtype)  # strided: the copy comes out contiguous
    saved, geometry._EXACT_IN_DOUBLE = geometry._EXACT_IN_DOUBLE, frozenset()
    try:
        expected = geometry.sliced(*arguments)
    except ValueError:
        with pytest.raises(ValueError):
            geometry.sliced(*arguments)
        return
    except RuntimeError:  # refused: a window past the channels with a fill value per channel
        return
    finally:
        geometry._EXACT_IN_DOUBLE = saved
    got = geometry.sliced(*arguments)
    assert got.dtype == expected.dtype and got.shape == expected.shape and got.is_contiguous()
    assert got.numpy().tobytes() == expected.numpy().tobytes()
