"""fastload.compat.dali.boxes against real DALI 2.4's CPU operators.

Deterministic operators (fn.coord_flip, fn.bbox_rotate, fn.segmentation.select_masks, fn.multi_paste, and
fn.segmentation.random_object_bbox where no draw decides: one class with k_largest=1, foreground_prob=0)
give DALI's values exactly (tolerance 0; bbox_rotate's float32 steps included). The random ones
(fn.roi_random_crop, fn.random_crop_generator, fn.segmentation.random_mask_pixel, random_object_bbox's
draws, fn.ssd_random_crop) cannot match DALI's generator: their dtypes and shapes are DALI's (ssd's window
sizes aside), the properties DALI guarantees hold on every sample of both (so the properties are DALI's),
and one seed gives the same values twice. Inputs are small, random and of awkward sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali

rng = np.random.default_rng(47)


def run(mod, inputs, graph, seed=1, layouts=None):
    """Every output of ``graph(mod, *nodes)`` with one external source per batch in ``inputs``, per sample."""
    return [arrays for _, arrays in run_with_layouts(mod, inputs, graph, seed, layouts)]


def run_with_layouts(mod, inputs, graph, seed=1, layouts=None):
    """Every output of ``graph(mod, *nodes)`` as its layout and per-sample arrays."""
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
    return [(out.layout(), [np.array(out.at(i)) for i in range(batch)]) for out in outs]


def assert_same(inputs, graph, layouts=None, exact=True, shapes=True):
    """DALI's outputs and fastload's for one graph: the same layouts, dtypes and shapes (only the same ndim where
    ``shapes`` is False: random windows), and the same values where ``exact``."""
    dali = import_dali()
    theirs = run_with_layouts(dali, inputs, graph, layouts=layouts)
    mine = run_with_layouts(ours, inputs, graph, layouts=layouts)
    assert len(theirs) == len(mine)
    assert [layout for layout, _ in theirs] == [layout for layout, _ in mine]
    theirs, mine = [arrays for _, arrays in theirs], [arrays for _, arrays in mine]
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            same_shape = a.shape == b.shape if shapes else a.ndim == b.ndim
            assert a.dtype == b.dtype and same_shape, (k, i, a.dtype, b.dtype, a.shape, b.shape)
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


def test_roi_random_crop_negative_crop_shape_as_dali():
    """Without an input shape DALI runs its rule on a negative crop extent (starts in [roi_start, roi_end - crop]);
    with one it refuses it."""
    def graph(mod, x):
        return mod.fn.roi_random_crop(crop_shape=[-2, 3], roi_start=[1, 1], roi_end=[5, 5])
    shapes = [np.zeros(1, np.uint8)] * 64
    theirs, mine = assert_same([shapes], graph, exact=False)
    for outputs in (theirs, mine):
        starts = np.stack(outputs[0])
        assert starts.min(0).tolist() == [1, 1] and starts.max(0).tolist() == [7, 2], starts
    dali = import_dali()
    with pytest.raises(RuntimeError, match="Crop shape can't be negative"):
        run(dali, [shapes[:1]], lambda mod, x: mod.fn.roi_random_crop(crop_shape=[-2, 3], roi_start=[1, 1],
                                                                       roi_end=[5, 5], in_shape=[6, 6]))
    with pytest.raises(ValueError, match="fn.roi_random_crop: crop_shape can't be negative with an input shape; got "
                                         "-2 for d=0"):
        run(ours, [shapes[:1]], lambda mod, x: mod.fn.roi_random_crop(crop_shape=[-2, 3], roi_start=[1, 1],
                                                                       roi_end=[5, 5], in_shape=[6, 6]))


@pytest.mark.parametrize("aspect,area", [([0, 1], None), ([0, 1], [0.01, 1.0]), ([0, 0.5], [0.3, 0.6]),
                                         ([0.0, 2.0], [0.5, 1.0])])
def test_random_crop_generator_with_a_zero_min_aspect_ratio_as_dali(aspect, area):
    """DALI's windows for random_aspect_ratio [0, max]: the same shapes (1 x W, 1 x 1, its fallback), anchors
    in range."""
    shapes = [np.array(s, np.int64) for s in [(13, 17, 3), (100, 120, 3), (24, 9, 1), (31, 40, 3)] * 4]
    extra = {"random_area": area} if area else {}
    graph = lambda mod, s: tuple(mod.fn.random_crop_generator(s, random_aspect_ratio=aspect, **extra))  # noqa: E731
    theirs, mine = assert_same([shapes], graph, exact=False)
    assert [s.tolist() for s in mine[1]] == [s.tolist() for s in theirs[1]]
    for outputs in (theirs, mine):
        for (height, width, _), anchor, size in zip(shapes, outputs[0], outputs[1]):
            y, x, h, w = (*anchor.tolist(), *size.tolist())
            assert 0 <= y and y + h <= height and 0 <= x and x + w <= width and h > 0 and w > 0


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


def _blobby(shape, labels=(3,), count=5) -> np.ndarray:
    """A mask of rectangles of the given labels (overlapping ones merge into one blob)."""
    mask = np.zeros(shape, np.uint8)
    for _ in range(count):
        lo = [int(rng.integers(0, e - 1)) for e in shape]
        hi = [min(e, a + int(rng.integers(1, max(2, e // 3)))) for a, e in zip(lo, shape)]
        mask[tuple(slice(a, b) for a, b in zip(lo, hi))] = labels[int(rng.integers(0, len(labels)))]
    return mask


def test_random_object_bbox_deterministic_matches_dali():
    one_class = [_blobby(s) for s in [(13, 17), (24, 9), (31, 40)]]
    one_class.append(np.zeros((5, 7), np.uint8))  # no object: the whole input
    ties = np.zeros((6, 9), np.uint8)
    ties[4:6, 0:2] = ties[0:2, 6:8] = ties[0:1, 0:1] = 1  # two boxes of volume 4: DALI takes the first blob
    one_class.append(ties)
    several = [_blobby(m.shape, labels=(1, 2, 5), count=6) for m in one_class]

    def graph(mod, m, s):
        seg = mod.fn.segmentation
        return (*seg.random_object_bbox(m, k_largest=1, output_class=True),
                *seg.random_object_bbox(m, k_largest=1, format="start_end", threshold=[2, 3]),
                seg.random_object_bbox(m, k_largest=1, format="box", classes=[3], class_weights=[0.5]),
                *seg.random_object_bbox(m, foreground_prob=0.0, classes=[0, 3], output_class=True),
                seg.random_object_bbox(s, k_largest=1, ignore_class=True, format="box"),
                *seg.random_object_bbox(s, foreground_prob=0.0, background=7, output_class=True))
    assert_same([one_class, several], graph)
    volume = [_blobby((7, 9, 5)) for _ in range(3)]
    assert_same([volume], lambda mod, m: mod.fn.segmentation.random_object_bbox(m, k_largest=1, format="box"))


def test_random_object_bbox_random_as_dali():
    masks = [_blobby(s, labels=(1, 2, 5), count=7) for s in [(13, 17), (24, 9), (31, 40), (16, 16)]] * 4

    def graph(mod, m):
        seg = mod.fn.segmentation
        return (*seg.random_object_bbox(m, output_class=True, format="start_end"),
                *seg.random_object_bbox(m, output_class=True, format="start_end", classes=[2, 5],
                                        class_weights=[1.0, 3.0], foreground_prob=0.7, k_largest=2))
    theirs, mine = assert_same([masks], graph, exact=False)
    for outputs in (theirs, mine):
        for i, mask in enumerate(masks):
            for first in (0, 3):
                start, end, label = (outputs[first + k][i] for k in range(3))
                window = mask[start[0]:end[0], start[1]:end[1]]
                if label == 0:  # the background: the whole input
                    assert start.tolist() == [0, 0] and end.tolist() == list(mask.shape)
                    continue
                assert label in ((1, 2, 5) if first == 0 else (2, 5))
                hit = window == label  # a blob's box: its label on each of the box's four edges
                assert hit[0].any() and hit[-1].any() and hit[:, 0].any() and hit[:, -1].any()
    _same_seed_same_values([masks], graph)


def test_select_masks_matches_dali():
    polygons, vertices, ids = [], [], []
    for count, dims, dtype in [(5, 2, np.float32), (7, 3, np.int32), (3, 2, np.float32)]:
        sizes = rng.integers(1, 5, size=count)
        ends = np.cumsum(sizes)
        mask_id = rng.permutation(count)
        mask_id[-1] = mask_id[0]  # a mask with two polygons: DALI keeps the last
        polygons.append(np.stack([mask_id, ends - sizes, ends], 1).astype(np.int32))
        vertices.append((rng.random((int(ends[-1]), dims)) * 100).astype(dtype))
        ids.append(rng.permutation(np.unique(mask_id))[: max(1, count // 2)].astype(np.int32))
    floats = [v.astype(np.float32) for v in vertices]
    assert_same([ids, polygons, floats], lambda mod, i, p, v: (
        *mod.fn.segmentation.select_masks(i, p, v), *mod.fn.segmentation.select_masks(i, p, v, reindex_masks=True)))


def test_multi_paste_matches_dali():
    first = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 3)]]
    second = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(7, 5, 3), (11, 12, 3), (9, 8, 3)]]
    out_anchor = [np.array(v, np.int32) for v in ([[0, 0], [3, 4]], [[10, 0], [2, 1]], [[1, 2], [20, 30]])]
    in_anchor = [np.array(v, np.int32) for v in ([[2, 3], [1, 0]], [[0, 1], [4, 4]], [[5, 5], [0, 0]])]
    shape = [np.array(v, np.int32) for v in ([[6, 7], [5, 4]], [[9, 8], [6, 7]], [[12, 10], [9, 8]])]
    rel = [np.array(v, np.float32) for v in ([[0.5, 0.25], [0.3, 0.7]], [[0.0, 1.0], [0.45, 0.5]],
                                              [[0.15, 0.6], [0.5, 0.5]])]
    assert_same([first, second, out_anchor, in_anchor, shape, rel], lambda mod, a, b, oa, ia, sh, r: (
        mod.fn.multi_paste(a, b, output_size=[40, 45], out_anchors=oa),
        mod.fn.multi_paste(a, b, output_size=[33, 41], out_anchors=oa, in_anchors=ia, shapes=sh),
        mod.fn.multi_paste(b, a, output_size=[32, 40], out_anchors_rel=r * 0.5, shapes_rel=r * 0.5,
                           in_anchors_rel=r * 0.5),
        mod.fn.multi_paste(a, output_size=[40, 45], out_anchors=oa[0:1], dtype=mod.types.FLOAT)),
        layouts=["HWC", "HWC", None, None, None, None])
    floats = [(rng.random((9, 11, 2)) * 400 - 100).astype(np.float32) for _ in range(3)]
    assert_same([floats], lambda mod, f: (mod.fn.multi_paste(f, dtype=mod.types.UINT8),
                                          mod.fn.multi_paste(f, f, dtype=mod.types.INT16, output_size=[10, 12],
                                                             out_anchors=np.array([[0, 0], [1, 1]], np.int32))))


def test_multi_paste_refuses_the_layouts_dali_refuses():
    dali = import_dali()
    for mod in (dali, ours):
        with pytest.raises(ValueError, match="does not match any of the allowed layouts"):
            run(mod, [[np.zeros((4, 4, 3), np.uint8)]], lambda mod, x: mod.fn.multi_paste(x), layouts=["CHW"])


def test_multi_paste_refuses_in_ids():
    with pytest.raises(NotImplementedError, match="in_ids"):
        run(ours, [[np.zeros((4, 4, 3), np.uint8)]],
            lambda mod, x: mod.fn.multi_paste(x, in_ids=[0], output_size=[4, 4]))


# ----------------------------------------------------------------------------------------- ssd_random_crop

def _window_of(image: np.ndarray, cut: np.ndarray) -> tuple[int, int]:
    """Where ``cut`` lies in ``image`` (random pixels: one place)."""
    h, w = cut.shape[:2]
    for y in range(image.shape[0] - h + 1):
        for x in range(image.shape[1] - w + 1):
            if np.array_equal(image[y:y + h, x:x + w], cut):
                return y, x
    raise AssertionError("the output is not a window of the input")


def test_ssd_random_crop_as_dali():
    images = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 3)]] * 5
    boxes = [_boxes(int(n)) for n in rng.integers(1, 6, size=len(images))]
    labels = [rng.integers(0, 50, size=(len(b),), dtype=np.int32) for b in boxes]
    graph = lambda mod, i, b, lab: tuple(mod.fn.ssd_random_crop(i, b, lab, num_attempts=3))  # noqa: E731
    with pytest.warns(DeprecationWarning, match="ssd_random_crop"):  # DALI's, for its deprecated operator
        theirs, mine = assert_same([images, boxes, labels], graph, layouts=["HWC", None, None], exact=False,
                                   shapes=False)
    for outputs in (theirs, mine):
        for image, box, label, cut, kept, kept_labels in zip(images, boxes, labels, *outputs):
            if cut.shape == image.shape:  # no crop: all as it came
                assert np.array_equal(cut, image) and np.array_equal(kept, box) and np.array_equal(kept_labels, label)
                continue
            _window_of(image, cut)
            assert cut.shape[0] >= int(0.3 * image.shape[0]) - 1 and cut.shape[1] >= int(0.3 * image.shape[1]) - 1
            assert 1 <= len(kept) <= len(box) and kept_labels.shape == (len(kept),)
            assert ((kept >= 0) & (kept <= 1)).all() and (kept[:, 2:] >= kept[:, :2]).all()
            assert set(kept_labels.ravel().tolist()) <= set(label.ravel().tolist())
    _same_seed_same_values([images, boxes, labels], graph, layouts=["HWC", None, None])


# ------------------------------------------------------------------------------------------ ops and refusals

def test_ops_classes_match_dali():
    boxes = [_boxes(n) for n in (3, 6, 1)]
    polygons = [np.array([[0, 0, 2], [1, 2, 3]], np.int32)] * 3
    vertices = [rng.random((3, 2)).astype(np.float32) for _ in range(3)]
    ids = [np.array([1], np.int32)] * 3
    assert_same([boxes, ids, polygons, vertices], lambda mod, b, i, p, v: (
        mod.ops.CoordFlip(layout="xy", flip_y=1)(v),
        mod.ops.BBoxRotate(angle=45.0, input_shape=[20, 30], keep_size=True)(b),
        *mod.ops.segmentation.SelectMasks(reindex_masks=True)(i, p, v)))


def test_refusals_name_the_operator_and_argument():
    with pytest.raises(NotImplementedError, match="fn.coord_flip.*flip_w"):
        run(ours, [[np.zeros((2, 2), np.float32)]], lambda mod, x: mod.fn.coord_flip(x, flip_w=1))
    with pytest.raises(ValueError, match="bbox_layout"):
        run(ours, [[np.zeros((2, 4), np.float32)]], lambda mod, x: mod.fn.bbox_rotate(x, angle=3.0, input_shape=[4, 4],
                                                                                      bbox_layout="XYxy"))
    with pytest.raises(ValueError, match="same shape"):
        run(ours, [[np.zeros((2, 3, 1), np.uint8)], [np.zeros((3, 2, 1), np.uint8)]],
            lambda mod, x, y: mod.fn.multi_paste(x, y))
    with pytest.raises(ValueError, match="ignore_class"):
        run(ours, [[np.zeros((2, 3), np.uint8)]],
            lambda mod, x: mod.fn.segmentation.random_object_bbox(x, ignore_class=True, output_class=True))
