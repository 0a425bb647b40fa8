"""DALI's ``fn.resize`` on one HWC image: its output-size rules and its separable float32 resampler.

The size rules (DALI's ResizeAttr and AdjustOutputSize: modes, max_size, ROIs, subpixel scale) are
used by ``lowering.py`` to plan the fused resize as well as here; the resampler reproduces DALI's CPU
kernel (filter tables, tap order, pass order, SSE rounding of halves) so results match bit for bit.
"""

from __future__ import annotations

import functools
import math
from typing import Optional, Tuple

import numpy as np
import torch

from ..float32 import F32 as _F32
from ..float32 import libm_float as _libm_float
from ..float32 import round_c as _round_c
from ..float32 import round_half_away as _round_half_away
from ..engine.conversions import convert_sat

try:  # the passes in native code where the extension was built (fastload.compat.dali._native)
    from . import _native
except ImportError:
    _native = None


def _pair(value) -> Tuple[float, float]:
    if isinstance(value, (int, float)):
        return float(value), float(value)
    values = [float(v) for v in value]
    if len(values) == 1:
        return values[0], values[0]
    if len(values) != 2:
        raise ValueError(f"expected one value or two (height, width), got {list(values)}")
    return values[0], values[1]


def _resize_plan(height: int, width: int, *, resize_x=None, resize_y=None, size=None,
                 resize_shorter=None, resize_longer=None, max_size=None, mode=None,
                 roi_start=None, roi_end=None, roi_relative=False, subpixel_scale=True):
    """DALI's ResizeAttr for one sample: output (h, w) and the input region (lo, hi) per axis
    that maps onto it (float32, as DALI stores them)."""
    separate = resize_x is not None or resize_y is not None
    methods = separate + (size is not None) + (resize_shorter is not None) + (resize_longer is not None)
    if methods != 1:
        raise ValueError("resize: give exactly one of resize_x/resize_y, size, resize_shorter, resize_longer")
    if (resize_shorter is not None or resize_longer is not None) and mode is not None:
        raise ValueError("resize: resize_shorter, resize_longer and mode are mutually exclusive")
    mode = mode or "default"
    if mode not in ("default", "stretch", "not_smaller", "not_larger"):
        raise ValueError(f"resize: unknown mode {mode!r}")
    if resize_shorter is not None:
        requested, mode = [_F32(resize_shorter)] * 2, "not_smaller"
    elif resize_longer is not None:
        requested, mode = [_F32(resize_longer)] * 2, "not_larger"
    elif size is not None:
        requested = [_F32(v) for v in _pair(size)]
    else:
        requested = [_F32(resize_y or 0), _F32(resize_x or 0)]
    limit = [_F32(v) for v in _pair(max_size)] if max_size is not None else None

    lo, hi = [_F32(0), _F32(0)], [_F32(height), _F32(width)]
    if roi_start is not None or roi_end is not None:
        if roi_start is None or roi_end is None:
            raise ValueError("resize: roi_start and roi_end must be given together")
        for d, extent in enumerate((height, width)):
            if extent > 0:
                start, end = float(_F32(_pair(roi_start)[d])), float(_F32(_pair(roi_end)[d]))
                if roi_relative:
                    start, end = start * extent, end * extent
                if abs(end - start) < 1e-3:  # DALI widens a degenerate ROI to 0.001 px
                    offset = 0.0005 if start <= end else -0.0005
                    start, end = start - offset, end + offset
                lo[d], hi[d] = _F32(start), _F32(end)
    in_size = []
    for d in range(2):
        extent = hi[d] - lo[d]
        if extent < 0:  # a reversed ROI flips: DALI negates the requested size
            lo[d], hi[d] = hi[d], lo[d]
            requested[d] = -requested[d]
            extent = -extent
        in_size.append(_F32(extent))
    out = _adjust_output_size(requested, in_size, mode, limit)
    empty = height == 0 or width == 0
    sizes, src_lo, src_hi = [], list(lo), list(hi)
    for d in range(2):
        if in_size[d] == 0 and out[d] != 0:
            raise ValueError("resize: cannot produce non-empty output from empty input")
        dst = max(0 if empty else 1, int(_round_c(abs(out[d]))))
        if out[d] < 0:
            src_lo[d], src_hi[d] = src_hi[d], src_lo[d]
        if subpixel_scale and dst != abs(float(out[d])):  # keep the scale: shrink/grow the ROI about its centre
            adjustment = min(10.0, max(-10.0, dst / abs(float(out[d]))))
            center = (float(src_lo[d]) + float(src_hi[d])) * 0.5
            src_lo[d] = _F32(min(1e9, max(-1e9, center + (float(src_lo[d]) - center) * adjustment)))
            src_hi[d] = _F32(min(1e9, max(-1e9, center + (float(src_hi[d]) - center) * adjustment)))
        sizes.append(dst)
    return (sizes[0], sizes[1]), (src_lo[0], src_hi[0]), (src_lo[1], src_hi[1])


