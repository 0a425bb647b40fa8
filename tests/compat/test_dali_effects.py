"""fastload.compat.dali.effects against real DALI's CPU operators (the image effects).

fn.erase (fractional, normalized, centered, multi-region anchors; axis_names and axes; per-channel and
wrapping fill values; per-sample anchors), fn.water and fn.sphere (nearest and linear, fill, mask) and
fn.jpeg_compression_distortion (qualities 1 to 100, clamped outside, per-sample quality, a sequence): the
same pixels as DALI, exactly (tolerance 0 -- JPEG included: Pillow's libjpeg-turbo encodes and decodes as
DALI's OpenCV does). Images are small, random and of awkward sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import assert_same_as_dali, run_dali_graph


rng = np.random.default_rng(39)
IMAGES = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 3)]]


def _smooth(h: int, w: int) -> np.ndarray:
    """A photo-like image (JPEG keeps more of it than of noise, so quantisation matters)."""
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([128 + 100 * np.sin(x / 5.0 + c) * np.cos(y / 7.0) for c in range(3)], -1)
    return np.clip(base + rng.normal(0, 10, base.shape), 0, 255).astype(np.uint8)


PHOTOS = [_smooth(13, 17), _smooth(24, 9), _smooth(33, 40)]


def run(mod, images, graph, layout="HWC"):
    """Every output of ``graph(mod, x)`` over ``images`` fed as one batch, per sample, as arrays."""
    return run_dali_graph(mod, images, graph, layout, seed=1)


def assert_same(graph, images=IMAGES, layout="HWC"):
    assert_same_as_dali(graph, images, layout)


ANCHORS = [np.array(v, dtype=np.float32) for v in ([2.5, 3.7], [-1.2, 4.5], [10.6, 0.2])]


def test_erase_matches_dali():
    def graph(mod, x):
        fn = mod.fn
        anchor = fn.external_source(source=lambda: ANCHORS, batch=True)
        return (fn.erase(x, anchor=[3.3, 2.5], shape=[5.5, 4.49]),
                fn.erase(x, anchor=[3.7, 2.5, 8.0, 1.0], shape=[5.2, 4.5, 2.0, 3.0], fill_value=[118, 185, 0]),
                fn.erase(x, anchor=[0.11, 0.4], shape=[0.3, 0.2625], normalized=True, centered_anchor=True),
                fn.erase(x, anchor=[0.25], shape=[4.0], axis_names="W", normalized_anchor=True, fill_value=-3),
                fn.erase(x, anchor=[2.0, 1.5], shape=[0.5, 3.0], normalized_shape=True, fill_value=300.7),
                fn.erase(x, anchor=[1, 0], shape=[2, 1], axes=[1, 0], fill_value=7),
                fn.erase(x, anchor=[1], shape=[1], axis_names="C", fill_value=9),
                fn.erase(x, anchor=anchor, shape=[6, 5], centered_anchor=True, fill_value=100.5))
    assert_same(graph)


@pytest.mark.parametrize("interp", ["INTERP_NN", "INTERP_LINEAR"])
def test_water_and_sphere_match_dali(interp):
    masks = [np.array(m, dtype=np.int32) for m in (1, 0, 1)]

    def graph(mod, x):
        fn, it = mod.fn, getattr(mod.types, interp)
        mask = fn.external_source(source=lambda: masks, batch=True)
        return (fn.water(x, interp_type=it),
                fn.water(x, ampl_x=3.5, ampl_y=7.25, freq_x=0.3, freq_y=0.2, phase_x=1.0, phase_y=-0.5,
                         fill_value=7.9, interp_type=it, mask=mask),
                fn.sphere(x, interp_type=it),
                fn.sphere(x, fill_value=200, interp_type=it, mask=mask))
    assert_same(graph)


def test_water_and_sphere_of_float_images_match_dali():
    images = [im.astype(np.float32) / 3 for im in IMAGES]
    assert_same(lambda mod, x: (mod.fn.water(x, ampl_x=2.5, fill_value=1.5, interp_type=mod.types.INTERP_LINEAR),
                                mod.fn.sphere(x, fill_value=-4.25)), images)


def test_jpeg_compression_distortion_matches_dali():
    qualities = [np.array(q, dtype=np.int32) for q in (3, 77, 100)]

    def graph(mod, x):
        fn = mod.fn
        q = fn.external_source(source=lambda: qualities, batch=True)
        return (fn.jpeg_compression_distortion(x), fn.jpeg_compression_distortion(x, quality=1),
                fn.jpeg_compression_distortion(x, quality=95), fn.jpeg_compression_distortion(x, quality=0),
                fn.jpeg_compression_distortion(x, quality=q))
    assert_same(graph, PHOTOS)


def test_jpeg_compression_distortion_of_a_sequence_matches_dali():
    frames = [np.stack([PHOTOS[0], PHOTOS[0][::-1].copy()]), np.stack([PHOTOS[1]])]
    assert_same(lambda mod, x: mod.fn.jpeg_compression_distortion(x, quality=20), frames, layout="FHWC")


def test_refusals_name_themselves():
    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def unknown_argument():
        x = ours.fn.external_source(source=lambda: IMAGES[:1], batch=True, layout="HWC")
        return ours.fn.water(x, wobble=3)
    with pytest.raises(NotImplementedError, match="fn.water does not support argument.*wobble"):
        unknown_argument()

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def cubic():
        x = ours.fn.external_source(source=lambda: IMAGES[:1], batch=True, layout="HWC")
        return ours.fn.sphere(x, interp_type=ours.types.INTERP_CUBIC)
    with pytest.raises(NotImplementedError, match="fn.sphere supports interp_type"):
        cubic()

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def on_gpu():
        x = ours.fn.external_source(source=lambda: IMAGES[:1], batch=True, layout="HWC")
        return ours.fn.jpeg_compression_distortion(x.gpu())
    with pytest.raises(NotImplementedError, match="fn.jpeg_compression_distortion on the GPU is not supported"):
        on_gpu()
