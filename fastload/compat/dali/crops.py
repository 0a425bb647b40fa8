"""DALI's crop windows and window cutting: ``fn.random_resized_crop``'s random window,
``fn.crop``, ``fn.flip`` and ``fn.crop_mirror_normalize``, on one image.

The window rules (DALI's RandomCropGenerator and CropAttr: float32 draws, anchors rounded half away
from zero, out-of-bounds policies) are shared by the per-sample operators and by ``lowering.py``,
which places the same windows for the fused plan; keeping them in one module keeps the two equal.
"""

from __future__ import annotations

import functools
import math
from typing import Optional, Tuple

import numpy as np
import torch

from ..float32 import F32 as _F32
from ..float32 import fma as _fma
from ..float32 import round_c as _round_c
from ..engine.conversions import convert_sat

try:  # fn.crop_mirror_normalize's common case in native code where the extension was built
    from . import _native
except ImportError:
    _native = None


def random_crop_window(height: int, width: int, rng, area: Tuple[float, float] = (0.08, 1.0),
                       aspect_ratio: Tuple[float, float] = (3 / 4, 4 / 3),
                       num_attempts: int = 10) -> Tuple[int, int, int, int]:
    """The (y, x, h, w) crop window of fn.random_resized_crop / fn.decoders.image_random_crop.

    DALI's RandomCropGenerator, in float32 as DALI computes it: each attempt draws the area
    fraction uniformly from ``area`` and the aspect ratio (w/h) log-uniformly from
    ``aspect_ratio`` (DALI's default is 3/4 .. 4/3 in float32, which its docs print as 1.333333:
    a 33 x 1000 image gives 44-wide windows, which 1.333333 would make 43); ``w = round(sqrt(A*r))``,
    ``h = round(sqrt(A/r))`` (at least 1); the first window that fits and whose rounded ratio is
    still in range wins. Images too wide or too tall for any window in range are answered at once
    (full height, ``int(H * max_ratio)`` wide; or the transpose), and after ``num_attempts``
    failures the whole image, its ratio clamped into range, shrunk to the largest allowed area.
    The position is uniform over the integer offsets. ``rng`` needs ``uniform(low, high)`` and
    ``random()``; the values differ from DALI's (its generator is Philox), the distribution does not.
    """
    H, W = int(height), int(width)
    if H <= 0 or W <= 0:
        return 0, 0, 0, 0
    min_ratio, max_ratio = _F32(aspect_ratio[0]), _F32(aspect_ratio[1])
    min_area_frac, max_area_frac = _F32(area[0]), _F32(area[1])
    max_hw_ratio = _F32(1) / min_ratio
    min_area = _F32(W * H) * min_area_frac
    max_w = max(1, int(_F32(H) * max_ratio))
    max_h = max(1, int(_F32(W) * max_hw_ratio))
    if _F32(H * max_w) < min_area:  # too wide for any window in range
        h, w = H, max_w
    elif _F32(W * max_h) < min_area:  # too tall
        h, w = max_h, W
    else:
        log_lo, log_hi = float(_F32(math.log(min_ratio))), float(_F32(math.log(max_ratio)))
        for _ in range(num_attempts):
            target_area = _F32(rng.uniform(float(min_area_frac), float(max_area_frac))) * _F32(H * W)
            ratio = _F32(math.exp(_F32(rng.uniform(log_lo, log_hi))))
            w = max(1, int(_round_c(np.sqrt(target_area * ratio))))
            h = max(1, int(_round_c(np.sqrt(target_area / ratio))))
            if w <= W and h <= H and min_ratio <= _F32(w) / _F32(h) <= max_ratio:
                break
        else:  # DALI's fallback: the whole image, ratio clamped into range, at most the max area
            ratio = _F32(W) / _F32(H)
            h, w = (H, max_w) if ratio > max_ratio else (max_h, W) if ratio < min_ratio else (H, W)
            scale = min(_F32(1), max_area_frac * _F32(W) * _F32(H) / _F32(h * w))
            root = np.sqrt(_F32(scale))
            h, w = max(1, int(_F32(h) * root)), max(1, int(_F32(w) * root))
    y = min(int(rng.random() * (H - h + 1)), H - h)
    x = min(int(rng.random() * (W - w + 1)), W - w)
    return y, x, h, w


def _layout_axes(layout: str) -> Tuple[int, int, int]:
    layout = layout.upper()
    if sorted(layout) != ["C", "H", "W"]:
        raise ValueError(f"expected an HWC or CHW layout, got {layout!r}")
    return layout.index("H"), layout.index("W"), layout.index("C")


