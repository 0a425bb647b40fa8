"""DALI's box, region and mask operators: ``fn.coord_flip``, ``fn.bbox_rotate``, ``fn.roi_random_crop``,
``fn.random_crop_generator``, ``fn.multi_paste`` and ``fn.ssd_random_crop`` (the mask operators are in
``segmentation``).

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
  in [0, in_shape - crop] when an input shape (or input) is given; int64. A negative ``crop_shape`` extent
  follows the same rule without an input shape, and is an error with one, as in DALI.
- ``random_crop_generator``: fn.random_resized_crop's window (``crops.random_crop_window``) for a shape
  input (HW or HWC): int32 anchor (y, x) and shape (h, w). A ``random_aspect_ratio`` whose minimum is 0 gives
  DALI's windows for it: 1 x 1 (or 1 x W, H x int(H * max), and the fallback where 1 is out of range).
- ``multi_paste``: a zero canvas of ``output_size`` (else the first input's shape), the regions pasted in
  order (later ones over earlier ones), converted as DALI's ConvertSat (rounded half away, saturated);
  relative shapes round up, relative anchors down. Exact. ``in_ids`` is refused: it pastes other samples of
  the batch, and fastload runs a graph one sample at a time; several inputs (region k from input k of the
  same sample, DALI's other form) are supported. Without ``output_size`` DALI requires one shape across the
  batch, which a sample cannot check: each output takes its sample's shape, DALI's wherever DALI runs.
- ``ssd_random_crop`` (deprecated by DALI in favour of fn.random_bbox_crop, a different operator): an option
  drawn from (no minimum, 0.1, 0.3, 0.5, 0.7, 0.9, no crop); windows of sides uniform in [0.3, 1] with
  aspect in [0.5, 2], every box's IoU above the minimum, the boxes whose centre is strictly inside kept,
  clipped and made relative (labels [K]); the image cut at the truncated pixel bounds. No crop returns the
  three inputs as they came.

The random ones draw from fastload's per-sample streams (seeded, repeatable), not DALI's mt19937: their
values follow DALI's rules and distributions, not its numbers.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..engine.conversions import convert_sat
from ..engine.graph import Op
from ..float32 import libm_float
from . import crops
from .operators import _device, _one, _seeded, check_args
from .spec import operator
from .types import torch_dtype
from .warping import rotated_size

F32 = np.float32
PREFIX = "fastload.compat.dali"


def cpu_only(operator: str, device) -> None:
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
    # computed on the CPU (one float32 subtraction, the same on any device); a "gpu" node's output goes back
    return _one(Op("coord_flip", run, [data], settings, device=_device([data], device), layouts=(data.layout(),),
                   fusable=False))


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
    cpu_only("fn.bbox_rotate", _device([boxes], device))
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
    cpu_only("fn.roi_random_crop", device)
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
            negative = [d for d, c in enumerate(crop) if c < 0]  # (without a shape DALI takes them: the rule runs)
            if negative:
                raise ValueError(f"{PREFIX}: {name}: crop_shape can't be negative with an input shape; got "
                                 f"{crop[negative[0]]} for d={negative[0]}")
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
    cpu_only("fn.random_crop_generator", device)
    area = tuple(float(v) for v in (random_area if isinstance(random_area, (list, tuple)) else [random_area]))
    aspect = tuple(float(v) for v in (random_aspect_ratio if isinstance(random_aspect_ratio, (list, tuple))
                                      else [random_aspect_ratio]))
    area = area * 2 if len(area) == 1 else area
    aspect = aspect * 2 if len(aspect) == 1 else aspect
    if len(area) != 2 or not 0 <= area[0] <= area[1]:
        raise ValueError(f"{PREFIX}: fn.random_crop_generator: random_area must be [min, max], got {random_area}")
    if len(aspect) != 2 or not 0 <= aspect[0] <= aspect[1]:
        raise ValueError(f"{PREFIX}: fn.random_crop_generator: random_aspect_ratio must be [min, max], not "
                         f"negative, got {random_aspect_ratio}")
    if int(num_attempts) < 1:
        raise ValueError(f"{PREFIX}: fn.random_crop_generator: num_attempts must be at least 1")

    def run(ctx, op, shape):
        dims = shape.reshape(-1).tolist()
        if len(dims) not in (2, 3):
            raise ValueError(f"{PREFIX}: fn.random_crop_generator takes a shape of 2 (HW) or 3 (HWC) values, "
                             f"got {dims}")
        window = crops.random_crop_window if aspect[0] > 0 else _window_of_zero_min_ratio
        y, x, h, w = window(int(dims[0]), int(dims[1]), ctx.rng(op), area, aspect, int(num_attempts))
        return torch.tensor([y, x], dtype=torch.int32), torch.tensor([h, w], dtype=torch.int32)

    return _one(_seeded(Op("random_crop_generator", run, [shapes], {}, num_outputs=2, fusable=False), args))


def _window_of_zero_min_ratio(H: int, W: int, rng, area, aspect, num_attempts: int) -> tuple[int, int, int, int]:
    """DALI's RandomCropGenerator window (``crops.random_crop_window``'s rule) where the aspect ratio's minimum
    is 0, as DALI's x86 build computes it: the largest height 1 / 0 converts to INT_MIN, so is 1; log(0) is
    -inf, so every attempt's ratio is NaN and its window 1 x 1 (kept where a ratio of 1 is in range)."""
    if H <= 0 or W <= 0:
        return 0, 0, 0, 0
    f32 = np.float32
    max_ratio = f32(aspect[1])
    min_area = f32(W * H) * f32(area[0])
    max_w = max(1, int(f32(H) * max_ratio))
    if f32(H * max_w) < min_area:  # too wide for any window in range
        h, w = H, max_w
    elif f32(W) < min_area:  # too tall: the largest height is 1
        h, w = 1, W
    elif max_ratio >= 1 and num_attempts > 0:  # the first attempt, 1 x 1, is in range
        h, w = 1, 1
    else:  # DALI's fallback: the whole image, its ratio clamped into range, at most the max area
        h, w = (H, max_w) if f32(W) / f32(H) > max_ratio else (H, W)
        root = np.sqrt(min(f32(1), f32(area[1]) * f32(W) * f32(H) / f32(h * w)))
        h, w = max(1, int(f32(h) * root)), max(1, int(f32(w) * root))
    return min(int(rng.random() * (H - h + 1)), H - h), min(int(rng.random() * (W - w + 1)), W - w), h, w


