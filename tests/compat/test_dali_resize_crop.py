"""fastload.compat.dali.resize_crop against real DALI 2.4's CPU operators.

fn.decoders.image_crop and its deprecated names (windows at fixed and per-sample positions, both roundings,
RGB, GRAY and BGR, float output) on small JPEGs of awkward sizes: the same pixels as DALI, exactly.
fn.tensor_resize and fn.experimental.tensor_resize (sizes and scales per axes or axis_names, roundings,
alignments, regions, modes, max_size, filters) of HWC images, 2-D arrays (float and uint8) and 1-D arrays:
the same values as DALI, exactly.

fn.resize_crop_mirror and fn.fast_resize_crop_mirror (size modes, crop windows inside and past the resized
image, each mirror bit, filters, float output, per-sample arguments): the same pixels as DALI, exactly
(tolerance 0). Images are small, random and of awkward sizes.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import fastload.compat.dali as ours

from conftest import import_dali, run_dali_graph

rng = np.random.default_rng(2024)
IMAGES = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 3), (5, 33, 1)]]


def outputs(mod, graph, images=IMAGES, layout="HWC"):
    """Each output of ``graph(mod, x)`` as its layout and per-sample arrays."""
    return run_dali_graph(mod, images, graph, layout, layouts=True)


def assert_same(graph, images=IMAGES, layout="HWC"):
    theirs, mine = outputs(import_dali(), graph, images, layout), outputs(ours, graph, images, layout)
    assert len(theirs) == len(mine)
    assert [out[0] for out in theirs] == [out[0] for out in mine], "layouts differ"
    theirs, mine = [out[1] for out in theirs], [out[1] for out in mine]
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, i, a.dtype, b.dtype, a.shape, b.shape)
            differ = a != b
            assert not differ.any(), f"output {k} sample {i}: {int(differ.sum())} values differ"


# ------------------------------------------------------------------------------------- resize_crop_mirror

def test_resize_crop_mirror_matches_dali():
    mirrors = [np.int32(m) for m in (1, 0, 3, 2)]
    positions = [np.float32(p) for p in (0.0, 0.25, 1.0, 0.6)]
    windows = [np.float32(w) for w in ((3, 4), (9, 2), (5, 5), (1, 7))]

    def graph(mod, x):
        fn, t = mod.fn, mod.types
        mirror = fn.external_source(source=lambda: mirrors, batch=True)
        pos = fn.external_source(source=lambda: positions, batch=True)
        window = fn.external_source(source=lambda: windows, batch=True)
        return (fn.resize_crop_mirror(x, crop=(7, 5), resize_x=30, resize_y=21),
                fn.resize_crop_mirror(x, crop=(7, 5), resize_shorter=11, crop_pos_x=0.3, crop_pos_y=0.8, mirror=1),
                fn.resize_crop_mirror(x, crop_h=9, crop_w=12, resize_x=14, crop_pos_x=0.0, crop_pos_y=1.0, mirror=2),
                fn.resize_crop_mirror(x, crop=(20, 20), size=(10, 8), mirror=3),  # past the edges: clamped
                fn.resize_crop_mirror(x, crop=(6, 7), size=(40, 50), interp_type=t.INTERP_CUBIC, crop_pos_x=0.61),
                fn.resize_crop_mirror(x, crop=(1, 2), resize_longer=9, interp_type=t.INTERP_NN, mirror=1),
                fn.resize_crop_mirror(x, crop=(6, 7), size=(9, 11), dtype=t.FLOAT, mirror=1, rounding="truncate",
                                      crop_pos_y=0.33),
                fn.resize_crop_mirror(x, resize_x=15, mode="not_smaller", max_size=20, mirror=mirror),
                fn.resize_crop_mirror(x, crop=(5, 5), size=(7, 7), antialias=False, interp_type=t.INTERP_LANCZOS3,
                                      crop_pos_x=pos),
                fn.resize_crop_mirror(x, crop=(3, 4), size=(7.5, 6.3), mirror=1, crop_pos_x=0.9),
                fn.resize_crop_mirror(x, crop=window, size=(12, 10), mirror=mirror, crop_pos_y=pos),
                mod.ops.ResizeCropMirror(crop=(4, 4), resize_y=6)(x))
    assert_same(graph)


def test_fast_resize_crop_mirror_is_resize_crop_mirror_without_antialias():
    def graph(mod, x):
        fn = mod.fn
        return (fn.fast_resize_crop_mirror(x, crop=(5, 5), size=(7, 6), mirror=1),
                fn.fast_resize_crop_mirror(x, crop=(4, 3), resize_shorter=5, antialias=True, crop_pos_y=0.1),
                mod.ops.FastResizeCropMirror(crop=(3, 3), size=(20, 4))(x))
    assert_same(graph)


def refused(graph, match, error=NotImplementedError, images=None):
    with pytest.raises(error, match=match):
        outputs(ours, graph, images or IMAGES[:1])


def test_resize_crop_mirror_refusals():
    refused(lambda mod, x: mod.fn.resize_crop_mirror(x, crop=(20, 20), size=(10, 8), interp_type=mod.types.INTERP_NN),
            "INTERP_NN")  # DALI reads outside the image there
    refused(lambda mod, x: mod.fn.resize_crop_mirror(x, crop_d=3, crop_h=2, crop_w=2, size=4), "crop_d")
    refused(lambda mod, x: mod.fn.resize_crop_mirror(x, crop=2, size=4, min_filter=mod.types.INTERP_NN),
            "min_filter")


# ---------------------------------------------------------------------------------------- decoders.image_crop

def _jpeg(array: np.ndarray) -> np.ndarray:
    out = io.BytesIO()
    Image.fromarray(array.squeeze(-1) if array.shape[-1] == 1 else array).save(out, format="JPEG", quality=85)
    return np.frombuffer(out.getvalue(), dtype=np.uint8)


JPEGS = [_jpeg(rng.integers(0, 256, size=(h, w, c), dtype=np.uint8)) for h, w, c in
         ((33, 47, 3), (64, 20, 3), (17, 17, 1), (8, 90, 3))]


def test_image_crop_matches_dali():
    positions = [np.float32(p) for p in (0.0, 0.45, 1.0, 0.7)]
    windows = [np.float32(w) for w in ((3, 4), (9, 2), (5, 5), (1, 7))]

    def graph(mod, data):
        fn, t = mod.fn, mod.types
        pos = fn.external_source(source=lambda: positions, batch=True)
        window = fn.external_source(source=lambda: windows, batch=True)
        return (fn.decoders.image_crop(data, crop=(7, 12)),
                fn.decoders.image_crop(data, crop_h=5, crop_w=7, crop_pos_x=0.3, crop_pos_y=0.9, rounding="truncate"),
                fn.decoders.image_crop(data, crop=(8, 17), crop_pos_x=pos, crop_pos_y=pos),
                fn.decoders.image_crop(data, crop=(5, 6), dtype=t.FLOAT, crop_pos_x=0.2),
                fn.decoders.image_crop(data, crop=window, crop_pos_x=pos),
                fn.decoders.image_crop(data, crop=(4, 4), output_type=t.GRAY),
                fn.decoders.image_crop(data, crop=(3, 9), output_type=t.BGR, crop_pos_y=0.0),
                fn.image_decoder_crop(data, crop=(6, 6), crop_pos_x=0.11),
                fn.experimental.decoders.image_crop(data, crop=(6, 5)),
                mod.ops.decoders.ImageCrop(crop=(2, 3))(data),
                mod.ops.ImageDecoderCrop(crop=(3, 2))(data))
    assert_same(graph, JPEGS, layout="")


def test_image_crop_refusals():
    def crop(**args):
        return lambda mod, x: mod.fn.decoders.image_crop(x, **args)
    refused(crop(crop=(10, 12)), "out of bounds", Exception, JPEGS[3:])  # an error in DALI too
    refused(lambda mod, x: mod.fn.decoders.image_crop(x, crop=(2, 2), dtype=mod.types.INT16), "INT16", images=JPEGS)
    refused(crop(crop=(2, 2), use_fast_idct=True), "use_fast_idct", images=JPEGS)
    refused(crop(crop_h=2), "crop_h and crop_w", ValueError, JPEGS)


# ---------------------------------------------------------------------------------------------- tensor_resize

ARRAYS_2D = [rng.normal(size=s).astype(np.float32) for s in [(13, 17), (24, 9), (31, 40), (5, 33)]]
BYTES_2D = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17), (24, 9), (5, 33)]]
ARRAYS_1D = [rng.normal(size=s).astype(np.float32) for s in [(13,), (24,), (5,)]]
IMAGES_RGB = [image for image in IMAGES if image.shape[-1] == 3]


def test_tensor_resize_of_images_matches_dali():
    def graph(mod, x):
        fn, t = mod.fn, mod.types
        return (fn.tensor_resize(x, sizes=[7, 30], axes=[0, 1]),
                fn.tensor_resize(x, sizes=[7, 30], axis_names="HW", interp_type=t.INTERP_CUBIC),
                fn.tensor_resize(x, scales=[0.55, 1.37], axes=[0, 1], alignment=[0.2, 0.9], size_rounding="ceil"),
                fn.tensor_resize(x, scales=[0.55, 1.37], axes=[0, 1], alignment=0.0, size_rounding="truncate",
                                 dtype=t.FLOAT),
                fn.tensor_resize(x, scales=[0.55, 1.37], axes=[0, 1], roi_start=[2, 3], roi_end=[10, 7]),
                fn.tensor_resize(x, sizes=[6, 0], axes=[0, 1]),  # the kept axis counts in the mean scale
                fn.tensor_resize(x, sizes=[6], axes=[0], interp_type=t.INTERP_NN),
                fn.tensor_resize(x, sizes=[60, 5], axes=[0, 1], mode="stretch", max_size=[20, 30]),
                fn.tensor_resize(x, sizes=[5, 4, 3]),
                fn.tensor_resize(x, sizes=[5.5, 4.4], axes=[0, 1], roi_start=[0.9, 0.1], roi_end=[0.2, 0.8],
                                 roi_relative=True),
                fn.tensor_resize(x, sizes=[9, 9], axes=[1, 0], antialias=False, interp_type=t.INTERP_LANCZOS3),
                fn.experimental.tensor_resize(x, sizes=[8, 3], axes=[0, 1]),
                mod.ops.TensorResize(scales=[1.5, 0.5], axes=[0, 1])(x))
    assert_same(graph, IMAGES_RGB)


@pytest.mark.parametrize("arrays", [ARRAYS_2D, BYTES_2D], ids=["float", "uint8"])
def test_tensor_resize_of_2d_arrays_matches_dali(arrays):
    def graph(mod, x):
        fn, t = mod.fn, mod.types
        return (fn.tensor_resize(x, sizes=[7, 30]),
                fn.tensor_resize(x, scales=[0.7, 1.3], alignment=[0.0, 1.0]),
                fn.tensor_resize(x, sizes=[11], axes=[1], interp_type=t.INTERP_CUBIC),
                fn.tensor_resize(x, sizes=[4, 4], dtype=t.FLOAT),
                fn.tensor_resize(x, sizes=[6, 5], mode="not_larger"),
                fn.tensor_resize(x, sizes=[6, 5], mode="not_smaller", max_size=[30, 25]),
                fn.tensor_resize(x, sizes=[6.6, 0]))
    assert_same(graph, arrays, layout="")


def test_tensor_resize_of_1d_arrays_matches_dali():
    def graph(mod, x):
        fn, t = mod.fn, mod.types
        return (fn.tensor_resize(x, sizes=[7]), fn.tensor_resize(x, scales=[2.3], alignment=0.0),
                fn.tensor_resize(x, sizes=[50], interp_type=t.INTERP_CUBIC))
    assert_same(graph, ARRAYS_1D, layout="")


def test_tensor_resize_refusals():
    # DALI resamples the channels too here (all axes are spatial to it): 3 channels from 1
    refused(lambda mod, x: mod.fn.tensor_resize(x, sizes=[5, 4, 3]), "last axis", images=[IMAGES[3]])
    refused(lambda mod, x: mod.fn.tensor_resize(x, sizes=[5, 4], scales=[1, 2]), "one of sizes and scales",
            ValueError)
    refused(lambda mod, x: mod.fn.tensor_resize(x, sizes=[5], axis_names="D"), "axis_names", ValueError)