def _adjust_output_size(out, in_size, mode, limit):
    """DALI's AdjustOutputSize: fill in missing extents (0) and apply the mode and max_size.
    Scales are doubles made from float32 quotients; sizes are stored back as float32."""
    out = list(out)
    mask = [out[d] != 0 and in_size[d] != 0 for d in range(2)]
    scale = [float(out[d] / in_size[d]) if in_size[d] else 1.0 for d in range(2)]
    provided = sum(mask)
    if provided == 0:
        return list(in_size)
    if mode in ("default", "stretch"):
        if provided < 2:
            if mode == "default":  # missing extents get the (geometric) mean scale of given ones
                avg = 1.0
                for d in range(2):
                    if mask[d]:
                        avg *= abs(scale[d])
                for d in range(2):
                    if not mask[d]:
                        scale[d] = avg
                        out[d] = _F32(float(in_size[d]) * avg)
            else:  # stretch: missing extents keep their size
                for d in range(2):
                    if not mask[d]:
                        scale[d], out[d] = 1.0, in_size[d]
        if limit is not None:
            for d in range(2):
                if limit[d] > 0 and abs(out[d]) > limit[d]:
                    out[d] = _F32(math.copysign(float(limit[d]), float(out[d])))
        return out
    # not_larger / not_smaller: one scale for all axes, the smallest / largest given one
    final = None
    for d in range(2):
        if mask[d]:
            s = float(_F32(abs(scale[d])))
            if final is None or (mode == "not_smaller" and s > final) or (mode == "not_larger" and s < final):
                final = s
    if limit is not None:
        for d in range(2):
            if limit[d] > 0:
                s = float(limit[d]) / float(in_size[d])
                if s < final:
                    final = s
    for d in range(2):
        if not mask[d] or abs(scale[d]) != final:
            scale[d] = math.copysign(final, scale[d])
            out[d] = _F32(float(in_size[d]) * scale[d])
    return out


def resize_output_size(height: int, width: int, *, resize_x: Optional[float] = None,
                       resize_y: Optional[float] = None, size=None, resize_shorter: Optional[float] = None,
                       resize_longer: Optional[float] = None, max_size=None, mode: Optional[str] = None,
                       roi_start=None, roi_end=None, roi_relative: bool = False) -> Tuple[int, int]:
    """fn.resize's output (height, width) for an input of ``height`` x ``width``.

    DALI's rules: exactly one of resize_x/resize_y, size=(h, w), resize_shorter, resize_longer;
    ``mode`` (None means DALI's "default") only with the first two.
    A missing or 0 extent keeps the aspect ratio ("default": it takes the geometric mean scale of
    the given extents; "stretch": it keeps its input size). "not_larger"/"not_smaller" use one
    scale for both axes, the smallest/largest of the given ones; resize_shorter is "not_smaller"
    and resize_longer "not_larger" with that value for both axes. ``max_size`` (one value or (h, w))
    caps the extents, and in the aspect-keeping modes lowers the common scale instead. Sizes are
    computed in float32 and rounded half away from zero, at least 1. A ROI, when given, replaces
    the input extents.
    """
    sizes, _, _ = _resize_plan(height, width, resize_x=resize_x, resize_y=resize_y, size=size,
                               resize_shorter=resize_shorter, resize_longer=resize_longer,
                               max_size=max_size, mode=mode, roi_start=roi_start, roi_end=roi_end,
                               roi_relative=roi_relative)
    return sizes


