"""rocAL's sizes and windows and RPP's resampling: resize output sizes and buffers, crop windows, and
RPP's host resize kernels (nearest, bilinear, the separable cubic / lanczos / gaussian / triangular
filters) in float32 as RPP computes them, checked against RPP's golden outputs (tests/data/rpp); pixelate,
which is two of those resizes.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ..float32 import expf, fmaf


MAX_ASPECT_RATIO = 6  # rocAL/include/pipeline/commons.h: output buffers of resizes that keep the aspect


def resize_size(width: int, height: int, *, resize_width=0, resize_height=0, resize_shorter=0, resize_longer=0,
                scaling_mode=0, max_size=()) -> tuple[int, int]:
    """The (width, height) rocAL's resize gives an image of ``width`` x ``height`` (ResizeNode::
    adjust_out_roi_size, rocAL/source/augmentations/geometry_augmentations/node_resize.cpp; the mode
    rules of rocalResize, rocAL/source/api/rocal_api_augmentation.cpp). ``max_size`` is (width, height)
    as rocAL's C++ reads it."""
    if resize_shorter:  # forces NOT_SMALLER to a square (rocalResize)
        scaling_mode, resize_width, resize_height = 2, resize_shorter, resize_shorter
    elif resize_longer:
        scaling_mode, resize_width, resize_height = 3, resize_longer, resize_longer
    max_w, max_h = (tuple(max_size) * 2)[:2] if max_size else (0, 0)
    dst_w, dst_h = int(resize_width), int(resize_height)
    if scaling_mode == 1:  # STRETCH: a missing side keeps the source's
        dst_w, dst_h = dst_w or width, dst_h or height
        return (min(dst_w, max_w) if max_w else dst_w), (min(dst_h, max_h) if max_h else dst_h)
    if scaling_mode == 0:  # DEFAULT: both given: stretch; one given: the other keeps the aspect
        if dst_w and not dst_h:
            dst_h = _lround(float(np.float32(height) * np.float32(dst_w) / np.float32(width)))
        elif dst_h and not dst_w:
            dst_w = _lround(float(np.float32(width) * np.float32(dst_h) / np.float32(height)))
        return (min(dst_w, max_w) if max_w else dst_w), (min(dst_h, max_h) if max_h else dst_h)
    f32 = np.float32  # the node computes its scales in float
    scale_w, scale_h = f32(dst_w) / f32(width), f32(dst_h) / f32(height)
    if not dst_w or not dst_h:
        scale = scale_w or scale_h
    else:
        scale = max(scale_w, scale_h) if scaling_mode == 2 else min(scale_w, scale_h)
    if max_w:
        scale = min(scale, f32(max_w) / f32(width))
    if max_h:
        scale = min(scale, f32(max_h) / f32(height))
    out_w = dst_w if dst_w and scale_w == scale else _lround(float(f32(width) * scale))
    out_h = dst_h if dst_h and scale_h == scale else _lround(float(f32(height) * scale))
    return out_w, out_h


def resize_buffer(input_max: tuple[int, int], *, resize_width=0, resize_height=0, resize_shorter=0, resize_longer=0,
                  scaling_mode=0, max_size=()) -> tuple[int, int]:
    """The (width, height) of a resize's output buffer, in which every sample's image lies at the top left
    (rocalResize: max_size where both its sides are given, else the requested sides, a missing one
    MAX_ASPECT_RATIO times the other, and then a side max_size gives)."""
    max_w, max_h = (tuple(max_size) * 2)[:2] if max_size else (0, 0)
    if max_w and max_h:
        return int(max_w), int(max_h)
    if resize_shorter:
        w = h = resize_shorter * MAX_ASPECT_RATIO
    elif resize_longer:
        w = h = resize_longer
    else:
        w, h = int(resize_width), int(resize_height)
        if scaling_mode == 1:
            w, h = w or input_max[0], h or input_max[1]
        elif scaling_mode == 2:
            w, h = (w or h) * MAX_ASPECT_RATIO, (h or w) * MAX_ASPECT_RATIO
        else:
            w, h = w or h * MAX_ASPECT_RATIO, h or w * MAX_ASPECT_RATIO
    return int(max_w or w), int(max_h or h)


