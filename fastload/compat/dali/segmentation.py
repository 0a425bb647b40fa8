"""DALI's segmentation operators: ``fn.segmentation.random_mask_pixel``, ``fn.segmentation.random_object_bbox``
and ``fn.segmentation.select_masks``.

Each was checked against real DALI 2.4's CPU operators (tests/compat/test_dali_boxes.py); the rules are
DALI's sources, confirmed there:

- ``segmentation.random_mask_pixel``: with ``foreground``, a pixel uniformly among those equal to ``value``
  (or above ``threshold``); otherwise, or without any, a uniform pixel. int64 coordinates.
- ``segmentation.random_object_bbox``: blobs are face-connected pixels of one label (4-connectivity in 2-D),
  numbered in raster order of their first pixel; with ``foreground_prob`` a class is drawn (the present
  labels but the background, or ``classes`` by ``class_weights``), its blobs filtered by ``threshold``, the
  ``k_largest`` by box volume (ties: the first blob) kept, one drawn; a class without a blob is dropped and
  another drawn; no blob (or not foreground) gives the whole input and the background label (0, or one
  below the smallest class when ``classes`` hold 0 and ``background`` is not given). int32. Deterministic
  cases (one class, ``k_largest=1``, ``foreground_prob=0``) match DALI exactly.
- ``segmentation.select_masks``: one output polygon per selected id, in ``mask_ids`` order, holding the
  vertices of that id's LAST polygon in the input (DALI keeps one polygon per id), renumbered with
  ``reindex_masks``. Exact.

The random ones draw from fastload's per-sample streams (seeded, repeatable), not DALI's mt19937: their
values follow DALI's rules and distributions, not its numbers.
"""

from __future__ import annotations

import numpy as np
import torch

from ..engine.graph import Op
from .boxes import F32, PREFIX, cpu_only
from .operators import _one, _seeded, check_args
from .spec import operator


def _unravel(flat: int, shape) -> list[int]:
    return [int(v) for v in np.unravel_index(int(flat), tuple(shape))]


@operator("segmentation.random_mask_pixel", "segmentation.RandomMaskPixel")
def segmentation_random_mask_pixel(mask, *, value=None, threshold=None, foreground=0, device=None, **args):
    """``fn.segmentation.random_mask_pixel``: int64 coordinates of a pixel, uniform among the foreground
    (equal to ``value``, or above ``threshold``, 0 by default) with ``foreground``, else (or without any)
    uniform over the mask; value, threshold and foreground may be per sample."""
    check_args("fn.segmentation.random_mask_pixel", args, set())
    cpu_only("fn.segmentation.random_mask_pixel", device)
    if value is not None and threshold is not None:
        raise ValueError(f"{PREFIX}: fn.segmentation.random_mask_pixel: value and threshold can not be provided "
                         f"together")

    def run(ctx, op, values, value, threshold, foreground):
        rng = ctx.rng(op)
        array = values.cpu().numpy()
        if array.dtype not in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64,
                               np.float32, np.bool_):
            raise TypeError(f"{PREFIX}: fn.segmentation.random_mask_pixel: unexpected mask type {array.dtype}")
        if int(foreground):
            where = None
            if value is not None:
                cast = np.array(int(value)).astype(array.dtype)
                if int(cast) == int(value):  # DALI: a value the type cannot hold selects no pixel
                    where = np.flatnonzero(array == cast)
            else:
                where = np.flatnonzero(array > F32(threshold if threshold is not None else 0.0))
            if where is not None and len(where):
                return torch.tensor(_unravel(where[rng.randint(0, len(where))], array.shape), dtype=torch.int64)
        return torch.tensor([rng.randint(0, extent) if extent > 0 else 0 for extent in array.shape],
                            dtype=torch.int64)

    settings = {"value": value, "threshold": threshold, "foreground": foreground}
    return _one(_seeded(Op("segmentation.random_mask_pixel", run, [mask], settings, fusable=False), args))


_OBJECT_TYPES = (np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32)