# --------------------------------------------------------------------------------------------
# Resize: resampling
#
# DALI resamples separably, one axis at a time, into a float32 intermediate. Each output pixel
# takes `support` consecutive input pixels (indices clamped to the image) with weights read from
# a small filter table by linear interpolation and normalised to sum to 1. Filters come from
# tables: triangle [0, 1, 0]; cubic (Catmull-Rom, a = -0.5) sampled at 129 points over [-2, 2];
# Lanczos3 at 193 points over [-3, 3]; Gaussian at 65 points. A filter of radius r is the table
# stretched to support 2r. "linear" is the triangle of radius 1 (2 taps, plain bilinear); when
# downscaling with antialias the filter widens by in/out ("linear" becomes the triangle of radius
# in/out: torch's bilinear antialias / Pillow's BILINEAR; cubic and Lanczos stretch likewise).


@functools.lru_cache(maxsize=None)
def _table(kind: str):
    """(coefficients, anchor, scale) of DALI's filter tables, in float32."""
    if kind == "triangular":
        return np.array([0, 1, 0], dtype=_F32), _F32(1), _F32(1)
    if kind == "gaussian":
        i = np.arange(65, dtype=_F32)
        x = _F32(4) * (i - _F32(32)) / _F32(64)
        return np.exp(-(x * x).astype(np.float64)).astype(_F32), _F32(1), _F32(32)  # correctly rounded, as expf
    if kind == "cubic":
        i = np.arange(129, dtype=_F32)
        x = np.abs(_F32(4) * (i - _F32(64)) / _F32(128))
        x2 = x * x
        x3 = x2 * x
        far = _F32(-0.5) * x3 + _F32(2.5) * x2 - _F32(4.0) * x + _F32(2.0)
        near = _F32(1.5) * x3 - _F32(2.5) * x2 + _F32(1.0)
        coeffs = np.where(x >= 2, _F32(0), np.where(x > 1, far, near)).astype(_F32)
        return coeffs, *_rescaled(_F32(1), _F32(64), 129, _F32(4))
    if kind == "lanczos3":
        i = np.arange(193, dtype=_F32)
        x = _F32(6) * (i - _F32(96)) / _F32(192)
        with np.errstate(invalid="ignore", divide="ignore"):
            coeffs = (_sinc(x) * _sinc(x / _F32(3))).astype(_F32)
        coeffs[np.abs(x) >= 3] = 0
        return coeffs, *_rescaled(_F32(1), _F32(96), 193, _F32(6))
    raise ValueError(f"unknown filter {kind!r}")


def _sinc(x: np.ndarray) -> np.ndarray:
    """sin(pi x) / (pi x) in float32 as DALI computes it (pi x rounded to float32, then sinf)."""
    px = (x.astype(np.float64) * math.pi).astype(_F32)
    safe = np.where(np.abs(px) < 1e-5, _F32(1), px)
    return np.where(np.abs(px) < 1e-5, _F32(1) - px * px * _F32(1 / 6), _sinf(safe) / safe).astype(_F32)


def _sinf(x: np.ndarray) -> np.ndarray:
    return _libm_float("sin", x)


def _rescaled(anchor, scale, n, support):
    """DALI's ResamplingFilter::rescale: stretch a table to cover `support` input pixels."""
    new_scale = _F32(n - 1) / _F32(support)
    return (anchor * scale) / new_scale, new_scale


_INTERP = {"nn": "nearest", "nearest": "nearest", "linear": "linear", "cubic": "cubic",
           "lanczos3": "lanczos3", "lanczos": "lanczos3", "triangular": "triangular", "gaussian": "gaussian"}


def _interp(name) -> str:
    key = str(getattr(name, "name", name)).lower()
    key = key[len("interp_"):] if key.startswith("interp_") else key
    if key not in _INTERP:
        raise ValueError(f"unknown interpolation {name!r}; use nn, linear, cubic, lanczos3, triangular or gaussian")
    return _INTERP[key]