# ------------------------------------------------------------------------------------------ multi_paste

_PASTE_TYPES = (torch.uint8, torch.int16, torch.int32, torch.float32)


def _pairs(value, count: int, name: str) -> np.ndarray | None:
    if value is None:
        return None
    pairs = np.asarray(value.flatten().tolist() if isinstance(value, torch.Tensor) else value, np.float64)
    if pairs.size != 2 * count:
        raise ValueError(f"{PREFIX}: fn.multi_paste: {name} must be [{count}, 2] (one (y, x) per region), got "
                         f"{pairs.size} values")
    return pairs.reshape(count, 2)


def _factor(values: np.ndarray, name: str) -> np.ndarray:
    values = values.astype(F32)
    if not ((values >= 0) & (values <= 1)).all():
        raise ValueError(f"{PREFIX}: fn.multi_paste: {name} must be in [0, 1], got {values.tolist()}")
    return values


def multi_paste_sample(sources: list[torch.Tensor], output_size, out_dtype: torch.dtype, *, in_anchors=None,
                       in_anchors_rel=None, shapes=None, shapes_rel=None, out_anchors=None,
                       out_anchors_rel=None) -> torch.Tensor:
    """One output of fn.multi_paste: region k of ``sources[k]`` pasted in order onto a zero canvas (the
    rules in the module docstring)."""
    count = len(sources)
    channels = sources[0].shape[2]
    if any(s.shape[2] != channels for s in sources):
        raise ValueError(f"{PREFIX}: fn.multi_paste: all regions pasted into a sample must have the same number "
                         f"of channels, got {[s.shape[2] for s in sources]}")
    if output_size is None and any(s.shape[:2] != sources[0].shape[:2] for s in sources):
        raise ValueError(f"{PREFIX}: fn.multi_paste: without output_size all the inputs must have the same shape, "
                         f"got {[tuple(s.shape[:2]) for s in sources]}")
    height, width = (int(output_size[0]), int(output_size[1])) if output_size is not None else sources[0].shape[:2]
    if height < 0 or width < 0:
        raise ValueError(f"{PREFIX}: fn.multi_paste: output_size must be non-negative, got {output_size}")
    canvas = torch.zeros((height, width, channels), dtype=torch.float64)  # holds every input value exactly
    abs_in, rel_in = _pairs(in_anchors, count, "in_anchors"), _pairs(in_anchors_rel, count, "in_anchors_rel")
    abs_sh, rel_sh = _pairs(shapes, count, "shapes"), _pairs(shapes_rel, count, "shapes_rel")
    abs_out, rel_out = _pairs(out_anchors, count, "out_anchors"), _pairs(out_anchors_rel, count, "out_anchors_rel")
    regions = []
    for k, source in enumerate(sources):
        extent = np.array(source.shape[:2], np.int64)
        if abs_sh is not None:
            size = abs_sh[k].astype(np.int64)
        elif rel_sh is not None:
            size = np.ceil(extent.astype(F32) * _factor(rel_sh[k], "shapes_rel")).astype(np.int64)
        else:
            size = extent.copy()
        if abs_in is not None:
            start = abs_in[k].astype(np.int64)
        elif rel_in is not None:
            start = np.floor(extent.astype(F32) * _factor(rel_in[k], "in_anchors_rel")).astype(np.int64)
        else:
            start = np.zeros(2, np.int64)
        if abs_sh is None and rel_sh is None:
            size = size - start
        if abs_out is not None:
            at = abs_out[k].astype(np.int64)
        elif rel_out is not None:
            at = np.floor(np.array([height, width], F32) * _factor(rel_out[k], "out_anchors_rel")).astype(np.int64)
        else:
            at = np.zeros(2, np.int64)
        if (start < 0).any() or (size < 0).any() or (start + size > extent).any():
            raise ValueError(f"{PREFIX}: fn.multi_paste: the pasted region must be within the input sample: anchor "
                             f"{start.tolist()}, shape {size.tolist()}, input {extent.tolist()} (region {k})")
        if (at < 0).any() or (at + size > [height, width]).any():
            raise ValueError(f"{PREFIX}: fn.multi_paste: the pasted region must be within the output: anchor "
                             f"{at.tolist()}, shape {size.tolist()}, output {[height, width]} (region {k})")
        regions.append((source, start, size, at))
    for source, start, size, at in regions:
        (y, x), (h, w), (oy, ox) = start.tolist(), size.tolist(), at.tolist()
        canvas[oy:oy + h, ox:ox + w] = source[y:y + h, x:x + w].to(canvas.dtype)
    return convert_sat(canvas, out_dtype)