def blob_boxes(values: np.ndarray, foreground: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The boxes (lo, one-past-hi, [n, ndim] int64) of the face-connected blobs of equal ``values`` inside
    ``foreground``, numbered in raster order of their first pixel (DALI's blob order). Union-find over the
    neighbour pairs: roots hooked to the smaller root, then paths compressed, until no pair straddles two
    roots; each blob's root is then its first pixel."""
    shape, ndim = values.shape, values.ndim
    index = np.arange(values.size).reshape(shape)
    firsts, seconds = [], []
    for axis in range(ndim):
        head = tuple(slice(0, -1) if d == axis else slice(None) for d in range(ndim))
        tail = tuple(slice(1, None) if d == axis else slice(None) for d in range(ndim))
        joined = foreground[head] & foreground[tail] & (values[head] == values[tail])
        firsts.append(index[head][joined])
        seconds.append(index[tail][joined])
    a, b = np.concatenate(firsts), np.concatenate(seconds)
    parent = np.arange(values.size)
    while len(a):
        root_a, root_b = parent[a], parent[b]
        apart = root_a != root_b
        if not apart.any():
            break
        low, high = np.minimum(root_a[apart], root_b[apart]), np.maximum(root_a[apart], root_b[apart])
        np.minimum.at(parent, high, low)
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped
    pixels = np.flatnonzero(foreground.ravel())
    if not len(pixels):
        return np.zeros((0, ndim), np.int64), np.zeros((0, ndim), np.int64)
    _, blob = np.unique(parent[pixels], return_inverse=True)
    coords = np.stack(np.unravel_index(pixels, shape), 1).astype(np.int64)
    count = int(blob.max()) + 1
    lo = np.full((count, ndim), np.iinfo(np.int64).max, np.int64)
    hi = np.full((count, ndim), -1, np.int64)
    np.minimum.at(lo, blob, coords)
    np.maximum.at(hi, blob, coords)
    return lo, hi + 1


def _pick_box(lo: np.ndarray, hi: np.ndarray, threshold, k_largest: int, rng) -> int:
    """DALI's PickBox: the boxes below ``threshold`` on any axis dropped (order kept), then one drawn
    uniformly, among the ``k_largest`` by volume (ties: the earlier) when given; -1 when none is left."""
    order = np.arange(len(lo))
    if threshold is not None:
        order = order[((hi - lo) >= np.asarray(threshold, np.int64)).all(1)]
    n = len(order)
    if n == 0:
        return -1
    if 0 < k_largest < n:
        volume = np.prod(hi[order] - lo[order], axis=1)
        ranked = sorted(range(n), key=lambda i: (-int(volume[i]), i))
        return int(order[ranked[rng.randint(0, min(n, k_largest))]])
    return int(order[rng.randint(0, n)])


def _class_info(background, classes, weights) -> tuple[int, list[int] | None, list[float] | None]:
    """DALI's ClassInfo::Init: the background label (an implicit one moved below the classes when they hold
    it) and the classes with their weights (None: every label present, weight 1)."""
    explicit = background is not None
    background = int(background) if explicit else 0
    if classes is not None:
        classes = [int(c) for c in classes]
        if background in classes:
            if explicit:
                raise ValueError(f"{PREFIX}: fn.segmentation.random_object_bbox: class label {background} "
                                 f"coincides with the background label")
            background = min(classes) - 1
        weights = [float(w) for w in weights] if weights is not None else [1.0] * len(classes)
        if len(weights) != len(classes):
            raise ValueError(f"{PREFIX}: fn.segmentation.random_object_bbox: classes and class_weights must "
                             f"have the same length ({len(classes)} and {len(weights)})")
    elif weights is not None:
        weights = [float(w) for w in weights]
        classes, label = [], 0
        for _ in weights:
            if label == background:
                label += 1
            classes.append(label)
            label += 1
    return background, classes, weights


def _tuple_of(value):
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        value = value.flatten().tolist()
    return list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]


def random_object_box(array: np.ndarray, rng, *, foreground_prob: float, background, classes, weights,
                      threshold, k_largest: int, ignore_class: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """One sample of fn.segmentation.random_object_bbox: (start, end, class label); the rules are in the
    module docstring."""
    background, classes, weights = _class_info(background, None if ignore_class else classes,
                                               None if ignore_class else weights)
    whole = (np.zeros(array.ndim, np.int64), np.array(array.shape, np.int64), background)
    if not rng.random() < float(foreground_prob):
        return whole
    values = array.astype(np.int64)
    if ignore_class:
        lo, hi = blob_boxes(values, values != background)
        picked = _pick_box(lo, hi, threshold, k_largest, rng)
        return whole if picked < 0 else (lo[picked], hi[picked], background)
    present = set(np.unique(values).tolist()) - {background}
    if classes is None:
        classes = sorted(present)
        weights = [1.0] * len(classes)
    else:
        weights = [w if c in present else 0.0 for c, w in zip(classes, weights)]
    while sum(weights) > 0:
        cdf = np.cumsum(weights)
        drawn = rng.random() * float(cdf[-1])
        chosen = min(int(np.searchsorted(cdf, drawn, side="right")), len(classes) - 1)
        while weights[chosen] <= 0:  # a zero weight's class is never drawn
            chosen -= 1
        label = classes[chosen]
        lo, hi = blob_boxes(values, values == label)
        picked = _pick_box(lo, hi, threshold, k_largest, rng)
        if picked >= 0:
            return lo[picked], hi[picked], label
        weights[chosen] = 0.0
    return whole


@operator("segmentation.random_object_bbox", "segmentation.RandomObjectBBox")
def segmentation_random_object_bbox(mask, *, format="anchor_shape", foreground_prob=1.0, classes=None,
                                    background=None, class_weights=None, k_largest=None, threshold=None,
                                    ignore_class=False, output_class=False, cache_objects=False, device=None,
                                    **args):
    """``fn.segmentation.random_object_bbox``: the box of a random blob of a random foreground class
    (``random_object_box``) as int32 anchor and shape, start and end, or one box; the class label too with
    ``output_class``. cache_objects changes nothing but speed in DALI and is accepted."""
    name = "fn.segmentation.random_object_bbox"
    check_args(name, args, set())
    cpu_only(name, device)
    if format not in ("anchor_shape", "start_end", "box"):
        raise ValueError(f"{PREFIX}: {name}: format must be 'anchor_shape', 'start_end' or 'box', got {format!r}")
    if ignore_class and (classes is not None or class_weights is not None or output_class):
        raise ValueError(f"{PREFIX}: {name}: ignore_class is incompatible with classes, class_weights and "
                         f"output_class")
    k = int(k_largest) if k_largest is not None else -1
    if k_largest is not None and k < 1:
        raise ValueError(f"{PREFIX}: {name}: k_largest must be at least 1, got {k_largest}")

    def run(ctx, op, values, foreground_prob, classes, background, class_weights, threshold):
        array = values.cpu().numpy()
        if array.dtype.type not in _OBJECT_TYPES:
            raise TypeError(f"{PREFIX}: {name}: unsupported input type {array.dtype} (bool and integers of up to "
                            f"32 bits but uint64/int64, as DALI)")
        if not 1 <= array.ndim <= 6:
            raise ValueError(f"{PREFIX}: {name}: {array.ndim} dimensions; must be 1..6")
        limits = _tuple_of(threshold)
        if limits is not None and len(limits) != array.ndim:
            raise ValueError(f"{PREFIX}: {name}: threshold needs {array.ndim} values, got {len(limits)}")
        start, end, label = random_object_box(array, ctx.rng(op), foreground_prob=float(foreground_prob),
                                              background=background, classes=_tuple_of(classes),
                                              weights=_tuple_of(class_weights), threshold=limits, k_largest=k,
                                              ignore_class=bool(ignore_class))
        start, end = torch.from_numpy(start.astype(np.int32)), torch.from_numpy(end.astype(np.int32))
        out = [torch.cat([start, end])] if format == "box" else [start, end - start if format == "anchor_shape"
                                                                 else end]
        if output_class:
            out.append(torch.tensor(label, dtype=torch.int32))
        return tuple(out) if len(out) > 1 else out[0]

    count = (1 if format == "box" else 2) + bool(output_class)
    settings = {"foreground_prob": foreground_prob, "classes": classes, "background": background,
                "class_weights": class_weights, "threshold": threshold}
    return _one(_seeded(Op("segmentation.random_object_bbox", run, [mask], settings, num_outputs=count,
                           fusable=False), args))


@operator("segmentation.select_masks", "segmentation.SelectMasks")
def segmentation_select_masks(mask_ids, polygons, vertices, *, reindex_masks=False, device=None, **args):
    """``fn.segmentation.select_masks``: the polygons of the ``mask_ids`` (int32 [P, 3]: id, start, end) and
    their vertices, in mask_ids' order; DALI keeps one polygon per mask id, its last in the input."""
    name = "fn.segmentation.select_masks"
    check_args(name, args, set())
    cpu_only(name, device)

    def run(ctx, op, ids, polys, verts):
        if ids.dtype != torch.int32 or ids.dim() != 1:
            raise TypeError(f"{PREFIX}: {name}: mask_ids must be 1-D int32, got {ids.dtype} {list(ids.shape)}")
        if polys.dtype != torch.int32 or polys.dim() != 2 or polys.shape[1] != 3:
            raise TypeError(f"{PREFIX}: {name}: polygons must be int32 [P, 3], got {polys.dtype} "
                            f"{list(polys.shape)}")
        if verts.dim() != 2:
            raise ValueError(f"{PREFIX}: {name}: vertices must be 2-D, got {verts.dim()}-D")
        selected = ids.tolist()
        if len(set(selected)) != len(selected):
            raise ValueError(f"{PREFIX}: {name}: mask_ids should not have duplicated values, got {selected}")
        ranges = {}
        for mask_id, start, end in polys.tolist():
            if mask_id in selected:
                if start < 0 or end > verts.shape[0] or end < start:
                    raise ValueError(f"{PREFIX}: {name}: vertex range [{start}, {end}) of mask id {mask_id} is out "
                                     f"of bounds of {verts.shape[0]} vertices")
                ranges[mask_id] = (start, end)
        missing = [m for m in selected if m not in ranges]
        if missing:
            raise ValueError(f"{PREFIX}: {name}: selected mask_id {missing[0]} is not present in the input")
        out_polys, pieces, at = [], [], 0
        for k, mask_id in enumerate(selected):
            start, end = ranges[mask_id]
            out_polys.append([k if reindex_masks else mask_id, at, at + end - start])
            pieces.append(verts[start:end])
            at += end - start
        out_verts = torch.cat(pieces) if pieces else verts[:0]
        return torch.tensor(out_polys, dtype=torch.int32).reshape(-1, 3), out_verts.contiguous()

    return _one(Op("segmentation.select_masks", run, [mask_ids, polygons, vertices], {}, num_outputs=2,
                   fusable=False))