def _axis_filter(kind: str, antialias: bool, in_extent, out_size: int):
    """The filter for one axis: None for nearest, else (table, anchor, scale, support).
    DALI's DefaultFilterRadius and ResamplingFilters::{Triangular, Cubic, Lanczos3, Gaussian}."""
    if kind == "nearest":
        return None
    down = bool(antialias) and in_extent > out_size
    base = "triangular" if kind == "linear" else kind
    coeffs, anchor, scale = _table(base)
    n = len(coeffs)
    # DefaultFilterRadius: (k * in) / out in float32, k = 1 (triangle, Gaussian), 2 (cubic), 3 (Lanczos)
    radius = lambda k: (_F32(k) * _F32(in_extent)) / _F32(out_size) if down else _F32(k)  # noqa: E731
    if kind == "linear":
        support = _F32(2)  # Triangular(1): never widened
    elif kind == "triangular":
        support = max(_F32(1), _F32(2) * radius(1))
    elif kind == "gaussian":
        sigma = _F32(float(radius(1) * _F32(0.5)) / math.sqrt(2))
        support = max(_F32(1), _F32(4 * math.sqrt(2)) * sigma)
    elif kind == "cubic":
        support = _F32(2) * max(_F32(2), radius(2))
    else:  # lanczos3
        support = _F32(2) * max(_F32(3), radius(3))
    anchor, scale = _rescaled(anchor, scale, n, support)
    return coeffs, anchor, scale, int(math.ceil(_F32(n - 1) / scale))


def _filter_at(coeffs: np.ndarray, x: np.ndarray) -> np.ndarray:
    """ResamplingFilter::operator(): the table, linearly interpolated, 0 outside."""
    n = len(coeffs)
    x0 = np.floor(x).astype(np.int64)
    d = x - x0.astype(_F32)
    f0 = np.where((x0 >= 0) & (x0 < n), coeffs[np.clip(x0, 0, n - 1)], _F32(0))
    f1 = np.where((x0 + 1 >= 0) & (x0 + 1 < n), coeffs[np.clip(x0 + 1, 0, n - 1)], _F32(0))
    value = (f0 + d * (f1 - f0)).astype(_F32)
    return np.where((x > -1) & (x < n), value, _F32(0))


def _axis_weights(flt, out_size: int, origin, scale):
    """InitializeResamplingFilter: first input index and normalised weights per output pixel."""
    coeffs, anchor, fscale, support = flt
    values = (anchor, fscale, origin, scale)
    if (_native is not None and all(isinstance(v, _F32) for v in values) and coeffs.dtype == _F32
            and all(math.isfinite(v) for v in values)
            and abs(origin) + abs(anchor) + (out_size + 1) * abs(scale) < 2.0 ** 30):
        first = np.empty(out_size, np.int64)
        weights = np.empty((out_size, support), _F32)
        _native.axis_weights(np.ascontiguousarray(coeffs), float(anchor), float(fscale), support, out_size,
                             float(origin), float(scale), first, weights)
        return first, weights
    return _numpy_axis_weights(flt, out_size, origin, scale)


def _numpy_axis_weights(flt, out_size: int, origin, scale):
    """``_axis_weights`` in numpy: the fallback without the extension (and its tests' reference). The native
    version (``_native.c`` axis_weights) makes the same float32 operations in order, in one call."""
    coeffs, anchor, fscale, support = flt
    start = origin + ((_F32(0.5) * scale - _F32(0.5)) - anchor)
    sx0f = np.arange(out_size, dtype=_F32) * scale + start
    first = np.ceil(sx0f)
    frac = first - sx0f
    taps = (frac[:, None] + np.arange(support, dtype=_F32)[None, :]) * fscale
    weights = _filter_at(coeffs, taps.astype(_F32))
    total = np.zeros(out_size, dtype=_F32)
    for k in range(support):  # sequential float32 sum, as DALI adds
        total = total + weights[:, k]
    weights = np.where(total[:, None] != 0, weights / np.where(total == 0, _F32(1), total)[:, None], weights)
    return first.astype(np.int64), weights.astype(_F32)