def _lround(value: float) -> int:
    """C's lround: halves away from zero."""
    return int(math.floor(abs(value) + 0.5)) * (1 if value >= 0 else -1)


def anchored_crop(width: int, height: int, crop_w: int, crop_h: int, pos_x: float, pos_y: float):
    """(x, y, w, h) of a fixed-anchor crop (crop_mirror_normalize, center_crop): a side larger than the
    image shrinks to the image's, the anchor is nearbyintf(pos * (side - crop)), halves to even
    (rocAL/source/parameters/parameter_rocal_crop.cpp, fill_crop_dims)."""
    w = crop_w if 0 < crop_w <= width else width
    h = crop_h if 0 < crop_h <= height else height
    x, y = round(pos_x * (width - w)), round(pos_y * (height - h))  # Python rounds halves to even, as nearbyintf
    return x, y, min(w, width - x), min(h, height - y)


def fixed_window(width: int, height: int, crop_w: int, crop_h: int, pos_x: float, pos_y: float):
    """(x, y, w, h) of ``fn.crop``'s window with a size, before the image's edge cuts it: rocAL stores
    crop_pos_x/y into whole-pixel offsets (CropNode::init, rocAL/source/augmentations/geometry_augmentations/
    node_crop.cpp), so the default 0.5 is 0, the top-left corner; an offset past the image is 0; a size of
    0 or larger than the image is the image's."""
    x, y = int(pos_x), int(pos_y)
    x, y = (0 if x >= width else x), (0 if y >= height else y)
    return x, y, (crop_w if 0 < crop_w <= width else width), (crop_h if 0 < crop_h <= height else height)


def fixed_crop(width: int, height: int, crop_w: int, crop_h: int, pos_x: float, pos_y: float):
    """``fixed_window`` cut at the image's edge."""
    x, y, w, h = fixed_window(width, height, crop_w, crop_h, pos_x, pos_y)
    return x, y, min(w, width - x), min(h, height - y)


def crop_resize_window(width: int, height: int, area: float, ratio: float, x_drift: float, y_drift: float):
    """RocalRandomCropParam::fill_crop_dims with fixed values (rocAL/source/parameters/
    parameter_random_crop.cpp): w = trunc(sqrt(A * r)), h = trunc(sqrt(A / r)) for A = area * W * H, kept
    when strictly inside the image, at trunc(drift * (side - crop)); else the central crop of the image
    with its aspect ratio clamped to [0.75, 1.333]."""
    size = _window_size(width, height, area, ratio)
    if size is None:
        return central_window(width, height)
    w, h = size
    return int(x_drift * (width - w)), int(y_drift * (height - h)), w, h


def random_crop_window_xywh(width: int, height: int, uniform) -> tuple[int, int, int, int]:
    """RocalRandomCropParam::fill_crop_dims with its own parameters (fn.random_crop's, rocAL/source/
    parameters/parameter_random_crop.cpp): up to 5 draws (num_attempts is not read) of an area factor in
    [0.08, 0.99] and an aspect ratio in [0.75, 1.333] until the window is strictly inside the image, placed
    by drifts in [0.01, 0.99]; else central_window. ``uniform(low, high)`` draws one value. Takes (width,
    height) and gives (x, y, w, h), as rocAL's crop parameters do -- the opposite order of the DALI layer's
    ``crops.random_crop_window(height, width)`` -> (y, x, h, w), hence the suffix."""
    for _ in range(5):
        size = _window_size(width, height, uniform(0.08, 0.99), uniform(0.75, 1.333))
        if size is not None:
            w, h = size
            return int(uniform(0.01, 0.99) * (width - w)), int(uniform(0.01, 0.99) * (height - h)), w, h
    return central_window(width, height)


