"""fastload.compat.dali.boxes against real DALI 2.4's CPU operators.

fn.coord_flip and fn.bbox_rotate give DALI's values exactly (tolerance 0; bbox_rotate's float32 steps
included). The random ones (fn.roi_random_crop, fn.random_crop_generator,
fn.segmentation.random_mask_pixel) cannot match DALI's generator: their dtypes and shapes are DALI's, the
properties DALI guarantees hold on every sample of both (so the properties are DALI's), and one seed gives
the same values twice. Inputs are small, random and of awkward sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali

rng = np.random.default_rng(47)


def run(mod, inputs, graph, seed=1, layouts=None):
    """Every output of ``graph(mod, *nodes)`` with one external source per batch in ``inputs``, per sample."""
    batch = len(inputs[0])

    @mod.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=seed)
    def pipe():
        nodes = [mod.fn.external_source(source=(lambda values: (lambda: values))(values), batch=True,
                                        layout=(layouts[k] if layouts else None))
                 for k, values in enumerate(inputs)]
        out = graph(mod, *nodes)
        return tuple(out) if isinstance(out, list) else out
    p = pipe()
    p.build()
    outs = p.run()
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return [[np.array(out.at(i)) for i in range(batch)] for out in outs]


def assert_same(inputs, graph, layouts=None, exact=True):
    dali = import_dali()
    theirs, mine = run(dali, inputs, graph, layouts=layouts), run(ours, inputs, graph, layouts=layouts)
    assert len(theirs) == len(mine)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, i, a.dtype, b.dtype, a.shape, b.shape)
            if exact:
                assert np.array_equal(a, b), f"output {k} sample {i}:\n{a}\n{b}"
    return theirs, mine


def _boxes(n: int, ltrb: bool = True) -> np.ndarray:
    lo = rng.uniform(0, 0.7, size=(n, 2))
    extent = rng.uniform(0.02, 0.3, size=(n, 2))
    return np.concatenate([lo, lo + extent if ltrb else extent], 1).astype(np.float32)


# ------------------------------------------------------------------------------------------ coord_flip

def test_coord_flip_matches_dali():
    points = [rng.uniform(-0.2, 1.2, size=s).astype(np.float32) for s in [(7, 2), (1, 2), (13, 2)]]
    points3 = [rng.uniform(0, 1, size=s).astype(np.float32) for s in [(5, 3), (9, 3), (0, 3)]]
    centre = [np.array(v, np.float32) for v in (0.25, 0.5, 0.8123)]
    flip = [np.array(v, np.int32) for v in (0, 1, 1)]
    assert_same([points, centre, flip], lambda mod, x, c, f: (
        mod.fn.coord_flip(x),
        mod.fn.coord_flip(x, flip_x=0, flip_y=1, center_y=0.37),
        mod.fn.coord_flip(x, layout="yx", flip_x=1, flip_y=1, center_x=c),
        mod.fn.coord_flip(x, flip_y=f, center_x=0.1)))
    assert_same([points3], lambda mod, x: (
        mod.fn.coord_flip(x, flip_z=1, center_z=0.3), mod.fn.coord_flip(x, layout="zxy", flip_y=1, flip_x=0)))


# ----------------------------------------------------------------------------------------- bbox_rotate

def test_bbox_rotate_matches_dali():
    boxes = [_boxes(n) for n in (5, 1, 9)]
    labels = [rng.integers(0, 9, size=(len(b),), dtype=np.int32) for b in boxes]
    angles = [np.array(v, np.float32) for v in (17.5, -93.0, 181.25)]
    shapes = [np.array(v, np.int64) for v in ([31, 40, 3], [13, 17, 3], [24, 9, 3])]
    assert_same([boxes, labels, angles, shapes], lambda mod, b, lab, a, s: (
        *mod.fn.bbox_rotate(b, lab, angle=a, input_shape=s),
        *mod.fn.bbox_rotate(b, lab, angle=a, input_shape=s, keep_size=True, remove_threshold=0.4),
        *mod.fn.bbox_rotate(b, lab, angle=a, input_shape=s, mode="fixed"),
        mod.fn.bbox_rotate(b, angle=a, input_shape=s, mode="halfway", size=[33.7, 21.0]),
        mod.fn.bbox_rotate(b, angle=30.0, input_shape=[24, 37])))


def test_bbox_rotate_layouts_matches_dali():
    wh = [_boxes(n, ltrb=False) for n in (4, 6, 2)]
    pixels = [b * np.float32(40) for b in wh]
    labels = [rng.integers(0, 9, size=(len(b), 1), dtype=np.int32) for b in wh]
    assert_same([wh, pixels, labels], lambda mod, b, p, lab: (
        *mod.fn.bbox_rotate(b, lab, angle=63.0, input_shape=[3, 40, 31], shape_layout="CWH", bbox_layout="xyWH",
                            keep_size=True),
        mod.fn.bbox_rotate(p, angle=-41.0, input_shape=[45, 40], bbox_normalized=False, mode="fixed"),
        mod.fn.bbox_rotate(p, angle=120.0, input_shape=[45, 40], bbox_normalized=False, bbox_layout="xyWH")))


# ---------------------------------------------------------------------------------------- random windows

def _same_seed_same_values(inputs, graph, layouts=None):
    first, again = run(ours, inputs, graph, seed=5, layouts=layouts), run(ours, inputs, graph, seed=5, layouts=layouts)
    other = run(ours, inputs, graph, seed=6, layouts=layouts)
    assert all(np.array_equal(a, b) for out_a, out_b in zip(first, again) for a, b in zip(out_a, out_b))
    assert any(not np.array_equal(a, b) for out_a, out_b in zip(first, other) for a, b in zip(out_a, out_b))
    return first


ROI_CASES = [  # crop_shape, roi_start, roi_end, in_shape (None: unbounded)
    ([6, 3], [7, 1], [9, 2], [10, 4]),     # ROI smaller than the window, at the edge
    ([4, 5], [1, 2], [12, 17], [13, 17]),  # ROI larger
    ([5, 5], [3, 3], [8, 8], [31, 40]),    # ROI as large as the window
    ([9, 2], [2, 4], [5, 11], None),       # unbounded: may cross the edges
] * 4


def _check_roi_window(start, crop, roi_start, roi_end, bounds):
    for d, s in enumerate(start.tolist()):
        extent = roi_end[d] - roi_start[d]
        if extent >= crop[d]:  # the window is inside the ROI
            assert roi_start[d] <= s and s + crop[d] <= roi_end[d]
        else:  # the ROI is inside the window (as far as the bounds allow)
            if bounds is None or roi_end[d] - crop[d] >= 0 and roi_start[d] + crop[d] <= bounds[d]:
                assert s <= roi_start[d] and s + crop[d] >= roi_end[d]
        if bounds is not None:
            assert 0 <= s and s + crop[d] <= bounds[d]


def test_roi_random_crop_properties_as_dali():
    crop = [np.array(c[0], np.int32) for c in ROI_CASES]
    start = [np.array(c[1], np.int32) for c in ROI_CASES]
    end = [np.array(c[2], np.int32) for c in ROI_CASES]
    bounded = [np.array(c[3] or [99, 99], np.int32) for c in ROI_CASES]

    def graph(mod, c, s, e, b):
        return (mod.fn.roi_random_crop(crop_shape=c, roi_start=s, roi_end=e, in_shape=b),
                mod.fn.roi_random_crop(crop_shape=c, roi_start=s, roi_shape=e - s),
                mod.fn.roi_random_crop(crop_shape=[4, 2], roi_start=[3, 1], roi_end=[5, 2], in_shape=[6, 3]))
    inputs = [crop, start, end, bounded]
    theirs, mine = assert_same(inputs, graph, exact=False)
    for outputs in (theirs, mine):
        for i, (crop_i, roi_start, roi_end, bounds) in enumerate(ROI_CASES):
            bounds = bounds or [99, 99]
            _check_roi_window(outputs[0][i], crop_i, roi_start, roi_end, bounds)
            _check_roi_window(outputs[1][i], crop_i, roi_start, roi_end, None)
            _check_roi_window(outputs[2][i], [4, 2], [3, 1], [5, 2], [6, 3])
    # every start the rule allows is drawn: [5 - 4, 6 - 4] and [2 - 2, 1]
    allowed = {(1, 0), (1, 1), (2, 0), (2, 1)}
    assert {tuple(v) for v in mine[2]} == allowed and {tuple(v) for v in theirs[2]} == allowed
    _same_seed_same_values(inputs, graph)
    # the input's own shape bounds the window
    images = [np.zeros(s, np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 3)]]
    a, b = assert_same([images], lambda mod, x: mod.fn.roi_random_crop(x, crop_shape=[8, 6, 3], roi_start=[2, 1, 0],
                                                                         roi_shape=[3, 2, 3]), exact=False)
    for outputs in (a, b):
        for image, s in zip(images, outputs[0]):
            _check_roi_window(s, [8, 6, 3], [2, 1, 0], [5, 3, 3], image.shape)
    with pytest.raises(ValueError, match="roi_end or roi_shape"):
        ours.fn.roi_random_crop(crop_shape=[2], roi_start=[1])


def test_random_crop_generator_as_dali():
    shapes = [np.array(s, np.int64) for s in [(100, 120, 3), (31, 40, 3), (13, 170, 1), (90, 24, 3)] * 16]
    graph = lambda mod, s: tuple(mod.fn.random_crop_generator(s, random_area=[0.2, 0.9],  # noqa: E731
                                                              random_aspect_ratio=[0.5, 1.5]))
    theirs, mine = assert_same([shapes], graph, exact=False)
    for outputs in (theirs, mine):
        for (height, width, _), anchor, size in zip(shapes, outputs[0], outputs[1]):
            y, x, h, w = (*anchor.tolist(), *size.tolist())
            assert 0 <= y and y + h <= height and 0 <= x and x + w <= width and h > 0 and w > 0
    fractions = [[float(np.prod(size)) / (s[0] * s[1]) for s, size in zip(shapes, out[1])] for out in (theirs, mine)]
    assert abs(np.mean(fractions[0]) - np.mean(fractions[1])) < 0.08, fractions
    _same_seed_same_values([shapes], graph)


# ----------------------------------------------------------------------------------------- segmentation

def test_random_mask_pixel_as_dali():
    masks = [rng.integers(0, 4, size=s).astype(np.uint8) * (rng.random(s) < 0.3) for s in
             [(13, 17), (24, 9), (31, 40)]]
    masks = [m.astype(np.uint8) for m in masks] + [np.zeros((7, 5), np.uint8)]
    floats = [rng.random(m.shape).astype(np.float32) for m in masks]

    def graph(mod, m, f):
        seg = mod.fn.segmentation
        return (seg.random_mask_pixel(m, foreground=1), seg.random_mask_pixel(m, value=2, foreground=1),
                seg.random_mask_pixel(f, threshold=0.8, foreground=1), seg.random_mask_pixel(m),
                seg.random_mask_pixel(m, value=300, foreground=1))
    theirs, mine = assert_same([masks, floats], graph, exact=False)
    for outputs in (theirs, mine):
        for i, (m, f) in enumerate(zip(masks, floats)):
            picks = [tuple(outputs[k][i].tolist()) for k in range(5)]
            assert all(0 <= p < e for pick in picks for p, e in zip(pick, m.shape))
            if (m > 0).any():
                assert m[picks[0]] > 0
            if (m == 2).any():
                assert m[picks[1]] == 2
            assert f[picks[2]] > np.float32(0.8)
    _same_seed_same_values([masks, floats], graph)