@operator("multi_paste", "MultiPaste")
def multi_paste(*images, in_ids=None, in_anchors=None, in_anchors_rel=None, shapes=None, shapes_rel=None,
                out_anchors=None, out_anchors_rel=None, output_size=None, dtype=None, device=None, **args):
    """``fn.multi_paste`` of HWC images (uint8, int16, int32 or float32): region k of input k pasted into
    the same sample's output (``multi_paste_sample``); every geometry argument may be per sample.
    ``in_ids`` (regions from other samples of the batch) is refused."""
    name = "fn.multi_paste"
    check_args(name, args, set())
    cpu_only(name, _device(list(images), device))
    if in_ids is not None:
        raise NotImplementedError(f"{PREFIX}: {name}: in_ids is not supported: it pastes regions of other samples "
                                  f"of the batch, and fastload runs a pipeline one sample at a time; give the "
                                  f"sources as inputs instead (region k from input k of the same sample)")
    if not images:
        raise ValueError(f"{PREFIX}: {name} needs at least one input")
    for a, b in (("in_anchors", "in_anchors_rel"), ("shapes", "shapes_rel"), ("out_anchors", "out_anchors_rel")):
        if locals()[a] is not None and locals()[b] is not None:
            raise ValueError(f"{PREFIX}: {name}: the `{a}` and `{b}` cannot be specified together")
    target = torch_dtype(dtype) if dtype is not None else None
    if target is not None and target not in _PASTE_TYPES:
        raise NotImplementedError(f"{PREFIX}: {name}: output type {target} is not supported (uint8, int16, int32 "
                                  f"or float32, as DALI)")

    def run(ctx, op, *sources, **geometry):
        for source in sources:
            if source.dim() != 3:
                raise ValueError(f"{PREFIX}: {name}: expects HWC samples, got {list(source.shape)}")
            if source.dtype not in _PASTE_TYPES or source.dtype != sources[0].dtype:
                raise TypeError(f"{PREFIX}: {name}: inputs must share one type of uint8, int16, int32 or float32, "
                                f"got {[s.dtype for s in sources]}")
        size = geometry.pop("output_size")
        size = _ints(size, "output_size", name) if size is not None else None
        if size is not None and len(size) < 2:
            raise ValueError(f"{PREFIX}: {name}: output_size should be (H, W), got {size}")
        return multi_paste_sample([s.cpu() for s in sources], size, target or sources[0].dtype, **geometry)

    settings = {"in_anchors": in_anchors, "in_anchors_rel": in_anchors_rel, "shapes": shapes,
                "shapes_rel": shapes_rel, "out_anchors": out_anchors, "out_anchors_rel": out_anchors_rel,
                "output_size": output_size}
    for image in images:  # DALI's layouts for it: HWC (or none, read as HWC; FHWC sequences are not run here)
        if image.layout() not in ("", "HWC"):
            raise ValueError(f"{PREFIX}: {name}: the layout {image.layout()!r} does not match any of the allowed "
                             f"layouts for its inputs: HWC")
    return _one(Op("multi_paste", run, list(images), settings, layouts=("HWC",), fusable=False))


