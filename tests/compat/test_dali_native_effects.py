"""fastload.compat.dali's colour maps, displacement sampler and convolution pass in native code
(``_native_effects.c``) against their torch/numpy versions, bit for bit, on random images of awkward sizes and
types; the DALI comparisons (tests/compat/test_dali_imageops.py, test_dali_pointwise.py, test_dali_effects.py,
test_dali_filters.py) run through the native code where it is built."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastload.compat.dali import colour, effects, filters, remap

native = colour._native
pytestmark = pytest.mark.skipif(native is None, reason="fastload.compat.dali._native_effects not built")

_TYPES = {"uint8": torch.uint8, "float32": torch.float32}


@contextlib.contextmanager
def reference(module):
    """``module``'s torch/numpy version (its native code switched off) inside the block."""
    saved, module._native = module._native, None
    try:
        yield
    finally:
        module._native = saved


def _image(rng, shape, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.uint8:
        return torch.from_numpy(rng.integers(0, 256, shape).astype(np.uint8))
    values = rng.uniform(-40, 300, shape).astype(np.float32)
    values[rng.random(shape) < 0.05] = 127.5  # ties of the rounding
    return torch.from_numpy(values)


def _same(a: torch.Tensor, b: torch.Tensor, any_nan: bool = False) -> None:
    """Bit for bit; with ``any_nan``, a NaN matches any NaN (which of two NaN operands a float32 operation
    returns, and so the result's sign bit, follows the compiler's operand order, in torch as here)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    if any_nan and a.dtype == torch.float32:
        both = a.isnan() & b.isnan()
        a, b = a.masked_fill(both, float("nan")), b.masked_fill(both, float("nan"))
    assert torch.equal(a.view(torch.uint8) if a.dtype == torch.uint8 else a.view(torch.int32),
                       b.view(torch.uint8) if b.dtype == torch.uint8 else b.view(torch.int32))


sizes = st.tuples(st.integers(0, 31), st.integers(1, 40))
types = st.sampled_from(sorted(_TYPES))
seeds = st.integers(0, 2 ** 32 - 1)


@settings(max_examples=60, deadline=None)
@given(sizes, types, st.sampled_from([None, "uint8", "float32"]), seeds,
       st.tuples(st.floats(0, 2), st.floats(0, 2), st.floats(-200, 200), st.floats(0, 3)))
def test_colour_twist_and_brightness_contrast_equal_their_torch_versions(size, kind, out, seed, args):
    rng = np.random.default_rng(seed)
    image = _image(rng, (*size, 3), _TYPES[kind])
    if rng.random() < 0.3:
        image = image.flip(1)  # a strided view
    dtype = None if out is None else _TYPES[out]
    brightness, contrast, hue, saturation = args
    for run in (lambda: colour.color_twist(image, brightness, contrast, hue, saturation, dtype=dtype),
                lambda: colour.hsv(image, hue, saturation, contrast, dtype=dtype),
                lambda: colour.brightness_contrast(image, brightness, float(rng.uniform(-1, 1)), contrast,
                                                   dtype=dtype)):
        state = rng.bit_generator.state
        got = run()
        rng.bit_generator.state = state
        with reference(colour):
            _same(got, run())


@settings(max_examples=60, deadline=None)
@given(st.tuples(st.integers(1, 31), st.integers(1, 40)), st.sampled_from([1, 3, 4]), types,
       st.sampled_from(["nn", "linear"]), seeds, st.tuples(st.integers(0, 23), st.integers(1, 29)))
def test_the_sampler_equals_its_torch_version(size, channels, kind, interp, seed, out_size):
    rng = np.random.default_rng(seed)
    image = _image(rng, (*size, channels), _TYPES[kind])
    span = max(size) + 4
    xs = rng.uniform(-4, span, out_size).astype(np.float32)
    ys = rng.uniform(-4, span, out_size).astype(np.float32)
    xs[rng.random(out_size) < 0.1] = np.float32(2.5)  # points on pixel centres and edges
    ys[rng.random(out_size) < 0.1] = np.float32(-0.5)
    edges = np.array([size[1], size[0], -1e-8, -0.0, np.nan, np.inf, -np.inf, 1e20, -1e20], np.float32)
    for points in (xs, ys):  # the last pixel's far edge, just below zero, NaN, infinities, far outside
        chosen = rng.random(out_size) < 0.15
        points[chosen] = rng.choice(edges, int(chosen.sum()))
    fill = float(rng.choice([0.0, 118.0, 255.0])) if kind == "uint8" else float(rng.uniform(-5, 300))
    got = effects.sample_at(image, xs, ys, fill, interp)
    with reference(effects):
        _same(got, effects.sample_at(image, xs, ys, fill, interp), any_nan=True)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 31), st.integers(1, 40), types, st.sampled_from(["nn", "linear"]))
def test_water_and_sphere_equal_their_torch_versions(height, width, kind, interp):
    image = _image(np.random.default_rng(height * 41 + width), (height, width, 3), _TYPES[kind])
    for xs, ys in (effects.sphere_points(height, width),
                   effects.water_points(height, width, 6.0, 3.5, 0.3, 0.2, 0.1, 1.0)):
        got = effects.sample_at(image, xs, ys, 7.0, interp)
        with reference(effects):
            _same(got, effects.sample_at(image, xs, ys, 7.0, interp))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 31), st.integers(1, 40), st.sampled_from([1, 3, 4]), types, st.sampled_from(["nn", "linear"]),
       seeds)
def test_fn_water_and_fn_sphere_equal_their_torch_versions(height, width, channels, kind, interp, seed):
    rng = np.random.default_rng(seed)
    image = _image(rng, (height, width, channels), _TYPES[kind])
    if rng.random() < 0.3:
        image = image.flip(0)  # a strided view
    fill = float(rng.choice([0.0, 118.0])) if kind == "uint8" else float(rng.uniform(-5, 300))
    waves = {"ampl_x": float(rng.uniform(-12, 12)), "ampl_y": float(rng.uniform(-12, 12)),
             "freq_x": float(rng.uniform(-9, 9)), "freq_y": float(rng.uniform(0, 1)),
             "phase_x": float(rng.uniform(-300, 300)), "phase_y": float(rng.uniform(-3, 3))}  # sinf/cosf's range
    for run in (lambda: effects.water_image(image, fill, interp, **waves),
                lambda: effects.water_image(image, fill, interp),
                lambda: effects.sphere_image(image, fill, interp)):
        got = run()
        with reference(effects):
            _same(got, run())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 13), min_size=1, max_size=3), st.sampled_from(["uint8", "float32"]), seeds,
       st.integers(1, 9), st.booleans())
def test_the_convolution_pass_equals_its_numpy_version(shape, kind, seed, size, scaled):
    rng = np.random.default_rng(seed)
    data = _image(rng, tuple(shape), _TYPES[kind]).numpy()
    window = rng.normal(0, 1, size).astype(np.float32)
    axis = int(rng.integers(0, len(shape)))
    scale = float(rng.uniform(-2, 2)) if scaled else None
    got = filters.correlate_axis(data, window, axis, scale)
    with reference(filters):
        expected = filters.correlate_axis(data, window, axis, scale)
    _same(torch.from_numpy(got), torch.from_numpy(expected))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 31), st.integers(1, 40), st.sampled_from([1, 3, 4]), types,
       st.tuples(st.sampled_from([1, 3, 5, 7, 9, 21]), st.sampled_from([1, 3, 5, 7, 9, 21])), seeds)
def test_gaussian_blur_equals_its_numpy_version(height, width, channels, kind, window_sizes, seed):
    # windows longer than the image too (several reflections); HWC in one native pass, CHW pass by pass
    image = _image(np.random.default_rng(seed), (height, width, channels), _TYPES[kind])
    for dtype in (None, torch.float32):
        for layout, data in (("HWC", image), ("CHW", image.permute(2, 0, 1))):
            got = filters.gaussian_blur_image(data, layout, 0.0, list(window_sizes), dtype)
            with reference(filters):
                _same(got, filters.gaussian_blur_image(data, layout, 0.0, list(window_sizes), dtype))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 31), st.integers(1, 40), st.sampled_from([1, 3, 4]), types, seeds)
def test_grid_mask_equals_its_torch_version(height, width, channels, kind, seed):
    rng = np.random.default_rng(seed)
    image = _image(rng, (height, width, channels), _TYPES[kind])
    if kind == "float32":
        image[0, 0, 0] = -3.0  # a negative value masked gives -0.0, as the torch version's product
    args = (int(rng.integers(1, 12)), float(rng.uniform(0, 1)), float(rng.uniform(-7, 7)), float(rng.uniform(-20, 20)),
            float(rng.uniform(-20, 20)))
    got = remap.grid_mask_image(image, *args)
    with reference(remap):
        _same(got, remap.grid_mask_image(image, *args))


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 77), seeds)
def test_nan_infinities_and_ties_convert_as_convert_sat_does(count, seed):
    rng = np.random.default_rng(seed)
    special = np.array([np.nan, np.inf, -np.inf, 0.5, -0.5, 254.5, 255.5, 1.5, -0.0, 1e10, -1e10, 0.49999997],
                       np.float32)
    values = rng.uniform(-300, 600, count).astype(np.float32)
    chosen = rng.random(count) < 0.5
    values[chosen] = rng.choice(special, int(chosen.sum()))
    like = torch.zeros(1, dtype=torch.uint8)
    got = filters._finish(values, like, None)
    with reference(filters):
        _same(got, filters._finish(values, like, None))


def test_bad_buffers_are_refused_not_read_past():
    src, small = np.zeros(12, np.uint8), np.zeros(11, np.uint8)
    matrix = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError, match="size does not match"):
        native.linear_color(src, small, 4, "B", "B", matrix, 0.0)
    with pytest.raises(ValueError, match="types"):
        native.scale_shift(src, src, 12, "h", "B", 1.0, 0.0)
    with pytest.raises(ValueError, match="size does not match"):
        native.sample(src, np.zeros(6, np.uint8), 2, 2, 3, "B", np.zeros(3, np.float32), np.zeros(2, np.float32),
                      0.0, False)
    with pytest.raises(ValueError, match="size does not match"):
        native.water(src, small, 2, 2, 3, "B", (1.0, 1.0, 0.1, 0.1, 0.0, 0.0), 0.0, False)
    with pytest.raises(ValueError, match="size does not match"):
        native.sphere(src, small, 2, 2, 3, "B", 0.0, False)
    with pytest.raises(ValueError, match="size does not match"):
        native.correlate(src, np.zeros(12, np.float32), 2, 3, 3, "B", np.ones(3, np.float32), None)
    with pytest.raises(ValueError, match="empty window"):
        native.correlate(src, np.zeros(12, np.float32), 1, 4, 3, "B", np.ones(0, np.float32), None)
    with pytest.raises(ValueError, match="size does not match"):
        native.grid_mask(src, small, 2, 2, 3, "B", 1.0, 0.0, 0.0, 0.0, 0.5)
    with pytest.raises(ValueError, match="size does not match"):
        native.blur_hwc(src, small, 2, 2, 3, "B", "B", np.ones(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="empty window"):
        native.blur_hwc(src, src, 2, 2, 3, "B", "B", np.ones(0, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="size does not match"):
        native.to_uint8(np.zeros(3, np.float32), small, 3)