def _round_anchor(value: float, rounding: str) -> int:
    if rounding == "round":
        return int(_round_c(value))
    if rounding == "truncate":
        return int(value)
    raise ValueError(f"rounding must be 'round' or 'truncate', got {rounding!r}")


def _crop_window(height: int, width: int, crop_h, crop_w, crop_pos_x, crop_pos_y, rounding):
    """DALI's CropAttr: a window extent > 0 crops that axis (its float truncated to int), else the
    whole axis; the anchor is ``pos * (in - crop)`` (pos as float32, product in double), rounded
    half away from zero ("round") or truncated, and may be negative when the window is larger."""
    window = []
    for extent, crop, pos, name in ((height, crop_h, crop_pos_y, "crop_pos_y"),
                                    (width, crop_w, crop_pos_x, "crop_pos_x")):
        size = int(float(crop or 0))
        pos = float(_F32(pos)) if size > 0 else 0.5
        if not 0.0 <= pos <= 1.0:
            raise ValueError(f"{name} ({pos}) is out of range [0.0, 1.0]")
        size = size if size > 0 else extent
        window.append((_round_anchor(pos * (extent - size), rounding), size))
    return window


def _fill_vector(fill_values, channels: int, dtype: torch.dtype) -> torch.Tensor:
    """Per-channel fill values in ``dtype``, as float64. DALI converts them with a plain C cast:
    truncated toward zero and, out of an integer type's range, wrapped (300 -> uint8 44), as measured."""
    values = [float(v) for v in (fill_values if isinstance(fill_values, (list, tuple)) else [fill_values])]
    if len(values) == 1:
        values = values * channels
    if len(values) < channels:
        raise ValueError(f"fill_values has {len(values)} values for {channels} channels; give one or one per channel")
    if dtype.is_floating_point:
        return torch.tensor(values, dtype=torch.float64).to(dtype).double()
    return torch.tensor([math.trunc(v) for v in values], dtype=torch.int64).to(dtype).double()


# The types whose every value float64 holds exactly: a crop to the same type skips the float64 copy and the
# conversion back (a saturating round of every pixel) without changing a bit; 64-bit integers keep the old path.
_EXACT_IN_DOUBLE = frozenset({torch.bool, torch.uint8, torch.int8, torch.uint16, torch.int16, torch.uint32,
                              torch.int32, torch.float16, torch.bfloat16, torch.float32, torch.float64})


def _slice_window(image: torch.Tensor, window, axes, fill: torch.Tensor, out_of_bounds_policy: str,
                  op: str, keep_dtype: bool = False) -> torch.Tensor:
    """Cut ``window`` ((anchor, size) for H and W) out of ``image``, applying DALI's out-of-bounds
    policy: "error" refuses, "pad"/"constant" fills outside the image, "trim_to_shape" shrinks the
    window to the image. Returns float64 values (exact for every integer input type), or with
    ``keep_dtype`` a contiguous copy in the image's own type (``fill`` already holds values of that type)."""
    h_axis, w_axis, c_axis = axes
    extents = (image.shape[h_axis], image.shape[w_axis])
    out_of_bounds = any(a < 0 or a + s > e for (a, s), e in zip(window, extents))
    policy = out_of_bounds_policy
    if out_of_bounds and policy == "error":
        (y, h), (x, w) = window
        raise ValueError(f"{op}: the window can't be placed out of bounds with out_of_bounds_policy='error': "
                         f"input shape (H, W) = {tuple(extents)}, window anchor (y, x) = ({y}, {x}), "
                         f"window shape (h, w) = ({h}, {w}); use 'pad' or 'trim_to_shape'")
    if policy not in ("error", "pad", "constant", "trim_to_shape"):
        raise ValueError(f"{op}: unknown out_of_bounds_policy {policy!r}")
    if policy == "trim_to_shape":
        window = [(max(0, a), min(e, a + s) - max(0, a)) for (a, s), e in zip(window, extents)]
        window = [(a, max(0, s)) for a, s in window]
    if keep_dtype and not out_of_bounds:  # the window lies inside the image: a copy of it, nothing to fill
        cut = [slice(None)] * 3
        cut[h_axis], cut[w_axis] = (slice(a, a + s) for a, s in window)
        return image[tuple(cut)].clone(memory_format=torch.contiguous_format)
    values = image if keep_dtype else image.double()
    sizes = [0, 0, 0]
    sizes[h_axis], sizes[w_axis], sizes[c_axis] = window[0][1], window[1][1], image.shape[c_axis]
    shape = [1, 1, 1]
    shape[c_axis] = -1
    out = (fill.to(image.dtype) if keep_dtype else fill).view(shape).expand(sizes).clone()
    src, dst = [slice(None)] * 3, [slice(None)] * 3
    for axis, (anchor, size), extent in ((h_axis, window[0], extents[0]), (w_axis, window[1], extents[1])):
        lo, hi = max(0, anchor), min(extent, anchor + size)
        if hi <= lo:
            return out
        src[axis], dst[axis] = slice(lo, hi), slice(lo - anchor, hi - anchor)
    out[tuple(dst)] = values[tuple(src)]
    return out