def _window_size(width: int, height: int, area: float, ratio: float) -> tuple[int, int] | None:
    """RocalRandomCropParam's window (w, h) for an area factor and aspect ratio, or None where it is not
    strictly inside the image."""
    target = area * height * width
    w, h = int(math.sqrt(target * ratio)), int(math.sqrt(target * (1 / ratio)))
    return (w, h) if h < height and w < width else None


def central_window(width: int, height: int) -> tuple[int, int, int, int]:
    """RocalRandomCropParam's fallback: the central crop with the image's aspect ratio clamped to
    [0.75, 1.333], as (left, top, width, height), in rocAL's float32 (1.333 * 3000 is 3998 there)."""
    low, high = np.float32(0.75), np.float32(1.333)
    in_ratio = np.float32(width) / np.float32(height)
    if in_ratio < low:
        w, h = width, int(np.float32(width) / low)
    elif in_ratio > high:
        w, h = int(np.float32(height) * high), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


def crop_resize(image: torch.Tensor, area: float, ratio: float, x_drift: float, y_drift: float, width: int,
                height: int) -> torch.Tensor:
    """rocAL's CropResizeNode (fn.resize_crop, the JSON CropResizeFixed): crop_resize_window's window,
    resized to ``width`` x ``height`` with RPP's bilinear."""
    left, top, w, h = crop_resize_window(image.shape[1], image.shape[0], area, ratio, x_drift, y_drift)
    return resample(image[top:top + h, left:left + w], width, height, "linear")


def resize_crop_mirror(image: torch.Tensor, crop_w: int, crop_h: int, width: int, height: int,
                       mirror: bool) -> torch.Tensor:
    """rocAL's ResizeCropMirrorNode (fn.resize_crop_mirror, the JSON ResizeCropMirrorFixed): the top-left
    crop_w x crop_h window (fixed_crop: 0 or more than the image is the whole side), resized to ``width``
    x ``height`` with RPP's bilinear, mirrored."""
    left, top, w, h = fixed_crop(image.shape[1], image.shape[0], crop_w, crop_h, 0, 0)
    out = resample(image[top:top + h, left:left + w], width, height, "linear")
    return out.flip(1) if mirror else out


def resample(image: torch.Tensor, width: int, height: int, interpolation: str) -> torch.Tensor:
    """The image resampled to ``width`` x ``height`` as RPP's host kernels do (ROCm/rpp at f1d37473,
    src/modules/tensor/cpu/kernel/resize.cpp): "nn" takes the source pixel floor((x + 0.5) * ratio)
    (compute_resize_nn_src_loc); "linear" is ``_rpp_bilinear``; "cubic", "lanczos", "gaussian" and
    "triangular" are RPP's separable filters (``_rpp_separable``)."""
    if image.shape[0] < 1 or image.shape[1] < 1:
        raise ValueError(f"an empty {image.shape[1]}x{image.shape[0]} window to resize")
    if interpolation in _SEPARABLE:
        return _rpp_separable(image, width, height, interpolation)
    src_h, src_w = image.shape[0], image.shape[1]
    if interpolation == "nn":
        rows = _nn_sources(src_h, height)
        cols = _nn_sources(src_w, width)
        return image[rows][:, cols].contiguous()
    return _rpp_bilinear(image, width, height)


def _nn_sources(size: int, out: int) -> torch.Tensor:
    ratio = np.float32(size) / np.float32(out)
    where = torch.arange(out, dtype=torch.float32) * float(ratio) + float(ratio * np.float32(0.5))
    return where.floor().long().clamp(0, size - 1)


def _bilinear_taps(size: int, out: int):
    """Per output index: the two source taps and the first's weight. c = (d + 0.5) * ratio - 0.5 in float32,
    the first tap ceil(c - 1), weighted (tap - (c - 1)); both taps capped at size - 2, so the last source
    row or column is never read (resize_bilinear_u8_u8_host_tensor: maxHeightLimit = height - 2)."""
    ratio = np.float32(size) / np.float32(out)
    offset = (ratio - np.float32(1)) * np.float32(0.5) - np.float32(1)
    where = torch.arange(out, dtype=torch.float32) * float(ratio) + float(offset)
    first = torch.ceil(where)
    weight = first - where
    limit = max(size - 2, 0)
    first = first.long()
    return first.clamp(0, limit), (first + 1).clamp(0, limit), weight


