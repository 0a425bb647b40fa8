"""DALI's box, region and mask operators: ``fn.coord_flip`` and ``fn.bbox_rotate``.

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
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..engine.graph import Op
from ..float32 import libm_float
from .operators import _device, _one, check_args
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