def crop(image: torch.Tensor, *, crop_h: float = 0, crop_w: float = 0, crop_pos_x: float = 0.5,
         crop_pos_y: float = 0.5, fill_values=0, out_of_bounds_policy: str = "error", rounding: str = "round",
         dtype: Optional[torch.dtype] = None, layout: str = "HWC") -> torch.Tensor:
    """fn.crop on one image (HWC, or CHW with ``layout="CHW"``).

    The window is ``crop_h`` x ``crop_w`` (0: the whole axis) at ``crop_pos * (in - crop)``,
    rounded half away from zero (DALI's ``rounding="round"``; "truncate" also works): a centred
    odd remainder goes down-right, e.g. 10 -> 7 gives anchor round(1.5) = 2. A window outside the
    image raises ValueError ("error"), is filled with ``fill_values`` (scalar or per channel) for
    "pad", or is shrunk to the image for "trim_to_shape". ``dtype`` converts as :func:`cast`.
    """
    axes = _layout_axes(layout)
    window = _crop_window(image.shape[axes[0]], image.shape[axes[1]], crop_h, crop_w, crop_pos_x, crop_pos_y,
                          rounding)
    out_dtype = image.dtype if dtype is None else dtype
    fill = _fill_vector(fill_values, image.shape[axes[2]], out_dtype)
    if out_dtype == image.dtype and out_dtype in _EXACT_IN_DOUBLE:
        return _slice_window(image, window, axes, fill, out_of_bounds_policy, "crop", keep_dtype=True)
    out = _slice_window(image, window, axes, fill, out_of_bounds_policy, "crop")
    return convert_sat(out, out_dtype)


def flip(image: torch.Tensor, horizontal: int = 1, vertical: int = 0, layout: str = "HWC") -> torch.Tensor:
    """fn.flip: mirror the width axis when ``horizontal``, the height axis when ``vertical``."""
    h_axis, w_axis, _ = _layout_axes(layout)
    dims = [axis for axis, on in ((w_axis, horizontal), (h_axis, vertical)) if on]
    return image.flip(dims) if dims else image.clone()


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@functools.lru_cache(maxsize=256)
def _folded(means: tuple, stds: tuple, shift: float, scale: float, count: int):
    """DALI's folded normalisation: ``mean' = mean - shift * std / scale`` (one fma in double) and
    ``1/std' = scale / std``, stored as float32, per channel. Cached: a pipeline normalises every sample with
    the same few arguments, and the exact fma (fractions before Python 3.13) costs more than the image's
    native pass."""
    shift32, scale32 = float(_F32(shift)), float(_F32(scale))
    folded_mean = [_F32(_fma(-shift32, float(_F32(stds[i % len(stds)])) / scale32, float(_F32(means[i % len(means)]))))
                   for i in range(count)]
    inv_std = [_F32(scale32 / float(_F32(stds[i % len(stds)]))) for i in range(count)]
    return folded_mean, inv_std


