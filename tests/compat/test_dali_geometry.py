"""fastload.compat.dali.geometry (and fn.resize's region of interest) against real DALI 2.4's CPU operators,
output by output: same shape, dtype and layout, and values equal unless a test states a tolerance.

Each test builds one graph with several uses of an operator and runs it once in each library on small random
images of awkward sizes (one pipeline per library per test keeps the file fast)."""

from __future__ import annotations

import io

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali

pytestmark = pytest.mark.usefixtures("quiet_iterators")

BATCH = 4
rng = np.random.default_rng(393)
SIZES = [(17, 23), (31, 9), (2, 5), (40, 33)]
IMAGES = [rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8) for h, w in SIZES]
ANGLES = [np.float32(a) for a in rng.uniform(-180, 180, size=BATCH)]
MATRICES = [np.array([[1.1, 0.3, -2.5], [-0.2, 0.9, 4.25]], dtype=np.float32) + rng.uniform(-0.1, 0.1, (2, 3))
            .astype(np.float32) for _ in range(BATCH)]
OUT_SIZES = [np.array(s, dtype=np.int32) for s in ((9, 14), (20, 3), (1, 1), (33, 40))]


def images(fn, layout="HWC"):
    return fn.external_source(source=lambda: IMAGES, batch=True, layout=layout)


def run(mod, graph, batch: int = BATCH) -> list[list[tuple[np.ndarray, str]]]:
    """Every output of ``graph`` built with ``mod`` (real DALI or fastload's): per sample (array, layout)."""
    @mod.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=7)
    def pipe():
        return graph(mod)
    p = pipe()
    p.build()
    return [[(np.array(out.at(i)), out.layout()) for i in range(batch)] for out in p.run()]


def assert_matches_dali(graph, atol: float = 0, max_off: float = 0.0, batch: int = BATCH) -> None:
    """Same shapes, dtypes and layouts; values within ``atol``, except at most a ``max_off`` fraction of
    each output's values, which may be off by at most one level more (a source point on a pixel boundary)."""
    dali = import_dali()
    theirs, mine = run(dali, graph, batch), run(ours, graph, batch)
    assert len(theirs) == len(mine)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, ((a, a_layout), (b, b_layout)) in enumerate(zip(a_out, b_out)):
            assert a.shape == b.shape, (k, i, a.shape, b.shape)
            assert a.dtype == b.dtype, (k, i, a.dtype, b.dtype)
            assert a_layout == b_layout, (k, i, a_layout, b_layout)
            if not a.size:
                continue
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            off = diff > atol
            assert off.mean() <= max_off and (diff[off] <= atol + 1).all(), \
                f"output {k} sample {i}: {off.sum()} of {a.size} values differ, by up to {diff.max()}"


# ---------------------------------------------------------------------------------------- warp_affine

def warp_graph(mod):
    fn, types = mod.fn, mod.types
    img = images(fn)
    angle = fn.external_source(source=lambda: ANGLES, batch=True)
    mats = fn.external_source(source=lambda: MATRICES, batch=True)
    sizes = fn.external_source(source=lambda: OUT_SIZES, batch=True)
    rot = fn.transforms.rotation(angle=angle, center=[8.0, 6.5])
    const = [0.8, -0.35, 3.5, 0.4, 1.2, -2.0]
    return (fn.warp_affine(img, matrix=const, fill_value=17),
            fn.warp_affine(img, matrix=const, size=(20.6, 13.2)),  # border clamp, rounded size
            fn.warp_affine(img, rot),  # the matrix as a second input, per sample
            fn.warp_affine(img, matrix=mats, inverse_map=False, interp_type=types.INTERP_NN, fill_value=300),
            fn.warp_affine(img, matrix=rot, dtype=types.FLOAT, fill_value=0.0),
            fn.warp_affine(img, rot, size=sizes, inverse_map=False))


def test_warp_affine_matches_dali():
    # equal to DALI, uint8 and float outputs (inverse_map=False inverts in float32 as DALI does; the
    # per-sample matrices come from fastload's fn.transforms, equal to DALI's to the bit)
    assert_matches_dali(warp_graph)


# ------------------------------------------------------------------------------------------ slice, pad

SLICE_ANCHORS = [np.array(a, dtype=np.float32) for a in ((0.1, 0.25), (0.5, 0.0), (0.0, 0.5), (0.33, 0.71))]
SLICE_SHAPES = [np.array(s, dtype=np.float32) for s in ((0.5, 0.5), (0.5, 1.0), (1.0, 0.5), (0.4, 0.2))]
ABS_ANCHORS = [np.array(a, dtype=np.int32) for a in ((-3, 2), (4, 25), (1, 0), (30, -7))]
ABS_SHAPES = [np.array(s, dtype=np.int32) for s in ((10, 12), (8, 9), (3, 4), (15, 20))]
VOLUMES = [rng.integers(-50, 50, size=(d, 6, 7), dtype=np.int16) for d in (3, 1, 5, 2)]


