"""fastload.compat.dali.pointwise against real DALI's CPU operators.

fn.brightness, fn.contrast, fn.hue and fn.saturation (uint8, int16 and float inputs, dtype, per-sample
arguments, sequences), fn.lookup_table (every integer input type, repeated keys, output types) and fn.equalize
(grey, RGB and many-channel images, sequences, one-valued channels): the same values as DALI, exactly
(tolerance 0). fn.normalize: computed statistics over several axes, ddof, epsilon, scale/shift, given and
per-sample tensor mean/stddev: float outputs within a relative 1e-6 (DALI's SSE reciprocal square root),
integer outputs within 1; with scalar mean and stddev given, exactly. Inputs are small, random and of
awkward sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali, run_dali_graph


rng = np.random.default_rng(2024)
IMAGES = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 3)]]
FLOATS = [(im.astype(np.float32) / 255 * 1.3 - 0.15) for im in IMAGES]
INT16 = [rng.integers(-3000, 3000, size=s, dtype=np.int16) for s in [(7, 5, 3), (4, 11, 3)]]


def outputs(images, graph, layout="HWC"):
    """DALI's and fastload's outputs of ``graph(mod, x)``, per output and sample, as arrays."""
    dali = import_dali()
    theirs = run_dali_graph(dali, images, graph, layout, seed=1)
    mine = run_dali_graph(ours, images, graph, layout, seed=1)
    assert len(theirs) == len(mine)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, i, a.dtype, b.dtype, a.shape, b.shape)
    return theirs, mine


def assert_same(graph, images=IMAGES, layout="HWC"):
    theirs, mine = outputs(images, graph, layout)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            same = (a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else a == b
            assert same.all(), f"output {k} sample {i}: {int((~same).sum())} values differ"


def per_sample(values, dtype=np.float32):
    return [np.array(v, dtype=dtype) for v in values]


# ------------------------------------------------------------------------------------ brightness, contrast

def _colour_graph(mod, x):
    fn, types = mod.fn, mod.types
    b = fn.external_source(source=lambda: per_sample([0.5, 1.7, 1.0]), batch=True)
    return (fn.brightness(x), fn.brightness(x, brightness=1.37, brightness_shift=0.11),
            fn.brightness(x, brightness=0.6, dtype=types.FLOAT), fn.brightness(x, brightness_shift=-0.3,
                                                                                dtype=types.INT16),
            fn.brightness(x, brightness=b, brightness_shift=0.05),
            fn.contrast(x), fn.contrast(x, contrast=1.7), fn.contrast(x, contrast=0.4, contrast_center=100.3),
            fn.contrast(x, contrast=1.3, dtype=types.FLOAT), fn.contrast(x, contrast=b, contrast_center=0.25),
            fn.hue(x, hue=37.5), fn.hue(x, hue=-120, dtype=types.FLOAT), fn.hue(x, hue=b, image_type=types.BGR),
            fn.saturation(x, saturation=0.37), fn.saturation(x, saturation=2.5, dtype=types.UINT8),
            fn.saturation(x, saturation=b))


@pytest.mark.parametrize("images", [IMAGES, FLOATS], ids=["uint8", "float32"])
def test_brightness_contrast_hue_saturation_match_dali(images):
    assert_same(_colour_graph, images)


def test_colour_operators_of_int16_and_float16_inputs_match_dali():
    def graph(mod, x):
        fn = mod.fn
        return (fn.brightness(x, brightness=1.5, brightness_shift=0.1), fn.contrast(x, contrast=1.5),
                fn.hue(x, hue=20), fn.saturation(x, saturation=0.3))
    assert_same(graph, INT16)
    halves = [f.astype(np.float16) for f in FLOATS[:2]]  # only the ColorTwist ones take float16 (as DALI)
    assert_same(lambda mod, x: (mod.fn.hue(x, hue=-33.0), mod.fn.saturation(x, saturation=1.4)), halves)


def test_colour_operators_of_sequences_match_dali():
    frames = [np.stack([IMAGES[0], IMAGES[0][::-1]]), IMAGES[1][None]]

    def graph(mod, x):
        fn = mod.fn
        return (fn.brightness(x, brightness=0.8), fn.contrast(x, contrast=2.0), fn.hue(x, hue=75.0),
                fn.saturation(x, saturation=1.8))
    assert_same(graph, frames, layout="FHWC")


def test_colour_refusals_name_themselves():
    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def chw():
        x = ours.fn.external_source(source=lambda: IMAGES[:1], batch=True, layout="CHW")
        return ours.fn.brightness(x, brightness=2.0)
    with pytest.raises(NotImplementedError, match="fn.brightness of CHW input is not supported"):
        chw()

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def unknown():
        x = ours.fn.external_source(source=lambda: IMAGES[:1], batch=True, layout="HWC")
        return ours.fn.hue(x, value=2.0)
    with pytest.raises(NotImplementedError, match="fn.hue does not support argument.*value"):
        unknown()


def test_image_type_is_refused_by_brightness_and_contrast_as_dali():
    # DALI's Brightness and Contrast schemas have no image_type (Hue and Saturation do)
    def build(mod, op):
        @mod.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe():
            x = mod.fn.external_source(source=lambda: IMAGES[:1], batch=True, layout="HWC")
            return op(mod)(x, image_type=mod.types.BGR)
        pipe().build()

    dali = import_dali()
    for name in ("brightness", "contrast"):
        with pytest.raises(KeyError, match=f'"image_type" is not defined for operator "{name.capitalize()}"'):
            build(dali, lambda mod: getattr(mod.fn, name))
        with pytest.raises(KeyError, match=f"'image_type' is not defined for operator fn.{name}"):
            build(ours, lambda mod: getattr(mod.fn, name))
    for name in ("hue", "saturation"):
        build(dali, lambda mod: getattr(mod.fn, name))
        build(ours, lambda mod: getattr(mod.fn, name))


# -------------------------------------------------------------------------------------------- lookup_table

KEYS, VALUES = [0, 2, 3, 4, 5, 3, 200, 1000], [0.2, 300.7, -2.5, 0.5, 1.5, 2.5, 255.49, 7.0]


def test_lookup_table_of_every_integer_type_matches_dali():
    def graph(mod, x):
        fn, types = mod.fn, mod.types
        return (fn.lookup_table(x, keys=KEYS, values=VALUES, default_value=0.99),
                fn.lookup_table(x, keys=KEYS, values=VALUES, default_value=-7.6, dtype=types.UINT8),
                fn.lookup_table(x, keys=KEYS, values=VALUES, default_value=-7.5, dtype=types.INT16))
    for dtype in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64):
        info = np.iinfo(dtype)
        edges = np.array([v for v in (0, 1, 2, 3, 4, 5, 6, 199, 200, 201, 999, 1000, 1001, -1, -200)
                          if info.min <= v <= info.max] + [info.max, info.min], dtype=dtype)
        data = [np.concatenate([edges, rng.integers(0, min(int(info.max), 1200), size=40).astype(dtype)]),
                rng.integers(0, min(int(info.max), 300), size=21).astype(dtype)]
        assert_same(graph, data, layout="")


def test_lookup_table_output_types_match_dali():
    data = [rng.integers(0, 8, size=(5, 4, 3)).astype(np.uint8), np.arange(9, dtype=np.uint8).reshape(3, 3, 1)]

    def graph(mod, x):
        fn, types = mod.fn, mod.types
        return tuple(fn.lookup_table(x, keys=[0, 2, 3, 5], values=[300.7, -2.5, 0.5, 70000.4], default_value=-7.6,
                                     dtype=getattr(types, t))
                     for t in ("FLOAT16", "FLOAT64", "BOOL", "INT32", "UINT16", "INT8")) + (
            fn.lookup_table(x, default_value=3.25), fn.lookup_table(x, keys=[1], values=[1.0]))
    assert_same(graph, data)


def test_lookup_table_refusals_name_themselves():
    for kwargs, error, message in [({"keys": [0, 1], "values": [1.0]}, ValueError, "keys has 2 values and values 1"),
                                   ({"keys": [70000], "values": [1.0]}, ValueError, r"keys must be in \[0, 65535\]"),
                                   ({"wobble": 1}, NotImplementedError, "fn.lookup_table does not support.*wobble")]:
        @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def bad():
            x = ours.fn.external_source(source=lambda: IMAGES[:1], batch=True)
            return ours.fn.lookup_table(x, **kwargs)
        with pytest.raises(error, match=message):
            bad()
    with pytest.raises(TypeError, match="fn.lookup_table takes integer inputs"):
        run_dali_graph(ours, FLOATS[:1], lambda mod, x: mod.fn.lookup_table(x, keys=[1], values=[2.0]))


# ------------------------------------------------------------------------------------------------ equalize

def _spread(h: int, w: int, c: int | None) -> np.ndarray:
    """A low-contrast image (equalizing stretches it), with a few gaps in its histogram."""
    shape = (h, w) if c is None else (h, w, c)
    return (rng.integers(60, 110, size=shape) // 3 * 3).astype(np.uint8)


def test_equalize_matches_dali():
    images = [_spread(13, 17, 3), _spread(24, 9, 3), IMAGES[2], np.full((5, 6, 3), 77, np.uint8),
              np.dstack([np.full((4, 5), 3, np.uint8), _spread(4, 5, None), np.zeros((4, 5), np.uint8)])]
    with pytest.warns(DeprecationWarning, match="experimental.equalize"):  # DALI's, for its deprecated name
        assert_same(lambda mod, x: (mod.fn.equalize(x), mod.fn.experimental.equalize(x)), images)


def test_equalize_of_grey_many_channel_and_sequence_inputs_matches_dali():
    assert_same(lambda mod, x: mod.fn.equalize(x), [_spread(13, 17, None), _spread(31, 40, None)], layout="HW")
    assert_same(lambda mod, x: mod.fn.equalize(x), [_spread(9, 8, 5), _spread(3, 11, 1)])
    assert_same(lambda mod, x: mod.fn.equalize(x), [np.stack([_spread(9, 8, 3), _spread(9, 8, 3)]),
                                                    _spread(7, 5, 3)[None]], layout="FHWC")


def test_equalize_refuses_chw_the_gpu_and_other_types():
    with pytest.raises(NotImplementedError, match="fn.equalize of CHW input is not supported"):
        run_dali_graph(ours, IMAGES[:1], lambda mod, x: mod.fn.equalize(x), layout="CHW")
    with pytest.raises(NotImplementedError, match="fn.equalize on the GPU is not supported"):
        run_dali_graph(ours, IMAGES[:1], lambda mod, x: mod.fn.equalize(x.gpu()))
    with pytest.raises(TypeError, match="fn.equalize takes uint8 images"):
        run_dali_graph(ours, FLOATS[:1], lambda mod, x: mod.fn.equalize(x))


# ----------------------------------------------------------------------------------------------- normalize

def assert_close(graph, images, layout="HWC", rtol=1e-6):
    """Float outputs within ``rtol`` of the output's scale, integer ones within 1 (DALI's SSE rsqrt)."""
    theirs, mine = outputs(images, graph, layout)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            if a.dtype.kind == "f":
                limit = rtol * max(1.0, float(np.abs(a.astype(np.float64)).max(initial=0)))
            else:
                limit = 1
            assert diff.max(initial=0) <= limit, f"output {k} sample {i}: off by {diff.max()} (limit {limit})"


def test_normalize_with_computed_statistics_matches_dali():
    def graph(mod, x):
        fn, types = mod.fn, mod.types
        return (fn.normalize(x), fn.normalize(x, axes=[0, 1]), fn.normalize(x, axis_names="HW", ddof=1),
                fn.normalize(x, axes=[1], epsilon=0.5, scale=2.0, shift=3.0), fn.normalize(x, axes=[2]),
                fn.normalize(x, axes=[0, 1], scale=64, shift=128, dtype=types.UINT8),
                fn.normalize(x, axis_names="C", scale=1000, dtype=types.INT16),
                fn.normalize(x, mean=100.0, axes=[0]), fn.normalize(x, stddev=40.0, axis_names="W"))
    assert_close(graph, IMAGES)
    assert_close(lambda mod, x: (mod.fn.normalize(x), mod.fn.normalize(x, axes=[0, 1], ddof=2),
                                 mod.fn.normalize(x, axes=[2]), mod.fn.normalize(x, axis_names="HW", ddof=1)), FLOATS)


def test_normalize_with_given_statistics_matches_dali():
    def graph(mod, x):
        fn, types = mod.fn, mod.types
        return (fn.normalize(x, mean=120.5, stddev=37.25), fn.normalize(x, mean=3.0, stddev=-2.5, shift=0.25),
                fn.normalize(x, mean=128, stddev=64, scale=100, shift=128, dtype=types.UINT8),
                fn.normalize(x, mean=10.0, stddev=3.0, epsilon=2.0, scale=0.5, dtype=types.INT32))
    assert_same(graph)


def test_normalize_with_per_sample_tensors_matches_dali():
    means = [rng.random((1, 1, 3), dtype=np.float32) * 200 for _ in IMAGES]
    rows = [rng.random((im.shape[0], 1, 1), dtype=np.float32) * 50 + 1 for im in IMAGES]
    stds = [np.array([[[30.0, 0.0, 70.5]]], dtype=np.float32) for _ in IMAGES]
    ones = [np.array(v, dtype=np.float32).reshape(1, 1, 1) for v in (100.0, 50.0, 7.0)]

    def graph(mod, x):
        fn = mod.fn
        mean = fn.external_source(source=lambda: means, batch=True)
        row = fn.external_source(source=lambda: rows, batch=True)
        std = fn.external_source(source=lambda: stds, batch=True)
        one = fn.external_source(source=lambda: ones, batch=True)
        return (fn.normalize(x, mean=one), fn.normalize(x, stddev=one, epsilon=1.0),
                fn.normalize(x, mean=mean), fn.normalize(x, mean=mean, stddev=std),
                fn.normalize(x, stddev=row, ddof=1), fn.normalize(x, mean=mean, stddev=std, epsilon=3.0),
                fn.normalize(x, stddev=std, axes=[0, 1], scale=2.0))
    assert_close(graph, IMAGES)


def test_normalize_of_constant_and_tiny_samples_matches_dali():
    images = [np.full((4, 5, 3), 9, np.uint8), np.arange(6, dtype=np.uint8).reshape(1, 2, 3)]

    def graph(mod, x):
        fn = mod.fn
        return (fn.normalize(x), fn.normalize(x, epsilon=1.0), fn.normalize(x, axes=[0], ddof=1, shift=5.0),
                fn.normalize(x, axes=[0], ddof=2, epsilon=0.25, shift=5.0))
    assert_close(graph, images)


def test_normalize_refusals_name_themselves():
    with pytest.raises(NotImplementedError, match=r"fn.normalize\(batch=True\) is not supported"):
        run_dali_graph(ours, IMAGES[:1], lambda mod, x: mod.fn.normalize(x, batch=True))
    with pytest.raises(ValueError, match="axis_names 'HQ' names axes not in"):
        run_dali_graph(ours, IMAGES[:1], lambda mod, x: mod.fn.normalize(x, axis_names="HQ"))
    with pytest.raises(ValueError, match=r"axes \[-1\] are outside 0..2"):
        run_dali_graph(ours, IMAGES[:1], lambda mod, x: mod.fn.normalize(x, axes=[-1]))
    scalars = [np.array(5.0, dtype=np.float32)]
    with pytest.raises(ValueError, match=r"mean of shape \(\) does not broadcast"):  # as DALI
        run_dali_graph(ours, IMAGES[:1], lambda mod, x: mod.fn.normalize(
            x, mean=mod.fn.external_source(source=lambda: scalars, batch=True)))
    with pytest.raises(ValueError, match="give axes or axis_names, not both"):
        run_dali_graph(ours, IMAGES[:1], lambda mod, x: mod.fn.normalize(x, axes=[0], axis_names="H"))


# --------------------------------------------------------------------------------------------------- clahe

def _photo(h: int, w: int, c: int) -> np.ndarray:
    """A smooth low-contrast image with noise (CLAHE's tiles then differ, and clipping matters)."""
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([110 + 40 * np.sin(x / 5.0 + k) * np.cos(y / 7.0) for k in range(c)], -1)
    return np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8)