def _resample_axis(x: torch.Tensor, axis: int, first: np.ndarray, weights: np.ndarray,
                   clamp_lo: int, clamp_hi: int) -> torch.Tensor:
    """One separable pass over `axis` of a float32 HWC tensor; input indices clamped to
    [clamp_lo, clamp_hi]. Products are added in tap order in float32, as DALI's CPU kernel does."""
    support = weights.shape[1]
    if (_native is not None and x.dtype in (torch.float32, torch.uint8) and x.dim() == 3 and axis in (0, 1)
            and not x.is_cuda):
        return _native_pass(x, axis, first, weights, clamp_lo, clamp_hi)
    x = x.float()  # a uint8 image's first pass (read as float32, exactly)
    idx = torch.from_numpy(np.clip(first[:, None] + np.arange(support)[None, :], clamp_lo, clamp_hi))
    w = torch.from_numpy(weights)
    shape = [1, 1, 1]
    shape[axis] = -1
    acc = None
    for k in range(support):
        term = x.index_select(axis, idx[:, k]) * w[:, k].view(shape)
        acc = term if acc is None else acc + term
    return acc


def _native_pass(x: torch.Tensor, axis: int, first: np.ndarray, weights: np.ndarray, clamp_lo: int,
                 clamp_hi: int) -> torch.Tensor:
    """``_resample_axis`` in native code (``_native.c``): the same products and tap-order float32 sums, in
    one pass without the GIL instead of a full-image gather, product and sum per tap. A uint8 image is read
    as it is (``resample_uint8``), its values converted to float32 as they are read."""
    x = x.contiguous()
    height, width, channels = x.shape
    out_size, support = weights.shape
    shape = (out_size, width, channels) if axis == 0 else (height, out_size, channels)
    out = torch.empty(shape, dtype=torch.float32)
    run = _native.resample_uint8 if x.dtype == torch.uint8 else _native.resample
    run(x.numpy(), out.numpy(), height, width, channels, axis,
                     np.ascontiguousarray(first, dtype=np.int64), np.ascontiguousarray(weights, dtype=_F32),
                     out_size, support, clamp_lo, clamp_hi)
    return out


def _nearest_axis(x: torch.Tensor, axis: int, out_size: int, origin, scale, shift: int,
                  clamp_lo: int, clamp_hi: int) -> torch.Tensor:
    """Nearest neighbour along one axis: the input pixel under each output pixel's centre
    (DALI's ResampleNN: rows step by adding the scale in float32, columns multiply)."""
    if axis == 0:
        steps = np.full(out_size, scale, dtype=_F32)
        steps[0] = origin + _F32(0.5) * scale
        pos = np.cumsum(steps, dtype=_F32)
    else:
        pos = origin + (np.arange(out_size, dtype=_F32) + _F32(0.5)) * scale
    index = np.floor(pos).astype(np.int64) + shift
    return x.index_select(axis, torch.from_numpy(np.clip(index, clamp_lo, clamp_hi)))