def slice_graph(mod):
    fn, types = mod.fn, mod.types
    img = images(fn)
    anchor = fn.external_source(source=lambda: SLICE_ANCHORS, batch=True)
    shape = fn.external_source(source=lambda: SLICE_SHAPES, batch=True)
    abs_anchor = fn.external_source(source=lambda: ABS_ANCHORS, batch=True)
    abs_shape = fn.external_source(source=lambda: ABS_SHAPES, batch=True)
    vol = fn.external_source(source=lambda: VOLUMES, batch=True)
    plain = fn.external_source(source=lambda: [v[0] for v in VOLUMES], batch=True)  # 2-D, no layout
    outs = [fn.slice(img, anchor, shape),  # relative, (x, y) order: axis_names "WH"
            fn.slice(plain, start=[1, 2], shape=[5, 3], out_of_bounds_policy="pad"),  # axes (1, 0)
            fn.slice(img, abs_anchor, abs_shape, out_of_bounds_policy="pad", fill_values=[9, 300, -1]),
            fn.slice(img, abs_anchor, abs_shape, out_of_bounds_policy="trim_to_shape"),
            fn.slice(img, anchor, shape, axis_names="HW", dtype=types.FLOAT),
            fn.slice(img, abs_anchor, abs_shape, normalized_anchor=False, normalized_shape=False,
                     out_of_bounds_policy="constant", fill_values=3),
            fn.slice(img, rel_start=[0.25, 0.1], rel_end=[0.75, 0.95]),
            fn.slice(img, start=[2, 1], shape=[3, 1]),
            fn.slice(img, start=[1, 0], end=[2, 2], axes=[0, 1]),
            fn.slice(img, rel_start=0.125, rel_shape=0.5, axis_names="W"),
            fn.slice(img, rel_start=0.25, rel_end=0.75, axis_names="H"),  # a 2-row image: halves (0.5, 1.5)
            fn.slice(img, anchor, shape, axis_names="HW", normalized_shape=False),
            fn.slice(img, start=abs_anchor, shape=abs_shape, out_of_bounds_policy="pad"),  # per-sample arguments
            fn.slice(vol, start=[1, -2], shape=[4, 9], axes=[1, 2], out_of_bounds_policy="pad", fill_values=-7)]
    for policy in ("edge", "reflect", "reflect_101", "wrap"):
        outs.append(fn.slice(img, abs_anchor, abs_shape, out_of_bounds_policy=policy))
    return tuple(outs)


def test_slice_matches_dali():
    assert_matches_dali(slice_graph)


def pad_graph(mod):
    fn = mod.fn
    img = images(fn)
    vol = fn.external_source(source=lambda: VOLUMES, batch=True)
    return (fn.pad(img, axes=[0, 1], shape=[41, 35], fill_value=5),
            fn.pad(img, axis_names="W", shape=1, align=8),  # alignment only
            fn.pad(img, axes=(0,), shape=(20,), align=(4,), fill_value=-1),  # smaller than some samples
            fn.pad(vol, shape=[6, 8, 9], fill_value=-3))


def test_pad_matches_dali():
    assert_matches_dali(pad_graph)


# ------------------------------------------------------------------------- colour, peek_image_shape

GRAYS = [img[..., :1].copy() for img in IMAGES]
SPACES = ("RGB", "BGR", "YCbCr", "GRAY")


def color_graph(mod):
    fn, types = mod.fn, mod.types
    img = images(fn)
    gray = fn.external_source(source=lambda: GRAYS, batch=True, layout="HWC")
    outs = []
    for source in SPACES:
        for target in SPACES:
            if source != target:
                outs.append(fn.color_space_conversion(gray if source == "GRAY" else img,
                                                      image_type=getattr(types, source),
                                                      output_type=getattr(types, target)))
    return tuple(outs)


def test_color_space_conversion_matches_dali():
    assert_matches_dali(color_graph)


