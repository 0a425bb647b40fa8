"""fastload.compat.dali.pointwise against real DALI's CPU operators.

fn.brightness, fn.contrast, fn.hue and fn.saturation (uint8, int16 and float inputs, dtype, per-sample
arguments, sequences), fn.lookup_table (every integer input type, repeated keys, output types) and fn.equalize
(grey, RGB and many-channel images, sequences, one-valued channels): the same values as DALI, exactly
(tolerance 0). fn.normalize: computed statistics over several axes, ddof, epsilon, scale/shift, given and
per-sample tensor mean/stddev: float outputs within a relative 1e-5 (DALI's SSE reciprocal square root),
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
