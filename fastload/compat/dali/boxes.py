"""DALI's box, region and mask operators: ``fn.coord_flip``, ``fn.bbox_rotate``, ``fn.roi_random_crop``,
``fn.random_crop_generator`` and ``fn.segmentation.random_mask_pixel``.

Each was checked against real DALI 2.4's CPU operators (tests/compat/test_dali_boxes.py); the rules are
DALI's sources, confirmed there:

- ``coord_flip``: float32 ``2 * center - v`` on the flipped coordinates (the layout's "x", "y", "z"; by
  default "x", "xy" or "xyz" from the last extent, at most 3). Exact.
- ``bbox_rotate``: each box's four corners centred on the image (``(v - 0.5) * extent`` when normalized),
  rotated by the float32 ``cosf``/``sinf`` of the angle (degrees, times float ``pi / 180``), moved onto
  the canvas (the input with ``keep_size``, ``size`` floored, or fn.rotate's rotated canvas with its parity
  rule), their bounds the new box; ``fixed``/``halfway`` shrink it by (all, half) the growth over the old
  extents (swapped where the aspect flipped); clipped to the canvas, a box keeping less than
  ``remove_threshold`` of its area is dropped with its label; normalized by multiplying with float ``1 / W``.
  All float32, step for step: exact.
- ``roi_random_crop``: per axis, a ROI as large as the window places it at the ROI; a larger ROI draws the
  start uniformly in [roi_start, roi_end - crop], a smaller one in [roi_end - crop, roi_start], both kept
  in [0, in_shape - crop] when an input shape (or input) is given; int64.
- ``random_crop_generator``: fn.random_resized_crop's window (``crops.random_crop_window``) for a shape
  input (HW or HWC): int32 anchor (y, x) and shape (h, w).
- ``segmentation.random_mask_pixel``: with ``foreground``, a pixel uniformly among those equal to ``value``
  (or above ``threshold``); otherwise, or without any, a uniform pixel. int64 coordinates.

The random ones draw from fastload's per-sample streams (seeded, repeatable), not DALI's mt19937: their
values follow DALI's rules and distributions, not its numbers.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..engine.graph import Op
from ..float32 import libm_float
from . import crops
from .operators import _device, _one, _seeded, check_args
from .spec import operator
from .warping import rotated_size

F32 = np.float32
PREFIX = "fastload.compat.dali"


def _cpu(operator: str, device) -> None:
    if device not in (None, "cpu"):
        raise NotImplementedError(f"{PREFIX}: {operator} runs on the CPU here (device='cpu'); DALI's GPU "
                                  f"operator is not reproduced")


def _ints(value, name: str, operator: str) -> list[int]:
    if value is None:
        return []
    if isinstance(value, torch.Tensor):
        value = value.flatten().tolist()
    values = value if isinstance(value, (list, tuple, np.ndarray)) else [value]
    out = []
    for v in np.asarray(values).reshape(-1).tolist():
        if float(v) != int(v):
            raise TypeError(f"{PREFIX}: {operator}: {name} takes integers, got {v}")
        out.append(int(v))
    return out


# ------------------------------------------------------------------------------------------ coord_flip

@operator("coord_flip", "CoordFlip")
def coord_flip(data, *, layout="", flip_x=1, flip_y=0, flip_z=0, center_x=0.5, center_y=0.5, center_z=0.5,
               device=None, **args):
    """``fn.coord_flip``: float32 points [N, D] (D <= 3) mirrored about ``center_*`` on the axes flipped
    (``2 * center - v``, in float32); every flag and centre may be per sample."""
    check_args("fn.coord_flip", args, set())
    _cpu("fn.coord_flip", _device([data], device))
    layout = str(layout or "")
    if any(c not in "xyz" for c in layout) or len(set(layout)) != len(layout):
        raise ValueError(f"{PREFIX}: fn.coord_flip: layout {layout!r} must be made of distinct 'x', 'y', 'z'")

    def run(ctx, op, points, flip_x, flip_y, flip_z, center_x, center_y, center_z):
        if points.dtype != torch.float32:
            raise TypeError(f"{PREFIX}: fn.coord_flip takes float32 coordinates, got {points.dtype}")
        ndim = points.shape[1] if points.dim() >= 2 else 1
        if ndim > 3:
            raise ValueError(f"{PREFIX}: fn.coord_flip: {ndim} coordinates per point (at most 3)")
        names = layout or "xyz"[:ndim]
        if len(names) != ndim:
            raise ValueError(f"{PREFIX}: fn.coord_flip: layout {layout!r} does not name {ndim} coordinates")
        values = points.cpu().numpy().astype(F32).reshape(-1, ndim).copy()
        for axis, flip, centre in (("x", flip_x, center_x), ("y", flip_y, center_y), ("z", flip_z, center_z)):
            if axis in names and int(flip):
                d = names.index(axis)
                values[:, d] = F32(F32(2) * F32(centre)) - values[:, d]
        return torch.from_numpy(values).reshape(points.shape)

    settings = {"flip_x": flip_x, "flip_y": flip_y, "flip_z": flip_z, "center_x": center_x,
                "center_y": center_y, "center_z": center_z}
    return _one(Op("coord_flip", run, [data], settings, device="cpu", layouts=(data.layout(),), fusable=False))


# ----------------------------------------------------------------------------------------- bbox_rotate

def rotate_boxes(boxes: np.ndarray, angle_degrees: float, in_wh: tuple[float, float], out_wh: tuple[float, float],
                 *, ltrb: bool, normalized: bool, mode: str, remove_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """DALI's RotateBoxesKernel on boxes [N, 4] (float32 step for step): the rotated boxes kept and their
    indices (the rules in the module docstring)."""
    boxes = np.asarray(boxes, F32).reshape(-1, 4)
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    if not ltrb:
        x2, y2 = x1 + x2, y1 + y2
    xs = np.stack([x1, x2, x1, x2], 1).astype(F32)
    ys = np.stack([y1, y1, y2, y2], 1).astype(F32)
    in_w, in_h = F32(in_wh[0]), F32(in_wh[1])
    if normalized:
        xs, ys = (xs - F32(0.5)) * in_w, (ys - F32(0.5)) * in_h
    else:
        xs, ys = xs - in_w / F32(2), ys - in_h / F32(2)
    old_w, old_h = xs[:, 1] - xs[:, 0], ys[:, 2] - ys[:, 0]
    angle = F32(F32(angle_degrees) * F32(math.pi / 180))
    cos_a, sin_a = F32(libm_float("cos", angle)), F32(libm_float("sin", angle))
    xs, ys = xs * cos_a + ys * sin_a, -xs * sin_a + ys * cos_a
    out_w, out_h = F32(out_wh[0]), F32(out_wh[1])
    xs, ys = xs + out_w / F32(2), ys + out_h / F32(2)
    out = np.stack([xs.min(1), ys.min(1), xs.max(1), ys.max(1)], 1).astype(F32)
    if mode != "expand":
        new_w, new_h = out[:, 2] - out[:, 0], out[:, 3] - out[:, 1]
        flipped = (old_w < old_h) ^ (new_w < new_h)
        diff_w = np.where(flipped, (new_w - old_h) * F32(0.5), (new_w - old_w) * F32(0.5)).astype(F32)
        diff_h = np.where(flipped, (new_h - old_w) * F32(0.5), (new_h - old_h) * F32(0.5)).astype(F32)
        if mode == "halfway":
            diff_w, diff_h = diff_w * F32(0.5), diff_h * F32(0.5)
        out[:, 0] += diff_w
        out[:, 1] += diff_h
        out[:, 2] -= diff_w
        out[:, 3] -= diff_h
    with np.errstate(divide="ignore", invalid="ignore"):
        old_area = (out[:, 2] - out[:, 0]) * (out[:, 3] - out[:, 1])
        out[:, [0, 2]] = np.clip(out[:, [0, 2]], F32(0), out_w)
        out[:, [1, 3]] = np.clip(out[:, [1, 3]], F32(0), out_h)
        new_area = (out[:, 2] - out[:, 0]) * (out[:, 3] - out[:, 1])
        keep = (new_area / old_area) >= F32(remove_threshold)
    kept = out[keep]
    if not ltrb:
        kept[:, 2:] = kept[:, 2:] - kept[:, :2]
    if normalized:
        kept = kept * np.array([F32(1) / out_w, F32(1) / out_h] * 2, F32)
    return kept.astype(F32), np.nonzero(keep)[0]


@operator("bbox_rotate", "BBoxRotate")
def bbox_rotate(boxes, labels=None, *, angle, input_shape, shape_layout="HW", bbox_layout="xyXY",
                bbox_normalized=True, keep_size=False, mode="expand", remove_threshold=0.1, size=None,
                device=None, **args):
    """``fn.bbox_rotate``: boxes [N, 4] (and their int32 labels [N] or [N, 1]) moved as fn.rotate moves
    their image by ``angle`` degrees (per sample allowed), ``input_shape`` the image's shape in
    ``shape_layout``; ``rotate_boxes`` computes it."""
    check_args("fn.bbox_rotate", args, set())
    _cpu("fn.bbox_rotate", _device([boxes], device))
    layout = str(bbox_layout)
    if layout not in ("xyXY", "xyWH"):
        raise ValueError(f"{PREFIX}: fn.bbox_rotate: bbox_layout must be 'xyXY' or 'xyWH', got {layout!r}")
    if mode not in ("expand", "fixed", "halfway"):
        raise ValueError(f"{PREFIX}: fn.bbox_rotate: mode must be 'expand', 'fixed' or 'halfway', got {mode!r}")
    shape_layout = str(shape_layout)
    if "H" not in shape_layout or "W" not in shape_layout:
        raise ValueError(f"{PREFIX}: fn.bbox_rotate: shape_layout {shape_layout!r} must name H and W")
    if keep_size and size is not None:
        raise ValueError(f"{PREFIX}: fn.bbox_rotate: keep_size is mutually exclusive with size")
    h_at, w_at = shape_layout.index("H"), shape_layout.index("W")

    def run(ctx, op, values, *label_values, angle, input_shape, size):
        shape = _ints(input_shape, "input_shape", "fn.bbox_rotate")
        if len(shape) < max(h_at, w_at) + 1:
            raise ValueError(f"{PREFIX}: fn.bbox_rotate: input_shape {shape} has fewer dimensions than "
                             f"shape_layout {shape_layout!r}")
        if isinstance(angle, (tuple, list)):
            if len(angle) != 1:
                raise ValueError(f"{PREFIX}: fn.bbox_rotate: angle must be one value per sample")
            angle = angle[0]
        in_w, in_h = shape[w_at], shape[h_at]
        if keep_size:
            out_w, out_h = in_w, in_h
        elif size is not None:
            sizes = [float(v) for v in (size if isinstance(size, (list, tuple)) else [size])]
            if len(sizes) != 2:
                raise ValueError(f"{PREFIX}: fn.bbox_rotate: size must be two values (H, W)")
            out_h, out_w = math.floor(F32(sizes[0])), math.floor(F32(sizes[1]))
        else:
            out_h, out_w = rotated_size(in_h, in_w, float(angle))
        coords = values.cpu().numpy()
        if coords.ndim != 2 or coords.shape[1] != 4:
            raise ValueError(f"{PREFIX}: fn.bbox_rotate: boxes must be [N, 4], got {list(coords.shape)}")
        kept, indices = rotate_boxes(coords, float(angle), (in_w, in_h), (out_w, out_h), ltrb=layout == "xyXY",
                                     normalized=bool(bbox_normalized), mode=mode,
                                     remove_threshold=float(remove_threshold))
        out = [torch.from_numpy(kept)]
        if label_values:
            given = label_values[0]
            if given.shape[0] != coords.shape[0]:
                raise ValueError(f"{PREFIX}: fn.bbox_rotate: {coords.shape[0]} boxes but {given.shape[0]} labels")
            out.append(given.cpu()[torch.from_numpy(indices)].to(torch.int32).contiguous())
        return tuple(out) if len(out) > 1 else out[0]

    inputs = [boxes] + ([labels] if labels is not None else [])
    settings = {"angle": angle, "input_shape": input_shape, "size": size}
    return _one(Op("bbox_rotate", run, inputs, settings, num_outputs=len(inputs), fusable=False))


# ------------------------------------------------------------------------------------------ random windows

def roi_crop_start(rng, crop_shape: list[int], roi_start: list[int], roi_end: list[int],
                   in_shape: list[int] | None) -> list[int]:
    """fn.roi_random_crop's window start, per axis (the rule in the module docstring)."""
    starts = []
    for d, (crop, start, end) in enumerate(zip(crop_shape, roi_start, roi_end)):
        extent = end - start
        if extent == crop:
            starts.append(start)
            continue
        lo, hi = (start, end - crop) if extent > crop else (end - crop, start)
        if in_shape is not None:
            lo, hi = max(lo, 0), min(hi, in_shape[d] - crop)
        starts.append(rng.randint(lo, hi + 1))
    return starts