def _rpp_bilinear(image: torch.Tensor, width: int, height: int) -> torch.Tensor:
    """RPP's plain bilinear resize: centre-aligned, no antialiasing when shrinking, taps capped at
    side - 2; uint8 results rounded half to even and saturated, except the last ``width % 8`` columns of
    each row, which RPP's scalar tail truncates (compute_bilinear_interpolation_3c_pkd: a cast to Rpp8u)."""
    top, bottom, wy = _bilinear_taps(image.shape[0], height)
    left, right, wx = _bilinear_taps(image.shape[1], width)
    # RPP's arithmetic, wy * (wx * TL + (1 - wx) * TR) + (1 - wy) * (wx * BL + (1 - wx) * BR), in float32 and
    # in this order (so bit for bit the per-pixel formula), but as a horizontal pass over the source rows the
    # taps use, then a vertical one, with index_select and in-place products: about 3x faster than
    # gathering the four taps per output pixel, which dominated a JSON pipeline's time.
    height_in, width_in = image.shape[0], image.shape[1]
    channels = image.shape[2] if image.dim() == 3 else 1
    rows = torch.unique(torch.cat([top, bottom]))
    where = torch.full((height_in,), -1, dtype=torch.long)
    where[rows] = torch.arange(len(rows))
    used = image.reshape(height_in, width_in * channels).index_select(0, rows).view(len(rows), width_in, channels)
    across = used.index_select(1, left).float().mul_(wx.view(1, -1, 1))
    across.add_(used.index_select(1, right).float().mul_((1 - wx).view(1, -1, 1)))
    across = across.view(len(rows), width * channels)
    out = across.index_select(0, where[top]).mul_(wy.view(-1, 1))
    out.add_(across.index_select(0, where[bottom]).mul_((1 - wy).view(-1, 1)))
    out = out.view(height, width, channels) if image.dim() == 3 else out.view(height, width)
    if image.dtype != torch.uint8:
        return out.to(image.dtype)
    tail = width & ~7
    truncated = out[:, tail:].trunc()
    out.round_()
    out[:, tail:] = truncated
    return out.clamp_(0, 255).to(torch.uint8)


# RPP's separable filters (ROCm/rpp f1d37473, api/rppdefs.h GenericFilter; src/modules/tensor/cpu/kernel/
# resize.cpp): (radius, widened when shrinking) -- a shrinking axis scales the filter by 1 / ratio and its
# radius by ratio; cubic never widens.
_SEPARABLE = {"cubic": (2.0, False), "lanczos": (3.0, True), "gaussian": (1.0, True), "triangular": (1.0, True)}
# How the uint8 outputs round: every column half to even (saturate_pixel's nearbyintf, since ROCm/rpp
# d1b136a7), or, as RPP's golden resize files were made before that (7fca0252), the scalar tail -- the last
# width % 16 columns -- truncated ("truncate_tail", for the tests against those files).
SEPARABLE_ROUNDING = "nearest"


