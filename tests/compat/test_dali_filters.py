"""fastload.compat.dali.filters against real DALI 2.4's CPU operators.

fn.gaussian_blur (sigma, window_size, both, per axis, per sample, FLOAT output, CHW, HW, sequences,
windows wider than the image) and fn.laplacian (window sizes, smoothing sizes per axis, scale, normalized
kernel, FLOAT output): the same values as DALI, exactly (tolerance 0), for uint8, int16 and float32 inputs.
Inputs are small, random and of awkward sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import assert_same_as_dali

rng = np.random.default_rng(2024)
IMAGES = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (2, 5, 1)]]


def assert_same(graph, images=IMAGES, layout="HWC", atol=0.0):
    assert_same_as_dali(graph, images, layout, atol)


SIGMAS = [np.array(v, dtype=np.float32) for v in ([0.8, 1.7], [2.5, 0.6], [1.0, 1.0])]


def test_gaussian_blur_matches_dali():
    def graph(mod, x):
        fn = mod.fn
        sigma = fn.external_source(source=lambda: SIGMAS, batch=True)
        return (fn.gaussian_blur(x, sigma=1.0), fn.gaussian_blur(x, sigma=0.7, window_size=5),
                fn.gaussian_blur(x, window_size=7), fn.gaussian_blur(x, sigma=[0.6, 2.3]),
                fn.gaussian_blur(x, window_size=[3, 9]), fn.gaussian_blur(x, sigma=3.0, window_size=3),
                fn.gaussian_blur(x, sigma=1.3, dtype=mod.types.FLOAT), fn.gaussian_blur(x, sigma=sigma))
    assert_same(graph)


def test_gaussian_blur_of_other_types_and_layouts_matches_dali():
    as_int16 = [(im.astype(np.int16) - 128) * 97 for im in IMAGES]
    assert_same(lambda mod, x: mod.fn.gaussian_blur(x, sigma=1.4), as_int16)
    as_float = [im.astype(np.float32) / 7 for im in IMAGES]
    assert_same(lambda mod, x: mod.fn.gaussian_blur(x, sigma=[1.1, 0.5]), as_float)
    chw = [np.ascontiguousarray(im.transpose(2, 0, 1)) for im in IMAGES]
    assert_same(lambda mod, x: mod.fn.gaussian_blur(x, sigma=1.2), chw, layout="CHW")
    gray = [im[..., 0].copy() for im in IMAGES]
    assert_same(lambda mod, x: mod.fn.gaussian_blur(x, window_size=5), gray, layout="HW")
    frames = [np.stack([IMAGES[0], IMAGES[0][::-1]]), IMAGES[1][None]]
    assert_same(lambda mod, x: mod.fn.gaussian_blur(x, sigma=0.9), frames, layout="FHWC")


def test_laplacian_matches_dali():
    def graph(mod, x):
        fn, f = mod.fn, mod.types.FLOAT
        return (fn.laplacian(x), fn.laplacian(x, window_size=5, dtype=f),
                fn.laplacian(x, window_size=[3, 7], smoothing_size=[1, 5], dtype=f),
                fn.laplacian(x, window_size=5, normalized_kernel=True),
                fn.laplacian(x, window_size=3, scale=[0.5, 2.0], dtype=f),
                fn.laplacian(x, window_size=9, smoothing_size=1, dtype=f),
                fn.laplacian(x, window_size=[5, 3], smoothing_size=3, normalized_kernel=True, dtype=f))
    assert_same(graph)
    as_float = [im.astype(np.float32) / 3 for im in IMAGES]
    assert_same(lambda mod, x: mod.fn.laplacian(x, window_size=7, smoothing_size=[5, 3]), as_float)


def test_laplacian_per_axis_window_without_smoothing_size_matches_dali():
    # without smoothing_size, derivative i is smoothed with window_size[i] along every other axis
    def graph(mod, x):
        fn, f = mod.fn, mod.types.FLOAT
        return (fn.laplacian(x, window_size=[3, 5]), fn.laplacian(x, window_size=[7, 3], dtype=f),
                fn.laplacian(x, window_size=[5, 9], normalized_kernel=True, dtype=f),
                fn.laplacian(x, window_size=[3, 5], normalized_kernel=True))
    assert_same(graph)
    as_float = [im.astype(np.float32) / 3 for im in IMAGES]
    assert_same(lambda mod, x: (mod.fn.laplacian(x, window_size=[3, 5]),
                                mod.fn.laplacian(x, window_size=[9, 3], normalized_kernel=True)), as_float)
    frames = [np.stack([IMAGES[0], IMAGES[0][::-1]]), IMAGES[1][None]]
    assert_same(lambda mod, x: mod.fn.laplacian(x, window_size=[5, 3], dtype=mod.types.FLOAT), frames,
                layout="FHWC")


def _pipe(graph, images=IMAGES, layout="HWC"):
    @ours.pipeline_def(batch_size=len(images), num_threads=1, device_id=None)
    def pipe():
        return graph(ours.fn.external_source(source=lambda: images, batch=True, layout=layout))
    p = pipe()
    p.build()
    return p


def test_filter_refusals_name_the_operator_and_argument():
    with pytest.raises(NotImplementedError, match="fn.gaussian_blur does not support argument.*radius"):
        _pipe(lambda x: ours.fn.gaussian_blur(x, radius=3))
    with pytest.raises(ValueError, match="fn.gaussian_blur: window_size must be odd"):
        _pipe(lambda x: ours.fn.gaussian_blur(x, window_size=4)).run()
    with pytest.raises(ValueError, match="fn.laplacian: scale cannot be given"):
        _pipe(lambda x: ours.fn.laplacian(x, scale=2.0, normalized_kernel=True))
    with pytest.raises(ValueError, match="fn.laplacian: window_size must be an odd integer"):
        _pipe(lambda x: ours.fn.laplacian(x, window_size=25)).run()
    with pytest.raises(ValueError, match="fn.gaussian_blur: dtype must be FLOAT"):
        _pipe(lambda x: ours.fn.gaussian_blur(x, sigma=1, dtype=ours.types.INT32))
    for name, graph in (("fn.gaussian_blur", lambda x: ours.fn.gaussian_blur(x.gpu(), sigma=1)),
                        ("fn.laplacian", lambda x: ours.fn.laplacian(x.gpu())),
                        ("fn.filter", lambda x: ours.fn.filter(x.gpu(), ours.types.Constant(KERNELS[0])))):
        with pytest.raises(NotImplementedError, match=f"{name} on the GPU is not supported"):
            _pipe(graph)
    assert ours.fn.experimental.filter is ours.fn.filter and ours.fn.experimental.debayer is ours.fn.debayer


KERNELS = [rng.normal(0, 0.3, size=(3, 3)).astype(np.float32), np.full((3, 5), 1 / 15, dtype=np.float32),
           np.array([[0.5, 0.5]], dtype=np.float32)]


def _kernels(mod, kernels=KERNELS):
    return mod.fn.external_source(source=lambda: kernels, batch=True)


@pytest.mark.parametrize("border", ["reflect_101", "reflect_1001", "wrap", "clamp", "constant"])
def test_filter_matches_dali(border):
    fills = [np.array(v, dtype=np.uint8) for v in (7, 200, 0)]

    def graph(mod, x):
        fn = mod.fn
        fill = fn.external_source(source=lambda: fills, batch=True)
        return (fn.filter(x, _kernels(mod), border=border),
                fn.filter(x, _kernels(mod), border=border, dtype=mod.types.FLOAT),
                fn.filter(x, _kernels(mod), fill, border=border, anchor=[0, 1]))
    assert_same(graph)


def test_filter_valid_mode_anchors_and_alias_match_dali():
    anchors = [np.array(v, dtype=np.int32) for v in ([2, 0], [1, 4], [0, 1])]

    def graph(mod, x):
        fn = mod.fn
        anchor = fn.external_source(source=lambda: anchors, batch=True)
        return (fn.filter(x, _kernels(mod), mode="valid"), fn.filter(x, _kernels(mod), anchor=anchor),
                fn.experimental.filter(x, _kernels(mod), border="wrap"))
    assert_same(graph)


def test_filter_of_16_bit_and_float_inputs_matches_dali():
    # float32 inputs, and 16-bit ones kept in their type, take OpenCV's fused multiply-add on the first
    # (W * C) // 8 * 8 values of each row: the widths here leave tails of 3, 3 and 5 values
    shapes = [(13, 17, 3), (9, 9, 3), (7, 13, 1)]
    floats = [rng.uniform(0, 90, size=s).astype(np.float32) for s in shapes]
    assert_same(lambda mod, x: (mod.fn.filter(x, _kernels(mod)), mod.fn.filter(x, _kernels(mod), border="clamp")),
                floats)
    int16 = [rng.integers(-9000, 9000, size=s).astype(np.int16) for s in shapes]
    uint16 = [rng.integers(0, 60000, size=s).astype(np.uint16) for s in shapes]
    for images in (int16, uint16):
        assert_same(lambda mod, x: (mod.fn.filter(x, _kernels(mod)),
                                    mod.fn.filter(x, _kernels(mod), dtype=mod.types.FLOAT)), images)


def test_filter_of_other_layouts_and_large_filters_matches_dali():
    chw = [np.ascontiguousarray(im.transpose(2, 0, 1)) for im in IMAGES]
    assert_same(lambda mod, x: mod.fn.filter(x, _kernels(mod)), chw, layout="CHW")
    frames = [np.stack([IMAGES[0], IMAGES[0][::-1]]), np.stack([IMAGES[1]] * 3), IMAGES[2][None]]
    assert_same(lambda mod, x: mod.fn.filter(x, _kernels(mod), border="reflect_1001"), frames, layout="FHWC")
    large = [rng.normal(0, 0.05, size=s).astype(np.float32) for s in [(11, 12), (13, 11), (8, 7)]]
    # uint8 outputs exact; float outputs of uint8 inputs through OpenCV's DFT within a few float32 ulps
    assert_same(lambda mod, x: mod.fn.filter(x, _kernels(mod, large)))
    assert_same(lambda mod, x: mod.fn.filter(x, _kernels(mod, large), dtype=mod.types.FLOAT), atol=6e-5)


def test_filter_through_opencvs_dft_matches_dali_exactly():
    # from 130 taps (float32 to float32) or 50 (16-bit data, float outputs of integer inputs) OpenCV correlates
    # through a DFT in float64, except with border "wrap", a non-zero fill_value and in "valid" mode: computed
    # so, the values are DALI's
    floats = [rng.uniform(0, 90, size=s).astype(np.float32) for s in [(24, 20, 3), (13, 17, 1)]]
    kernels = [rng.normal(0, 0.01, size=s).astype(np.float32) for s in [(12, 12), (11, 13)]]
    fills = [np.array(v, dtype=np.float32) for v in (7.5, 0.0)]

    def graph(mod, x):
        fn = mod.fn
        fill = fn.external_source(source=lambda: fills, batch=True)
        return (fn.filter(x, _kernels(mod, kernels)), fn.filter(x, _kernels(mod, kernels), border="clamp"),
                fn.filter(x, _kernels(mod, kernels), fill, border="constant", anchor=[2, 9]),
                fn.filter(x, _kernels(mod, kernels), border="wrap"), fn.filter(x, _kernels(mod, kernels), mode="valid"))
    assert_same(graph, floats)
    int16 = [rng.integers(-5000, 5000, size=s).astype(np.int16) for s in [(24, 20, 3), (9, 14, 1)]]
    small = [rng.normal(0, 0.03, size=s).astype(np.float32) for s in [(8, 7), (7, 9)]]
    assert_same(lambda mod, x: (mod.fn.filter(x, _kernels(mod, small), dtype=mod.types.FLOAT),
                                mod.fn.filter(x, _kernels(mod, small), border="reflect_1001")), int16)


def test_filter_larger_than_the_image_is_fast_and_matches_dali():
    # a 201 x 201 filter on a 64 x 64 image: through the DFT, not 40401 passes over the image
    image = [rng.uniform(0, 90, size=(64, 64, 3)).astype(np.float32)]
    huge = [rng.normal(0, 0.01, size=(201, 201)).astype(np.float32)]
    assert_same(lambda mod, x: (mod.fn.filter(x, _kernels(mod, huge)),
                                mod.fn.filter(x, _kernels(mod, huge), border="constant")), image)


MOSAICS = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(14, 18), (24, 10), (2, 4)]]


@pytest.mark.parametrize("algorithm", ["bilinear_ocv", "gray_ocv"])
def test_debayer_matches_dali(algorithm):
    positions = [np.array(v, dtype=np.int32) for v in ([0, 1], [1, 0], [1, 1])]

    def graph(mod, x):
        fn = mod.fn
        position = fn.external_source(source=lambda: positions, batch=True)
        return (fn.debayer(x, blue_position=[0, 0], algorithm=algorithm),
                fn.experimental.debayer(x, blue_position=position, algorithm=algorithm))
    assert_same(graph, MOSAICS, layout="HW")
    wide = [rng.integers(0, 65536, size=s).astype(np.uint16) for s in [(6, 12), (10, 8)]]
    assert_same(lambda mod, x: mod.fn.debayer(x, blue_position=[1, 0], algorithm=algorithm), wide, layout="HW")


def test_debayer_of_sequences_and_its_default_match_dali():
    frames = [np.stack([MOSAICS[0], MOSAICS[0][::-1]]), MOSAICS[1][None]]
    assert_same(lambda mod, x: mod.fn.debayer(x, blue_position=[1, 1]), frames, layout="FHW")
    channel = [m[..., None] for m in MOSAICS]
    assert_same(lambda mod, x: mod.fn.debayer(x, blue_position=[0, 1]), channel, layout="HWC")


def test_debayer_refusals_name_the_algorithm_and_the_device():
    with pytest.raises(NotImplementedError, match="fn.debayer.algorithm='vng_ocv'. is not supported"):
        _pipe(lambda x: ours.fn.debayer(x, blue_position=[0, 0], algorithm="vng_ocv"), MOSAICS, "HW")
    with pytest.raises(NotImplementedError, match="fn.debayer on the GPU is not supported"):
        _pipe(lambda x: ours.fn.debayer(x.gpu(), blue_position=[0, 0]), MOSAICS, "HW")
    with pytest.raises(ValueError, match="fn.debayer: the height and width of the image must be even"):
        _pipe(lambda x: ours.fn.debayer(x, blue_position=[0, 0]), [IMAGES[0][..., 0].copy()], "HW").run()