@operator("roi_random_crop", "ROIRandomCrop")
def roi_random_crop(data=None, *, crop_shape, roi_start, roi_end=None, roi_shape=None, in_shape=None, device=None,
                    **args):
    """``fn.roi_random_crop``: an int64 window start, per axis, for a ``crop_shape`` window holding as much of
    the ROI (``roi_start`` with ``roi_end`` or ``roi_shape``) as fits, inside ``in_shape`` (or the input's
    shape) when given; every argument may be per sample."""
    check_args("fn.roi_random_crop", args, set())
    _cpu("fn.roi_random_crop", device)
    if (roi_end is None) == (roi_shape is None):
        raise ValueError(f"{PREFIX}: fn.roi_random_crop: give either roi_end or roi_shape, not both")
    if in_shape is not None and data is not None:
        raise ValueError(f"{PREFIX}: fn.roi_random_crop: in_shape is incompatible with providing an input")
    name = "fn.roi_random_crop"

    def run(ctx, op, *given, crop_shape, roi_start, roi_end, roi_shape, in_shape):
        crop = _ints(crop_shape, "crop_shape", name)
        start = _ints(roi_start, "roi_start", name)
        end = _ints(roi_end, "roi_end", name) if roi_end is not None else \
            [s + e for s, e in zip(start, _ints(roi_shape, "roi_shape", name))]
        bounds = list(given[0].shape) if given else (_ints(in_shape, "in_shape", name) if in_shape is not None
                                                      else None)
        if len(start) != len(crop) or len(end) != len(crop):
            raise ValueError(f"{PREFIX}: {name}: roi_start and roi_end/roi_shape need {len(crop)} values "
                             f"(crop_shape's), got {len(start)} and {len(end)}")
        if bounds is not None:
            if len(bounds) < len(crop):
                raise ValueError(f"{PREFIX}: {name}: the input shape {bounds} has fewer than {len(crop)} dimensions")
            if any(b < c for b, c in zip(bounds, crop)):
                raise ValueError(f"{PREFIX}: {name}: cropping shape {crop} can't be bigger than the input shape "
                                 f"{bounds}")
            if any(s < 0 or e > b for s, e, b in zip(start, end, bounds)):
                raise ValueError(f"{PREFIX}: {name}: ROI [{start}, {end}) can't be out of bounds of {bounds}")
        return torch.tensor(roi_crop_start(ctx.rng(op), crop, start, end, bounds), dtype=torch.int64)

    settings = {"crop_shape": crop_shape, "roi_start": roi_start, "roi_end": roi_end, "roi_shape": roi_shape,
                "in_shape": in_shape}
    inputs = [data] if data is not None else []
    return _one(_seeded(Op("roi_random_crop", run, inputs, settings, fusable=False), args))