# ----------------------------------------------------------------------------------------- ssd_random_crop

# DALI's SSDRandomCrop options: a minimum IoU (-1: any window), or no crop, drawn uniformly
_SSD_OPTIONS = (F32(-1.0), F32(0.1), F32(0.3), F32(0.5), F32(0.7), F32(0.9), None)


def ssd_crop_window(boxes: np.ndarray, rng, num_attempts: int):
    """DALI's SSDRandomCrop for ltrb boxes [N, 4]: (left, top, right, bottom, kept indices), or None for no
    crop. Rounds draw an option; a crop option tries ``num_attempts`` windows of sides uniform in [0.3, 1)
    (float32), refused outside aspect 0.5..2, placed uniformly, valid when every box's IoU is above the
    option's minimum and some box's centre is strictly inside; rounds repeat until one is valid."""
    while True:
        minimum = _SSD_OPTIONS[rng.randint(0, len(_SSD_OPTIONS))]
        if minimum is None:
            return None
        for _ in range(num_attempts):
            w, h = F32(rng.uniform(0.3, 1.0)), F32(rng.uniform(0.3, 1.0))
            if w / h < 0.5 or w / h > 2.0:
                continue
            left, top = F32(rng.uniform(0.0, 1.0 - float(w))), F32(rng.uniform(0.0, 1.0 - float(h)))
            right, bottom = F32(left + w), F32(top + h)
            if len(boxes):
                inter_w = np.maximum(np.minimum(boxes[:, 2], right) - np.maximum(boxes[:, 0], left), F32(0))
                inter_h = np.maximum(np.minimum(boxes[:, 3], bottom) - np.maximum(boxes[:, 1], top), F32(0))
                inter = (inter_w * inter_h).astype(F32)
                area = ((boxes[:, 3] - boxes[:, 1]) * (boxes[:, 2] - boxes[:, 0])).astype(F32)
                with np.errstate(divide="ignore", invalid="ignore"):
                    ious = inter / (area + F32((bottom - top) * (right - left)) - inter)
                if (ious <= minimum).any():  # a NaN (empty boxes) fails no threshold, as in DALI
                    continue
            xc = 0.5 * (boxes[:, 0].astype(np.float64) + boxes[:, 2])
            yc = 0.5 * (boxes[:, 1].astype(np.float64) + boxes[:, 3])
            kept = np.nonzero((xc > left) & (xc < right) & (yc > top) & (yc < bottom))[0]
            if len(kept):
                return left, top, right, bottom, kept