def _filter_value(kind: str, x: np.ndarray) -> np.ndarray:
    """RPP's coefficient functions (resize.cpp: compute_bicubic/lanczos3/gaussian/triangular_coefficient)
    in float32 as its build computes them: clang fuses a multiply feeding an add within an expression
    (cubic's polynomials, Horner by Horner), ``x *= M_PI`` multiplies in double, and sinf/expf are
    glibc's, correctly rounded (here: double, then rounded)."""
    f32 = np.float32
    x = np.asarray(x, f32)
    if kind == "cubic":
        a = np.abs(x)
        square = (a * a).astype(f32)
        # x*x*(-0.5f*x + 2.5f) - 4.0f*x + 2.0f: fma(x*x, fma(-0.5, x, 2.5), -(4x)) + 2
        far = (fmaf(square, fmaf(a, -0.5, 2.5), -(f32(4) * a)) + f32(2)).astype(f32)
        near = fmaf(square, fmaf(a, 1.5, -2.5), 1)  # x*x*(1.5f*x - 2.5f) + 1
        return np.where(a >= 2, f32(0), np.where(a > 1, far, near)).astype(f32)
    if kind == "lanczos":
        def sinc(v):
            v = (v.astype(np.float64) * np.pi).astype(f32)
            with np.errstate(invalid="ignore", divide="ignore"):
                small = fmaf(-(v * v).astype(f32), f32(1.0) / f32(6), f32(1))  # 1.0f - x*x*ONE_OVER_6
                return np.where(np.abs(v) < f32(1e-5), small, (np.sin(v.astype(np.float64)).astype(f32) / v))
        third = (x * f32(0.333333)).astype(f32)
        return np.where(np.abs(x) >= 3, f32(0), (sinc(x) * sinc(third)).astype(f32)).astype(f32)
    if kind == "gaussian":
        return expf((x * x).astype(f32) * f32(-4.0))
    return np.maximum(f32(1) - np.abs(x), f32(0)).astype(f32)


@functools.lru_cache(maxsize=1024)
def _separable_axis(size: int, out: int, kind: str) -> tuple[np.ndarray, np.ndarray, float]:
    """One axis of RPP's separable resize (resize_separable_host_tensor): per output index its first source
    tap, ceil(d * ratio + offset) (unclamped), and the filter's normalized float32 coefficients (one per
    tap); and the filter's radius. Kept per (size, out, kind): images of one size share it (read-only)."""
    f32 = np.float32
    ratio = f32(size) / f32(out)
    base, widens = _SEPARABLE[kind]
    radius, scale = f32(base), f32(1)
    if widens and size > out:
        radius, scale = f32(base) * ratio, f32(1) / ratio
    taps = int(np.ceil(f32(2) * radius))
    offset = (ratio - f32(1)) * f32(0.5) - radius
    where = fmaf(np.arange(out, dtype=f32), ratio, offset)  # compute_resize_src_loc
    first = np.ceil(where)
    weight = (first - where).astype(f32) - radius
    coefficients = np.stack([_filter_value(kind, ((weight + f32(k)) * scale).astype(f32)) for k in range(taps)], 1)
    total = np.zeros(out, f32)
    for k in range(taps):  # compute_row_coefficients: summed in order, then scaled by the reciprocal
        total = (total + coefficients[:, k]).astype(f32)
    inverse = np.where(total != 0, f32(1) / np.where(total != 0, total, f32(1)), f32(1)).astype(f32)
    first, coefficients = first.astype(np.int64), (coefficients * inverse[:, None]).astype(f32)
    first.flags.writeable = coefficients.flags.writeable = False
    return first, coefficients, float(radius)


@functools.lru_cache(maxsize=1024)
def _gray_reads_past(size: int, out: int, kind: str) -> bool:
    """Whether RPP's one-channel horizontal pass (compute_separable_horizontal_resample's last branch)
    weighs a value past the end of the row. Its SIMD loop makes 16 outputs at a time, 4 by 4, loading 4
    consecutive taps from a start clamped once (not at all in a group whose first tap is negative), until
    a group's fourth first tap reaches the row's last index less int(radius): that block and the rest go
    to the scalar tail, which clamps each tap. A filter wider than that margin reads past the row, and
    where that tap's coefficient is not 0 the output depends on it."""
    first, coefficients, radius = _separable_axis(size, out, kind)
    limit, taps = size - 1, coefficients.shape[1]
    for column in range(0, (out & ~15) - 15, 16):
        groups = range(column, column + 16, 4)
        if any(first[x] >= 0 and first[x + 3] >= limit - int(radius) for x in groups):
            return False  # this block is redone by the scalar tail, and so is the rest of the row
        for x in groups:
            for k in range(0, taps, 4):
                for output in range(x, x + 4):
                    start = first[output] + k
                    start = start if first[x] < 0 else min(max(start, 0), limit)
                    for j in range(min(4, taps - k)):  # kernelAdd: the loaded taps the sums use
                        if start + j > limit and coefficients[output, k + j] != 0:
                            return True
    return False