@operator("random_crop_generator", "RandomCropGenerator")
def random_crop_generator(shapes, *, random_area=(0.08, 1.0), random_aspect_ratio=(0.75, 4 / 3), num_attempts=10,
                          device=None, **args):
    """``fn.random_crop_generator``: for a shape input (HW or HWC), fn.random_resized_crop's random window
    (``crops.random_crop_window``) as int32 anchor (y, x) and shape (h, w)."""
    check_args("fn.random_crop_generator", args, set())
    _cpu("fn.random_crop_generator", device)
    area = tuple(float(v) for v in (random_area if isinstance(random_area, (list, tuple)) else [random_area]))
    aspect = tuple(float(v) for v in (random_aspect_ratio if isinstance(random_aspect_ratio, (list, tuple))
                                      else [random_aspect_ratio]))
    area = area * 2 if len(area) == 1 else area
    aspect = aspect * 2 if len(aspect) == 1 else aspect
    if len(area) != 2 or not 0 <= area[0] <= area[1]:
        raise ValueError(f"{PREFIX}: fn.random_crop_generator: random_area must be [min, max], got {random_area}")
    if len(aspect) != 2 or not 0 < aspect[0] <= aspect[1]:
        raise ValueError(f"{PREFIX}: fn.random_crop_generator: random_aspect_ratio must be [min, max] above 0, "
                         f"got {random_aspect_ratio}")
    if int(num_attempts) < 1:
        raise ValueError(f"{PREFIX}: fn.random_crop_generator: num_attempts must be at least 1")

    def run(ctx, op, shape):
        dims = shape.reshape(-1).tolist()
        if len(dims) not in (2, 3):
            raise ValueError(f"{PREFIX}: fn.random_crop_generator takes a shape of 2 (HW) or 3 (HWC) values, "
                             f"got {dims}")
        y, x, h, w = crops.random_crop_window(int(dims[0]), int(dims[1]), ctx.rng(op), area, aspect,
                                              int(num_attempts))
        return torch.tensor([y, x], dtype=torch.int32), torch.tensor([h, w], dtype=torch.int32)

    return _one(_seeded(Op("random_crop_generator", run, [shapes], {}, num_outputs=2, fusable=False), args))


# ----------------------------------------------------------------------------------------- segmentation

def _unravel(flat: int, shape) -> list[int]:
    return [int(v) for v in np.unravel_index(int(flat), tuple(shape))]


@operator("segmentation.random_mask_pixel", "segmentation.RandomMaskPixel")
def segmentation_random_mask_pixel(mask, *, value=None, threshold=None, foreground=0, device=None, **args):
    """``fn.segmentation.random_mask_pixel``: int64 coordinates of a pixel, uniform among the foreground
    (equal to ``value``, or above ``threshold``, 0 by default) with ``foreground``, else (or without any)
    uniform over the mask; value, threshold and foreground may be per sample."""
    check_args("fn.segmentation.random_mask_pixel", args, set())
    _cpu("fn.segmentation.random_mask_pixel", device)
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