def resize(image: torch.Tensor, *, resize_x: Optional[float] = None, resize_y: Optional[float] = None,
           size=None, resize_shorter: Optional[float] = None, resize_longer: Optional[float] = None,
           max_size=None, mode: Optional[str] = None, interp_type="linear", min_filter=None, mag_filter=None,
           antialias: bool = True, dtype: Optional[torch.dtype] = None, roi_start=None, roi_end=None,
           roi_relative: bool = False, subpixel_scale: bool = True) -> torch.Tensor:
    """fn.resize on one HWC image.

    Size arguments as in :func:`resize_output_size`. ``interp_type`` is "linear" (default),
    "nn", "cubic", "lanczos3", "triangular" or "gaussian"; ``min_filter``/``mag_filter``
    override it for downscaling/upscaling (an axis downscales when its output is smaller than its
    input region). DALI's default is linear with ``antialias``: downscaling then uses a triangle
    as wide as the scale (the area-weighted average torch's bilinear antialias computes), upscaling
    plain bilinear; cubic and Lanczos3 widen likewise. Pixel centres map onto pixel centres; input
    coordinates clamp at the borders. When a computed size is fractional DALI rounds it and (with
    ``subpixel_scale``) shrinks the input region about its centre to keep the exact scale. The
    region ``roi_start``/``roi_end`` ((y, x), pixels or relative) resamples only part of the input
    (a reversed region flips); fn.random_resized_crop is this with the window of
    :func:`random_crop_window` as the region (measured: taps at the window's edges read the pixels
    beyond it, so cropping first and resizing the crop differs). Output: the input type (uint8
    rounded half away from zero, clamped) or ``dtype`` (float32 keeps the unrounded values).
    """
    if image.dim() != 3:
        raise ValueError(f"resize: expected an HWC image, got shape {tuple(image.shape)}")
    height, width = int(image.shape[0]), int(image.shape[1])
    (out_h, out_w), roi_y, roi_x = _resize_plan(
        height, width, resize_x=resize_x, resize_y=resize_y, size=size, resize_shorter=resize_shorter,
        resize_longer=resize_longer, max_size=max_size, mode=mode, roi_start=roi_start, roi_end=roi_end,
        roi_relative=roi_relative, subpixel_scale=subpixel_scale)
    out_dtype = image.dtype if dtype is None else dtype
    if out_dtype != image.dtype and not out_dtype.is_floating_point:
        raise ValueError("resize: dtype must be the input type or a float type (DALI's rule)")
    sizes, extents = (out_h, out_w), (height, width)
    rois = (roi_y, roi_x)
    interp = _interp(interp_type)
    minify = _interp(min_filter) if min_filter is not None else interp
    kinds = ("triangular" if minify == "linear" and antialias else minify,  # measured: linear antialiases
             _interp(mag_filter) if mag_filter is not None else interp)
    axes = []
    for d in range(2):
        start, end = rois[d]
        in_extent = abs(end - start)
        kind = kinds[0] if sizes[d] < in_extent else kinds[1]
        flt = _axis_filter(kind, antialias, in_extent, sizes[d])
        scale = (end - start) / _F32(sizes[d])
        anchor = flt[1] if flt is not None else _F32(0)
        support = flt[3] if flt is not None else 1
        lo_f, hi_f = (start, end) if start <= end else (end, start)
        # the input region the filters reach; the second pass clamps to it (measured: its end
        # rounds up)
        lo = max(0, min(extents[d], math.floor(lo_f - anchor)))
        hi = max(0, min(extents[d], math.ceil(hi_f - anchor + support)))
        axes.append(dict(flt=flt, origin=start, scale=scale, lo=lo, hi=hi, support=max(1, support)))
    if out_h == 0 or out_w == 0:
        return torch.zeros((out_h, out_w, image.shape[2]), dtype=out_dtype)
    # a uint8 image stays uint8 until its first filtered pass, which reads it as float32 (its nearest
    # neighbour pass, only a selection, converts it)
    x = image if image.dtype == torch.uint8 and _native is not None and not image.is_cuda else image.float()
    even = None  # which output elements DALI rounds half-to-even (its SSE stores) rather than away
    for step, d in enumerate(_processing_order(axes, sizes)):
        ax = axes[d]
        # DALI reads the second pass's axis from its region [lo, hi): origin shifted by lo (in
        # float32) and indices clamped to the region; the first pass's axis clamps to the image.
        shift = ax["lo"] if step > 0 else 0
        origin = ax["origin"] - _F32(shift)
        clamp_lo, clamp_hi = (ax["lo"], max(ax["lo"], ax["hi"] - 1)) if step > 0 else (0, extents[d] - 1)
        if ax["flt"] is None:
            x = _nearest_axis(x.float(), d, sizes[d], origin, ax["scale"], shift, clamp_lo, clamp_hi)
            even = None
        else:
            first, weights = _axis_weights(ax["flt"], sizes[d], origin, ax["scale"])
            x = _resample_axis(x, d, first + shift, weights, clamp_lo, clamp_hi)
            if not out_dtype.is_floating_point:
                even = _simd_lanes(d, first, weights.shape[1], clamp_hi - clamp_lo + 1, x.shape, out_dtype)
    return _round_output(x, even, out_dtype)


_NATIVE_TYPES = {torch.uint8: "B", torch.int8: "b", torch.uint16: "H", torch.int16: "h"}