def crop_mirror_normalize(image: torch.Tensor, *, crop_h: float = 0, crop_w: float = 0, crop_pos_x: float = 0.5,
                          crop_pos_y: float = 0.5, mirror: bool = False, mean=0.0, std=1.0, scale: float = 1.0,
                          shift: float = 0.0, dtype: torch.dtype = torch.float32, output_layout: str = "CHW",
                          pad_output: bool = False, fill_values=0, out_of_bounds_policy: str = "error",
                          rounding: str = "round", layout: str = "HWC") -> torch.Tensor:
    """fn.crop_mirror_normalize on one image.

    Crop as :func:`crop`, then ``out = (in - mean) / std * scale + shift`` with ``mean``/``std``
    scalars or per channel, in the input's units (0..255 for uint8). DALI folds the arguments into
    ``mean' = mean - shift * std / scale`` and ``1/std' = scale / std`` (double, stored as float32)
    and computes ``(in - mean') * (1/std')`` in float32; integer outputs (uint8, int8) round half away
    from zero and saturate, float16 rounds to nearest. ``mirror`` flips horizontally. Pixels outside
    the image ("pad") and the extra channels of ``pad_output`` (channels padded to a power of two:
    3 -> 4) take ``fill_values`` converted to the output type, not normalised (with another policy
    than "pad", 0). ``output_layout``
    is "CHW" (default) or "HWC" (or the input's, when "").
    """
    axes = _layout_axes(layout)
    channels = image.shape[axes[2]]
    window = _crop_window(image.shape[axes[0]], image.shape[axes[1]], crop_h, crop_w, crop_pos_x, crop_pos_y,
                          rounding)
    means = [float(v) for v in (mean if isinstance(mean, (list, tuple)) else [mean])]
    stds = [float(v) for v in (std if isinstance(std, (list, tuple)) else [std])]
    count = max(len(means), len(stds))
    if not (len(means) == len(stds) or len(means) == 1 or len(stds) == 1):
        raise ValueError("crop_mirror_normalize: mean and std must have the same length, or one of them one value")
    if count not in (1, channels):
        raise ValueError(f"crop_mirror_normalize: {count} mean/std values for {channels} channels")
    folded_mean, inv_std = _folded(tuple(means), tuple(stds), float(shift), float(scale), count)
    out_channels = _next_pow2(channels) if pad_output else channels
    target = (output_layout or layout).upper()
    if _native is not None and _native_window(image, window, layout, dtype, out_channels, out_of_bounds_policy,
                                              target):
        return _native_normalize(image, window, folded_mean, inv_std, mirror, target)
    padding = out_of_bounds_policy in ("pad", "constant")  # DALI reads fill_values only then, measured: the
    fill = _fill_vector(fill_values if padding else 0, out_channels, dtype)  # extra channels are 0 otherwise
    cut = _slice_window(image, window, axes, fill[:channels], out_of_bounds_policy, "crop_mirror_normalize")
    inside = _slice_window(torch.ones_like(image, dtype=torch.bool), window, axes,
                           torch.zeros(channels, dtype=torch.float64),
                           "trim_to_shape" if out_of_bounds_policy == "trim_to_shape" else "pad", "") > 0
    shape = [1, 1, 1]
    shape[axes[2]] = -1
    mean_t = torch.tensor(np.array(folded_mean, dtype=_F32)).view(shape)
    inv_t = torch.tensor(np.array(inv_std, dtype=_F32)).view(shape)
    normalized = (cut.float() - mean_t) * inv_t
    out = torch.where(inside, convert_sat(normalized, dtype), convert_sat(cut, dtype))
    if out_channels > channels:
        pad_shape = list(out.shape)
        pad_shape[axes[2]] = out_channels - channels
        extra = fill[channels:].view(shape).expand(pad_shape)
        out = torch.cat([out, convert_sat(extra, dtype)], dim=axes[2])
    if mirror:
        out = out.flip(axes[1])
    _layout_axes(target)
    return out.permute([layout.upper().index(name) for name in target]).contiguous()


def _native_window(image: torch.Tensor, window, layout: str, dtype: torch.dtype, out_channels: int, policy: str,
                   target: str) -> bool:
    """Whether ``_native.normalize`` computes this crop_mirror_normalize: a uint8 HWC image on the CPU to
    float32, the window inside the image (no fill: the policy does not matter), no padded channels."""
    if image.dtype != torch.uint8 or image.dim() != 3 or image.is_cuda or layout.upper() != "HWC":
        return False
    if dtype != torch.float32 or out_channels != image.shape[2] or target not in ("CHW", "HWC"):
        return False
    (y, h), (x, w) = window
    return (policy in ("error", "pad", "constant", "trim_to_shape") and y >= 0 and x >= 0
            and y + h <= image.shape[0] and x + w <= image.shape[1])


def _native_normalize(image: torch.Tensor, window, folded_mean, inv_std, mirror: bool, target: str) -> torch.Tensor:
    """crop_mirror_normalize's window in native code (``_native.c`` normalize): the same float32
    ``(in - mean') * (1/std')`` as the torch version, mirrored and laid out in one pass without the GIL,
    instead of float64 copies of the window and of an inside-the-image mask, a select and a permute."""
    (y, h), (x, w) = window
    height, width, channels = image.shape
    image = image.contiguous()
    mean = np.resize(np.array(folded_mean, dtype=_F32), channels)  # one value repeats for every channel
    inv = np.resize(np.array(inv_std, dtype=_F32), channels)
    shape = (channels, h, w) if target == "CHW" else (h, w, channels)
    out = torch.empty(shape, dtype=torch.float32)
    _native.normalize(image.numpy(), out.numpy(), height, width, channels, y, x, h, w, mean, inv,
                      target == "CHW", bool(mirror))
    return out