def _rpp_separable(image: torch.Tensor, width: int, height: int, kind: str) -> torch.Tensor:
    """RPP's separable resize (cubic, Lanczos-3, Gaussian, triangular): a vertical pass into float32, then
    a horizontal one, each summing its taps in order with fused multiply-adds, taps clamped to the image
    (compute_separable_vertical/horizontal_resample: ``fmaf``, here on float64 tensors holding float32
    values); uint8 outputs rounded half to even and saturated (``SEPARABLE_ROUNDING``). A one-channel
    image whose filter would read past its rows (``_gray_reads_past``) is a ValueError."""
    one_channel = image.dim() == 2 or image.shape[2] == 1
    source = image.reshape(image.shape[0], image.shape[1], -1).double()
    rows, row_coefficients, _ = _separable_axis(source.shape[0], height, kind)
    cols, col_coefficients, _ = _separable_axis(source.shape[1], width, kind)
    if one_channel and _gray_reads_past(source.shape[1], width, kind):
        raise ValueError(f"{kind} resampling of a one-channel {source.shape[1]}-pixel row to {width}: RPP's "
                         f"one-channel resize then reads past the end of the row (its SIMD loads four taps "
                         f"from a start clamped once) with a weight not 0, so its output depends on memory "
                         f"past the image; RGB images, and CUBIC, LINEAR or NEAREST_NEIGHBOR resampling, "
                         f"do not")
    temp = torch.zeros((height, source.shape[1], source.shape[2]), dtype=torch.float64)
    for k in range(row_coefficients.shape[1]):
        taps = torch.from_numpy(np.clip(rows + k, 0, source.shape[0] - 1))
        weights = torch.tensor(row_coefficients[:, k], dtype=torch.float64)[:, None, None]
        temp = source.index_select(0, taps).mul_(weights).add_(temp).float().double()  # one rounding each
    out = torch.zeros((height, width, source.shape[2]), dtype=torch.float64)
    for k in range(col_coefficients.shape[1]):
        taps = torch.from_numpy(np.clip(cols + k, 0, source.shape[1] - 1))
        weights = torch.tensor(col_coefficients[:, k], dtype=torch.float64)[None, :, None]
        out = temp.index_select(1, taps).mul_(weights).add_(out).float().double()
    out = out.float()
    if image.dtype == torch.uint8:
        tail = width & ~15 if SEPARABLE_ROUNDING == "truncate_tail" else width
        out[:, :tail] = out[:, :tail].round()
        out = out.trunc_().clamp_(0, 255).to(torch.uint8)
    out = out.reshape((height, width) if image.dim() == 2 else (height, width, image.shape[2]))
    return out.contiguous() if image.dtype == torch.uint8 else out.to(image.dtype)


def pixelate_size(side: int, percent: float) -> int:
    """The side of RPP's intermediate image: side * (100 - percent) / 100 in float32, truncated (ROCm/rpp
    f1d37473, src/modules/rppt_tensor_effects_augmentations.cpp, rppt_pixelate_host)."""
    return int(np.float32(side) * (np.float32(100) - np.float32(percent)) / np.float32(100))


def pixelate(image: torch.Tensor, percent: float) -> torch.Tensor:
    """RPP's pixelate (rppt_pixelate_host): the image resized down to ``pixelate_size`` of each side with
    RPP's bilinear resize, then back up to its own size with RPP's nearest-neighbour resize -- no fixed
    block size; at 50 % each output 2x2 block is the mean of the source's."""
    height, width = image.shape[0], image.shape[1]
    small_w, small_h = pixelate_size(width, percent), pixelate_size(height, percent)
    if small_w < 1 or small_h < 1:
        raise ValueError(f"pixelate_percent {percent} leaves no pixel of a {width}x{height} image")
    return resample(resample(image, small_w, small_h, "linear"), width, height, "nn")