@operator("ssd_random_crop", "SSDRandomCrop")
def ssd_random_crop(images, boxes, labels, *, num_attempts=1, device=None, **args):
    """``fn.ssd_random_crop`` (deprecated in DALI in favour of fn.random_bbox_crop, a different operator):
    uint8 HWC images cut to a random SSD window (``ssd_crop_window``) with their relative ltrb boxes
    (clipped to the window and made relative to it) and the int32 labels ([K]) of the boxes kept; without a
    crop, all three as they came."""
    name = "fn.ssd_random_crop"
    check_args(name, args, set())
    cpu_only(name, _device([images], device))
    if int(num_attempts) < 1:
        raise ValueError(f"{PREFIX}: {name}: num_attempts must be at least 1")

    def run(ctx, op, image, box_values, label_values):
        if image.dim() != 3 or image.dtype != torch.uint8:
            raise TypeError(f"{PREFIX}: {name} takes uint8 HWC images, got {image.dtype} {list(image.shape)}")
        values = box_values.cpu().numpy().astype(F32).reshape(-1, 4)
        if label_values.shape[0] != len(values):
            raise ValueError(f"{PREFIX}: {name}: {len(values)} boxes but {label_values.shape[0]} labels")
        window = ssd_crop_window(values, ctx.rng(op), int(num_attempts))
        if window is None:
            return image.clone(), box_values.clone(), label_values.clone()
        left, top, right, bottom, kept = window
        chosen = values[kept].copy()
        chosen[:, 0] = np.maximum(chosen[:, 0], left)
        chosen[:, 1] = np.maximum(chosen[:, 1], top)
        chosen[:, 2] = np.minimum(chosen[:, 2], right)
        chosen[:, 3] = np.minimum(chosen[:, 3], bottom)
        w, h = F32(right - left), F32(bottom - top)
        chosen = ((chosen - np.array([left, top, left, top], F32)) / np.array([w, h, w, h], F32)).astype(F32)
        height, width = image.shape[0], image.shape[1]
        x0, y0 = int(F32(left * F32(width))), int(F32(top * F32(height)))
        x1, y1 = int(F32(right * F32(width))), int(F32(bottom * F32(height)))
        cut = torch.from_numpy(np.ascontiguousarray(image.cpu().numpy()[y0:y1, x0:x1]))
        kept_labels = label_values.cpu().reshape(-1)[torch.from_numpy(kept)].to(torch.int32)
        return cut, torch.from_numpy(chosen), kept_labels

    return _one(_seeded(Op("ssd_random_crop", run, [images, boxes, labels], {}, num_outputs=3,
                           layouts=(images.layout(), "", ""), fusable=False), args))