def _round_output(x: torch.Tensor, even: Optional[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """The last pass's float32 values in the output type: halves rounded to even where ``even`` (the SIMD
    lanes, :func:`_simd_lanes`) and away from zero elsewhere, then DALI's ConvertSat."""
    if (_native is not None and dtype in _NATIVE_TYPES and x.dtype == torch.float32 and x.dim() == 3
            and x.numel() > 0 and not x.is_cuda):
        return _native_round(x, even, dtype)
    if even is not None:
        x = torch.where(even, torch.round(x), _round_half_away(x))
    return convert_sat(x, dtype)


def _native_round(x: torch.Tensor, even: Optional[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """``_round_output`` in native code (``_native.c`` round_saturate): one pass, the GIL released, instead
    of two full-image roundings, a select and ConvertSat's float64 clip."""
    x = x.contiguous()
    row_len = x.shape[1] * x.shape[2]
    lanes = b""
    if even is not None:
        lanes = np.broadcast_to(even.numpy(), (1, x.shape[1], x.shape[2])).astype(np.uint8)
    out = torch.empty(x.shape, dtype=dtype)
    _native.round_saturate(x.numpy(), out.numpy(), x.numel(), row_len, lanes, _NATIVE_TYPES[dtype])
    return out


def _simd_lanes(axis: int, first: np.ndarray, support: int, in_extent: int, shape, dtype) -> torch.Tensor:
    """The output elements DALI's CPU resampler writes from SSE registers in its last pass.

    Those are converted with _mm_cvtps_epi32, which rounds halves to even; the scalar tail of each
    block uses C's round (halves away from zero). The vertical pass runs 16-byte blocks along each
    flattened row (width x channels); the horizontal pass runs blocks of output columns within each
    of its border-clamping segments. Only exact .5 results depend on this.
    """
    lanes = 16 // dtype.itemsize
    height, width, channels = shape
    if axis == 0:
        return _row_lanes(width, channels, max(lanes, 4))  # float32 input: at least 4 lanes per load
    n = len(first)
    starts = first.tolist()
    first_regular, last_regular = 0, n - 1
    if starts[-1] < starts[0]:  # flipped
        while first_regular < n and starts[first_regular] + support > in_extent:
            first_regular += 1
        while last_regular >= 0 and starts[last_regular] < 0:
            last_regular -= 1
    else:
        while first_regular < n and starts[first_regular] < 0:
            first_regular += 1
        while last_regular >= 0 and starts[last_regular] + support > in_extent:
            last_regular -= 1
    mask = np.zeros(n, dtype=bool)
    start = 0
    for end in (min(first_regular, last_regular + 1), first_regular, last_regular + 1, n):
        if end > start:
            mask[start:start + (end - start) // lanes * lanes] = True
            start = end
    return torch.from_numpy(mask).view(1, n, 1)


@functools.lru_cache(maxsize=256)
def _row_lanes(width: int, channels: int, lanes: int) -> torch.Tensor:
    """The vertical pass's SIMD lanes: 16-byte blocks along each flattened row (kept: one per row length)."""
    flat = width * channels
    return (torch.arange(flat) < (flat // lanes) * lanes).view(1, width, channels)


def _processing_order(axes, sizes):
    """Which axis DALI's CPU resize filters first: the cheaper order by a cost model of
    intermediate size (weight 3) plus taps, a horizontal tap costing 1.4 vertical ones. The order
    only changes float32 rounding (a tie at .5 can round either way); the weights were fitted to
    real DALI 2.4 (which order reproduced it bit for bit) over 750 random shapes and filters."""
    in_y, in_x = (ax["hi"] - ax["lo"] for ax in axes)
    out_y, out_x = sizes
    sup_y, sup_x = axes[0]["support"], axes[1]["support"]
    tmp_vert, tmp_horz, area = in_x * out_y, out_x * in_y, out_x * out_y
    vertical_first = 3 * tmp_vert + tmp_vert * sup_y + 1.4 * area * sup_x
    horizontal_first = 3 * tmp_horz + 1.4 * tmp_horz * sup_x + area * sup_y
    return (0, 1) if vertical_first < horizontal_first else (1, 0)