def encoded_images() -> list[np.ndarray]:
    """A JPEG turned by its EXIF orientation, a grey PNG, an RGB JPEG."""
    from PIL import Image
    out = []
    for size, mode, fmt, orientation in (((13, 7), "RGB", "JPEG", 6), ((5, 9), "L", "PNG", None),
                                         ((21, 4), "RGB", "JPEG", 3), ((8, 8), "RGB", "JPEG", 8)):
        image = Image.fromarray(rng.integers(0, 256, size=(size[1], size[0], 3 if mode == "RGB" else 1),
                                             dtype=np.uint8).squeeze())
        buffer = io.BytesIO()
        exif = Image.Exif()
        if orientation:
            exif[0x0112] = orientation
        image.save(buffer, fmt, exif=exif.tobytes()) if orientation else image.save(buffer, fmt)
        out.append(np.frombuffer(buffer.getvalue(), dtype=np.uint8))
    return out


ENCODED = encoded_images()


def peek_graph(mod):
    fn, types = mod.fn, mod.types
    data = fn.external_source(source=lambda: ENCODED, batch=True)
    return (fn.peek_image_shape(data), fn.peek_image_shape(data, adjust_orientation=False),
            fn.peek_image_shape(data, dtype=types.INT32, image_type=types.GRAY))


def test_peek_image_shape_matches_dali():
    assert_matches_dali(peek_graph)


# ------------------------------------------------------------------------------------ fn.resize's ROI

ROI_STARTS = [np.array(r, dtype=np.float32) for r in ((2.5, 3.0), (30.0, 1.0), (0.0, 4.5), (5.25, 30.0))]
ROI_ENDS = [np.array(r, dtype=np.float32) for r in ((15.0, 20.0), (4.0, 8.0), (2.0, 0.5), (38.0, 2.0))]


def resize_roi_graph(mod):
    fn, types = mod.fn, mod.types
    img = images(fn)
    start = fn.external_source(source=lambda: ROI_STARTS, batch=True)
    end = fn.external_source(source=lambda: ROI_ENDS, batch=True)
    return (fn.resize(img, size=(11, 7), roi_start=start, roi_end=end),  # per sample; reversed ones flip
            fn.resize(img, resize_x=30, resize_y=25, roi_start=(0.1, 0.2), roi_end=(0.9, 0.6), roi_relative=True,
                      interp_type=types.INTERP_CUBIC),
            fn.resize(img, resize_shorter=9.4, subpixel_scale=False),
            fn.resize(img, resize_x=6.7, resize_y=13.3, roi_start=(1, 1), roi_end=(2, 4), dtype=types.FLOAT))


def test_resize_roi_matches_dali():
    # imageops.resize reproduces DALI's CPU resampler (tests/compat/test_dali_imageops.py): equal, the float
    # output too (measured)
    assert_matches_dali(resize_roi_graph)


def test_legacy_ops_are_the_same_operators():
    def graph(mod):
        img = images(mod.fn)
        return (mod.ops.WarpAffine(matrix=[0.5, 0.1, 2.0, -0.2, 1.5, 1.0], fill_value=3)(img),
                mod.ops.Slice(start=[1, 0], shape=[2, 2], out_of_bounds_policy="pad")(img),
                mod.ops.Pad(axes=[0], shape=[48])(img),
                mod.ops.ColorSpaceConversion(image_type=mod.types.RGB, output_type=mod.types.BGR)(img))
    assert_matches_dali(graph)


def test_what_fastload_does_not_run_as_dali_is_refused():
    """One test (each one's teardown collects garbage for a second on a loaded 2-core machine)."""
    fn, types = ours.fn, ours.types
    with pytest.raises(ValueError, match="interpolation"):  # DALI's warp has NN and linear only
        fn.warp_affine(images(fn), matrix=[1, 0, 0, 0, 1, 0], interp_type=types.INTERP_CUBIC)
    with pytest.raises(NotImplementedError, match="CHW"):
        fn.warp_affine(images(fn, "CHW"), matrix=[1, 0, 0, 0, 1, 0])
    with pytest.raises(NotImplementedError, match="border_mode"):
        fn.warp_affine(images(fn), matrix=[1, 0, 0, 0, 1, 0], border_mode="reflect")
    with pytest.raises(NotImplementedError, match="fn.pad"):  # to the batch's largest sample
        fn.pad(images(fn), axes=[0])
    with pytest.raises(NotImplementedError, match="fn.pad"):
        fn.pad(images(fn), axes=[0, 1], shape=[-1, 40])
    with pytest.raises(NotImplementedError, match="HSV"):
        fn.color_space_conversion(images(fn), image_type=types.RGB, output_type="HSV")
    with pytest.raises(NotImplementedError, match="ANY_DATA"):
        fn.peek_image_shape(images(fn), image_type=types.ANY_DATA)
    with pytest.raises(Exception, match="out_of_bounds_policy"):  # DALI's default policy is "error"
        run(ours, lambda mod: mod.fn.slice(images(mod.fn), start=[20, 0], shape=[10, 1]))