def _clahe_graph(mod, x, luma_only=True):
    # tiles that divide the sizes and tiles that do not (OpenCV pads), more tiles than pixels, no clipping
    return tuple(mod.fn.clahe(x, tiles_x=tx, tiles_y=ty, clip_limit=clip, luma_only=luma_only)
                 for tx, ty, clip in ((4, 3, 2.0), (8, 8, 40.0), (1, 1, 1.5), (2, 5, 0.0), (3, 4, 0.7), (40, 30, 3.0)))


def test_clahe_of_one_channel_matches_dali():
    images = [_photo(13, 17, 1), _photo(24, 9, 1), rng.integers(0, 256, (16, 24, 1), dtype=np.uint8)]
    assert_same(_clahe_graph, images)


def test_clahe_of_each_channel_matches_dali():
    images = [_photo(31, 40, 3), _photo(16, 24, 3), IMAGES[1]]
    assert_same(lambda mod, x: _clahe_graph(mod, x, luma_only=False), images)


def test_clahe_refusals_name_themselves():
    with pytest.raises(NotImplementedError, match="fn.clahe of 3-channel images with luma_only=True"):
        run_dali_graph(ours, IMAGES[:1], lambda mod, x: mod.fn.clahe(x, tiles_x=2, tiles_y=2, clip_limit=2.0))
    with pytest.raises(NotImplementedError, match="fn.clahe on the GPU is not supported"):
        run_dali_graph(ours, IMAGES[:1], lambda mod, x: mod.fn.clahe(x.gpu(), tiles_x=2, tiles_y=2, clip_limit=2.0,
                                                                     luma_only=False))
    with pytest.raises(ValueError, match="tiles_x and tiles_y must be positive"):
        run_dali_graph(ours, IMAGES[:1], lambda mod, x: mod.fn.clahe(x, tiles_x=0, tiles_y=2, clip_limit=2.0))
    with pytest.raises(TypeError, match="fn.clahe takes uint8 HWC images of 1 or 3 channels"):
        run_dali_graph(ours, FLOATS[:1], lambda mod, x: mod.fn.clahe(x, tiles_x=2, tiles_y=2, clip_limit=2.0))


def test_output_layouts_of_an_input_without_one_match_dali():
    dali = import_dali()
    layouts = []
    for mod in (dali, ours):
        @mod.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe():
            x = mod.fn.external_source(source=lambda: IMAGES[:1], batch=True, layout="")
            return (mod.fn.brightness(x), mod.fn.saturation(x), mod.fn.lookup_table(x), mod.fn.normalize(x),
                    mod.fn.clahe(x, tiles_x=2, tiles_y=2, clip_limit=2.0, luma_only=False))
        p = pipe()
        p.build()
        layouts.append([out.layout() for out in p.run()])
    assert layouts[0] == layouts[1]
