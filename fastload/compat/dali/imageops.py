"""DALI's image operators, one sample at a time, in plain torch.

``fastload.compat.dali`` runs DALI pipelines on fastload; its graph executor calls
these functions once per sample, with per-sample arguments already resolved to
Python scalars and tuples. An image is a torch tensor in HWC layout (DALI's
default), uint8 unless stated; every function returns a new tensor.

The numerics follow DALI 2.4's documented rules and what its CPU operators were
measured to do: tests/compat/test_dali_imageops.py runs real DALI on the same
images and states each function's measured difference. Where DALI computes in
float32 (resampling coefficients, matrices, per-pixel arithmetic) the same steps
are taken here in float32, in the same order, so most results match bit for bit.
Integer outputs are rounded as DALI's ``ConvertSat`` rounds: to nearest, halves
away from zero, then clamped to the type's range.
"""

from __future__ import annotations

import functools
import io
import math
from fractions import Fraction
from typing import Optional, Tuple

import numpy as np
import torch
from PIL import Image, ImageOps

from ...decode import MAX_SCANS, count_scans
from ..float32 import F32 as _F32
from ..float32 import fma as _fma
from ..float32 import libm_float as _libm_float
from ..float32 import nearest_f32 as _f32_exact
from ..float32 import round_c as _round_c
from ..float32 import round_half_away as _round_half_away

# --------------------------------------------------------------------------------------------
# Conversions


def _to_float16(x: torch.Tensor) -> torch.Tensor:
    """float -> float16 as DALI converts (measured): nearest, but halves away from zero (not to
    even); beyond the range, infinity."""
    x = x.float()
    magnitude = x.abs()
    nearest = magnitude.to(torch.float16)  # ties to even
    bits = nearest.view(torch.int16)
    up = nearest.float() < magnitude  # the other candidate is one float16 step away
    other = torch.where(up, bits + 1, bits - 1).clamp(min=0).view(torch.float16)
    tie = (magnitude.double() - nearest.double()).abs() == (other.double() - magnitude.double()).abs()
    away = torch.where(tie & (other.float() > nearest.float()), other, nearest)
    return torch.where(x < 0, -away, away).to(torch.float16)


_NUMPY = {torch.uint8: np.uint8, torch.int8: np.int8, torch.uint16: np.uint16, torch.int16: np.int16,
          torch.uint32: np.uint32, torch.int32: np.int32, torch.uint64: np.uint64, torch.int64: np.int64}


def _convert_sat(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """DALI's ConvertSat: to an integer type round (halves away from zero) and clamp to its range;
    integer to integer clamp; to float16 round halves away from zero; other floats just convert."""
    if dtype == torch.bool:  # measured: a float is rounded first (0.49999997 -> False, 0.5 -> True)
        return (_round_half_away(x.double()) if x.dtype.is_floating_point else x) != 0
    if dtype == torch.float16:
        return _to_float16(x) if x.dtype != torch.float16 else x.clone()
    if dtype.is_floating_point:
        return x.to(dtype)
    info = np.iinfo(_NUMPY[dtype])
    if x.dtype == torch.bool:
        return x.to(dtype)
    if x.dtype.is_floating_point:  # numpy: torch lacks comparisons on uint16/32/64
        values = _round_half_away(x.double() if x.dtype == torch.float64 else x.float()).double().numpy()
        top = float(info.max)  # for 64-bit types this rounds up to 2**63 / 2**64, out of range
        out = np.clip(values, float(info.min), np.nextafter(top, 0) if top >= 2.0 ** 63 else top)
        out = out.astype(_NUMPY[dtype])
        out[values >= top] = info.max
        return torch.from_numpy(out)
    values = x.numpy()
    source = np.iinfo(values.dtype)
    low, high = max(info.min, source.min), min(info.max, source.max)
    return torch.from_numpy(np.clip(values, values.dtype.type(low), values.dtype.type(high)).astype(_NUMPY[dtype]))


def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """fn.cast: DALI's saturating conversion (checked against real DALI for every pair of its 12
    numeric types). Float to integer rounds to nearest, halves away from zero, and clamps to the
    target's range (300.7 -> uint8 255, -2.5 -> int8 -3); integer to integer clamps (300 -> uint8
    255, -1 -> uint8 0); to float16 rounds halves away from zero and overflows to infinity; to
    bool is ``round(x) != 0``."""
    return _convert_sat(x, dtype)


# --------------------------------------------------------------------------------------------
# DALI's arithmetic type promotion (the ``+ - * / // ...`` of DataNodes)

_INT_BITS = {torch.int8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64}
_UINT_BITS = {torch.uint8: 8, torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}
_FLOAT_BITS = {torch.float16: 16, torch.float32: 32, torch.float64: 64}
_INT_OF = {bits: dtype for dtype, bits in _INT_BITS.items()}
_UINT_OF = {bits: dtype for dtype, bits in _UINT_BITS.items()}
_FLOAT_OF = {bits: dtype for dtype, bits in _FLOAT_BITS.items()}


def promote(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """The type of ``a op b`` for DALI's arithmetic operators (DALI's documented promotion table,
    checked against real DALI for every pair): the same type stays; bool yields to the other type;
    float beats integer (float16 too); the wider of two floats or of two same-signed integers; a
    signed and an unsigned integer give the signed type twice the unsigned width when the signed
    one is not wider (int8 + uint8 -> int16, int32 + uint64 -> int64), else the signed type."""
    if a == b:
        return a
    if a == torch.bool or b == torch.bool:
        return b if a == torch.bool else a
    if a in _FLOAT_BITS or b in _FLOAT_BITS:
        if a in _FLOAT_BITS and b in _FLOAT_BITS:
            return _FLOAT_OF[max(_FLOAT_BITS[a], _FLOAT_BITS[b])]
        return a if a in _FLOAT_BITS else b
    if a in _INT_BITS and b in _INT_BITS:
        return _INT_OF[max(_INT_BITS[a], _INT_BITS[b])]
    if a in _UINT_BITS and b in _UINT_BITS:
        return _UINT_OF[max(_UINT_BITS[a], _UINT_BITS[b])]
    signed, unsigned = (a, b) if a in _INT_BITS else (b, a)
    if _INT_BITS[signed] > _UINT_BITS[unsigned]:
        return signed
    return _INT_OF[min(64, 2 * _UINT_BITS[unsigned])]


def true_divide_type(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """The type of ``a / b`` in DALI: the promoted type when that is a float, else float32
    (integer / integer gives float32, whatever the widths)."""
    promoted = promote(a, b)
    return promoted if promoted.is_floating_point else torch.float32


# --------------------------------------------------------------------------------------------
# Decoding


# What DALI's decoder takes (its documented list), by Pillow's format names (PNM is "PPM")
_DALI_FORMATS = {"JPEG", "MPO", "JPEG2000", "TIFF", "PNG", "BMP", "PPM", "WEBP"}


def decode(data: bytes, output_type: str = "RGB") -> torch.Tensor:
    """fn.decoders.image(device="cpu"): the image as HWC uint8.

    DALI's CPU decoder is libjpeg-turbo (through nvImageCodec) with fancy upsampling and the
    accurate integer IDCT; Pillow wraps the same library with the same defaults, and both apply
    the EXIF orientation (DALI's ``adjust_orientation=True``). "GRAY" of a JPEG asks libjpeg for
    the luma plane (Pillow's draft mode), as DALI does; other formats are converted from RGB with
    0.299/0.587/0.114. "YCbCr" is the RGB result in ITU-R BT.601 studio range (DALI's documented
    definition). WebP goes through torchvision where Pillow lacks it. Formats DALI does not
    decode (GIF, ...) and undecodable bytes raise ValueError saying why.
    """
    kind = {"RGB": "RGB", "BGR": "BGR", "GRAY": "GRAY", "YCBCR": "YCbCr"}.get(str(output_type).upper())
    if kind is None:
        raise ValueError(f"decode: output_type {output_type!r} is not one of RGB, BGR, GRAY, YCbCr")
    data = bytes(data)
    try:
        image = Image.open(io.BytesIO(data))
        if image.format not in _DALI_FORMATS:
            raise ValueError(f"cannot decode image: {image.format} is not a format DALI decodes "
                             "(JPEG, JPEG 2000, TIFF, PNG, BMP, PNM, WebP)")
        if image.format in ("JPEG", "MPO") and image.info.get("progressive") and count_scans(data) > MAX_SCANS:
            raise ValueError(f"cannot decode image: a progressive JPEG with more than {MAX_SCANS} scans "
                             f"(each costs a pass over the whole image): refused")
        if kind == "GRAY" and image.format in ("JPEG", "MPO"):
            image.draft("L", image.size)
        image = ImageOps.exif_transpose(image)
        if image.mode not in ("L", "RGB") or (image.mode == "L" and kind != "GRAY"):
            image = image.convert("RGB")
        array = torch.from_numpy(np.array(image))
    except Image.UnidentifiedImageError:
        if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
            raise ValueError("cannot decode image: unknown image format") from None
        array = _decode_webp(data)
    except Image.DecompressionBombError as error:
        raise ValueError(f"cannot decode image: too large ({error})") from None
    except (OSError, SyntaxError, EOFError) as error:
        raise ValueError(f"cannot decode image: {error}") from None
    if kind == "GRAY":
        return (array if array.dim() == 2 else _rgb_to_gray(array)).unsqueeze(-1).contiguous()
    if array.dim() == 2:
        array = array.unsqueeze(-1).expand(-1, -1, 3)
    if kind == "BGR":
        return array.flip(-1).contiguous()
    if kind == "YCbCr":
        return _rgb_to_ycbcr(array)
    return array.contiguous()


def _decode_webp(data: bytes) -> torch.Tensor:
    import torchvision.io
    try:
        decoded = torchvision.io.decode_image(torch.frombuffer(bytearray(data), dtype=torch.uint8),
                                              mode=torchvision.io.ImageReadMode.RGB, apply_exif_orientation=True)
    except RuntimeError as error:
        raise ValueError(f"cannot decode image: {error}") from None
    return decoded.permute(1, 2, 0).contiguous()


def _weighted(rgb: torch.Tensor, weights, bias: float) -> torch.Tensor:
    """sum_c weights[c] * rgb[..., c] + bias in float32, in channel order (DALI's dot)."""
    values = rgb.float()
    acc = values[..., 0] * float(_F32(weights[0]))
    acc = acc + values[..., 1] * float(_F32(weights[1]))
    acc = acc + values[..., 2] * float(_F32(weights[2]))
    return acc + bias


def _rgb_to_gray(rgb: torch.Tensor) -> torch.Tensor:
    return _convert_sat(_weighted(rgb, (0.299, 0.587, 0.114), 0.0), torch.uint8)


def _rgb_to_ycbcr(rgb: torch.Tensor) -> torch.Tensor:
    """ITU-R BT.601 studio range (Kr = 0.299, Kb = 0.114; Y scaled to 219/255, Cb/Cr to 224/255,
    offsets 16 and 128), coefficients rounded to float32 and applied in float32 as DALI does."""
    kr, kb = 0.299, 0.114
    kg = 1 - kr - kb
    y, c = 219 / 255, 224 / 255
    rows = [[y * kr, y * kg, y * kb],
            [-c * kr / (2 * (1 - kb)), -c * kg / (2 * (1 - kb)), c / 2],
            [c / 2, -c * kg / (2 * (1 - kr)), -c * kb / (2 * (1 - kr))]]
    out = [_weighted(rgb, row, bias) for row, bias in zip(rows, (16.0, 128.0, 128.0))]
    return _convert_sat(torch.stack(out, -1), torch.uint8)


# --------------------------------------------------------------------------------------------
# Random crop windows


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


# --------------------------------------------------------------------------------------------
# Resize: output size


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
    idx = torch.from_numpy(np.clip(first[:, None] + np.arange(support)[None, :], clamp_lo, clamp_hi))
    w = torch.from_numpy(weights)
    shape = [1, 1, 1]
    shape[axis] = -1
    acc = None
    for k in range(support):
        term = x.index_select(axis, idx[:, k]) * w[:, k].view(shape)
        acc = term if acc is None else acc + term
    return acc


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
    x = image.float()
    even = None  # which output elements DALI rounds half-to-even (its SSE stores) rather than away
    for step, d in enumerate(_processing_order(axes, sizes)):
        ax = axes[d]
        # DALI reads the second pass's axis from its region [lo, hi): origin shifted by lo (in
        # float32) and indices clamped to the region; the first pass's axis clamps to the image.
        shift = ax["lo"] if step > 0 else 0
        origin = ax["origin"] - _F32(shift)
        clamp_lo, clamp_hi = (ax["lo"], max(ax["lo"], ax["hi"] - 1)) if step > 0 else (0, extents[d] - 1)
        if ax["flt"] is None:
            x = _nearest_axis(x, d, sizes[d], origin, ax["scale"], shift, clamp_lo, clamp_hi)
            even = None
        else:
            first, weights = _axis_weights(ax["flt"], sizes[d], origin, ax["scale"])
            x = _resample_axis(x, d, first + shift, weights, clamp_lo, clamp_hi)
            if not out_dtype.is_floating_point:
                even = _simd_lanes(d, first, weights.shape[1], clamp_hi - clamp_lo + 1, x.shape, out_dtype)
    if even is not None:
        x = torch.where(even, torch.round(x), _round_half_away(x))
    return _convert_sat(x, out_dtype)


def _simd_lanes(axis: int, first: np.ndarray, support: int, in_extent: int, shape, dtype) -> torch.Tensor:
    """The output elements DALI's CPU resampler writes from SSE registers in its last pass.

    Those are converted with _mm_cvtps_epi32, which rounds halves to even; the scalar tail of each
    block uses C's round (halves away from zero). The vertical pass runs 16-byte blocks along each
    flattened row (width x channels); the horizontal pass runs blocks of output columns within each
    of its border-clamping segments. Only exact .5 results depend on this.
    """
    lanes = 16 // torch.empty((), dtype=dtype).element_size()
    height, width, channels = shape
    if axis == 0:
        lanes = max(lanes, 4)  # float32 input: at least 4 lanes per load
        flat = width * channels
        mask = torch.arange(flat) < (flat // lanes) * lanes
        return mask.view(1, width, channels)
    flipped = first[-1] < first[0]
    n = len(first)
    first_regular, last_regular = 0, n - 1
    if flipped:
        while first_regular < n and first[first_regular] + support > in_extent:
            first_regular += 1
        while last_regular >= 0 and first[last_regular] < 0:
            last_regular -= 1
    else:
        while first_regular < n and first[first_regular] < 0:
            first_regular += 1
        while last_regular >= 0 and first[last_regular] + support > in_extent:
            last_regular -= 1
    mask = torch.zeros(n, dtype=torch.bool)
    start = 0
    for end in (min(first_regular, last_regular + 1), first_regular, last_regular + 1, n):
        if end > start:
            mask[start:start + (end - start) // lanes * lanes] = True
            start = end
    return mask.view(1, n, 1)


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


# --------------------------------------------------------------------------------------------
# Crop, flip, crop_mirror_normalize


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


def _slice_window(image: torch.Tensor, window, axes, fill: torch.Tensor, out_of_bounds_policy: str,
                  op: str) -> torch.Tensor:
    """Cut ``window`` ((anchor, size) for H and W) out of ``image``, applying DALI's out-of-bounds
    policy: "error" refuses, "pad"/"constant" fills outside the image, "trim_to_shape" shrinks the
    window to the image. Returns float64 values (exact for every integer input type)."""
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
    values = image.double()
    sizes = [0, 0, 0]
    sizes[h_axis], sizes[w_axis], sizes[c_axis] = window[0][1], window[1][1], image.shape[c_axis]
    shape = [1, 1, 1]
    shape[c_axis] = -1
    out = fill.view(shape).expand(sizes).clone()
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
    out = _slice_window(image, window, axes, fill, out_of_bounds_policy, "crop")
    return _convert_sat(out, out_dtype)


def flip(image: torch.Tensor, horizontal: int = 1, vertical: int = 0, layout: str = "HWC") -> torch.Tensor:
    """fn.flip: mirror the width axis when ``horizontal``, the height axis when ``vertical``."""
    h_axis, w_axis, _ = _layout_axes(layout)
    dims = [axis for axis, on in ((w_axis, horizontal), (h_axis, vertical)) if on]
    return image.flip(dims) if dims else image.clone()


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


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
    shift32, scale32 = float(_F32(shift)), float(_F32(scale))
    folded_mean = [_F32(_fma(-shift32, float(_F32(stds[i % len(stds)])) / scale32, float(_F32(means[i % len(means)]))))
                   for i in range(count)]
    inv_std = [_F32(scale32 / float(_F32(stds[i % len(stds)]))) for i in range(count)]
    out_channels = _next_pow2(channels) if pad_output else channels
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
    out = torch.where(inside, _convert_sat(normalized, dtype), _convert_sat(cut, dtype))
    if out_channels > channels:
        pad_shape = list(out.shape)
        pad_shape[axes[2]] = out_channels - channels
        extra = fill[channels:].view(shape).expand(pad_shape)
        out = torch.cat([out, _convert_sat(extra, dtype)], dim=axes[2])
    if mirror:
        out = out.flip(axes[1])
    target = (output_layout or layout).upper()
    _layout_axes(target)
    return out.permute([layout.upper().index(name) for name in target]).contiguous()


# --------------------------------------------------------------------------------------------
# Rotate


def rotated_size(height: int, width: int, angle: float) -> Tuple[int, int]:
    """fn.rotate's canvas when neither ``size`` nor ``keep_size`` is given: the bounding box of the
    rotated image, ``ceil(|cos| w + |sin| h - 0.01)`` by ``ceil(|cos| h + |sin| w - 0.01)``, then
    grown by one where needed to keep the parity of the input extent it mostly comes from (w for
    the output width when |angle| is within 45 degrees of 0 or 180, else h), to limit blur."""
    radians = float(_F32(-angle) * _F32(math.pi / 180))
    c, s = abs(math.cos(radians)), abs(math.sin(radians))
    out_w = math.ceil(c * width + s * height - 1e-2)
    out_h = math.ceil(c * height + s * width - 1e-2)
    parity_w, parity_h = (width % 2, height % 2) if s <= c else (height % 2, width % 2)
    return out_h + ((out_h % 2) ^ parity_h), out_w + ((out_w % 2) ^ parity_w)


def rotate(image: torch.Tensor, angle: float, *, fill_value: Optional[float] = None, keep_size: bool = False,
           size=None, interp_type="linear", dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """fn.rotate on one HWC image: counter-clockwise by ``angle`` degrees (with (0, 0) the top-left
    corner), about the image centre, which maps to the output centre.

    Output size: ``size`` (h, w), rounded; the input's with ``keep_size``; else
    :func:`rotated_size`. Each output pixel centre maps back to a source point sampled bilinearly
    ("linear") or nearest ("nn") at pixel centres; source pixels outside the image read as
    ``fill_value`` (converted to the input type), or, when it is None (DALI's default), the
    nearest border pixel. DALI steps the source point along each row by adding the per-column
    derivative in float32, restarting every 256 columns; the same float32 steps are taken here.
    """
    if image.dim() != 3:
        raise ValueError(f"rotate: expected an HWC image, got shape {tuple(image.shape)}")
    height, width, channels = image.shape
    if size is not None:
        out_h, out_w = (int(_round_c(v)) for v in _pair(size))
    elif keep_size:
        out_h, out_w = height, width
    else:
        out_h, out_w = rotated_size(height, width, angle)
    out_dtype = image.dtype if dtype is None else dtype
    interp = _interp(interp_type)
    if interp not in ("linear", "nearest"):
        raise ValueError("rotate: interp_type must be nn or linear")
    # destination -> source: translate(in / 2) * rotation2D(angle) * translate(-out / 2), float32
    a = _F32(-angle) * _F32(math.pi / 180)
    c, s = _libm_float("cos", -a), _libm_float("sin", -a)  # rotation2D(-a) in float32 (cosf, sinf)
    ow, oh = _F32(out_w) * _F32(0.5), _F32(out_h) * _F32(0.5)
    m02 = (c * -ow + (-s) * -oh) + _F32(width) * _F32(0.5)
    m12 = (s * -ow + c * -oh) + _F32(height) * _F32(0.5)
    ys = np.arange(out_h, dtype=_F32) + _F32(0.5)
    # the source of column 0 of each row; DALI adds the x term and the offset before the y term
    # (measured: this order reproduces its float32 coordinates exactly)
    row_x = (c * _F32(0.5) + m02) + (-s) * ys
    row_y = (s * _F32(0.5) + m12) + c * ys
    src_x, src_y = (_walk_row(start, step, out_w) for start, step in ((row_x, c), (row_y, s)))
    src_x, src_y = torch.from_numpy(src_x), torch.from_numpy(src_y)
    pixels = image.float()
    fill = None if fill_value is None else float(_convert_sat(torch.tensor([float(fill_value)]), image.dtype)[0])

    def tap(iy: torch.Tensor, ix: torch.Tensor) -> torch.Tensor:
        if fill is None:
            return pixels[iy.clamp(0, height - 1), ix.clamp(0, width - 1)]
        inside = (iy >= 0) & (iy < height) & (ix >= 0) & (ix < width)
        values = pixels[iy.clamp(0, height - 1), ix.clamp(0, width - 1)]
        return torch.where(inside.unsqueeze(-1), values, torch.tensor(fill))

    if interp == "nearest":
        return _convert_sat(tap(torch.floor(src_y).long(), torch.floor(src_x).long()), out_dtype)
    fx, fy = src_x - 0.5, src_y - 0.5
    x0, y0 = torch.floor(fx), torch.floor(fy)
    qx, qy = (fx - x0).unsqueeze(-1), (fy - y0).unsqueeze(-1)
    px = 1 - qx
    x0, y0 = x0.long(), y0.long()
    top = tap(y0, x0) * px + tap(y0, x0 + 1) * qx
    bottom = tap(y0 + 1, x0) * px + tap(y0 + 1, x0 + 1) * qx
    return _convert_sat(top + (bottom - top) * qy, out_dtype)


def _walk_row(start: np.ndarray, step, count: int) -> np.ndarray:
    """Positions start + x * step as DALI's warp reaches them: adding ``step`` in float32 along the
    row, from checkpoints every 256 columns that are themselves reached by adding 256 * step."""
    out = np.empty((len(start), count), dtype=_F32)
    tile_start = start.astype(_F32)
    tile_step = _F32(256) * _F32(step)
    for begin in range(0, count, 256):
        end = min(count, begin + 256)
        steps = np.full((len(start), end - begin), step, dtype=_F32)
        steps[:, 0] = tile_start
        out[:, begin:end] = np.cumsum(steps, axis=1, dtype=_F32)
        tile_start = tile_start + tile_step
    return out


# --------------------------------------------------------------------------------------------
# Colour


def _half_range(dtype: torch.dtype) -> float:
    return 0.5 if dtype.is_floating_point else 128.0


def _mat3(a, b):
    """3x3 float32 product, each element summed in order k = 0, 1, 2 (DALI's mat operator*)."""
    out = np.zeros((3, 3), dtype=_F32)
    for i in range(3):
        for j in range(3):
            acc = a[i][0] * b[0][j]
            acc = acc + a[i][1] * b[1][j]
            out[i][j] = acc + a[i][2] * b[2][j]
    return out


def _inverse3(matrix: np.ndarray) -> np.ndarray:
    """Gauss-Jordan inverse with partial pivoting in float32, using fused multiply-adds: DALI's
    mat inverse (solve_gauss), so the YIQ->RGB matrix has DALI's exact float32 entries."""
    a = [[_F32(v) for v in row] for row in matrix]
    b = [[_F32(i == j) for j in range(3)] for i in range(3)]
    fma = lambda x, y, z: _f32_exact(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))  # noqa: E731
    for v in range(3):
        pivot = max(range(v, 3), key=lambda i: (abs(a[i][v]), -i))
        a[v], a[pivot], b[v], b[pivot] = a[pivot], a[v], b[pivot], b[v]
        x = _F32(1) / a[v][v]
        a[v] = a[v][:v] + [_F32(1)] + [a[v][j] * x for j in range(v + 1, 3)]
        b[v] = [value * x for value in b[v]]
        for i in range(3):
            if i != v:
                c = -a[i][v]
                a[i] = a[i][:v] + [_F32(0)] + [fma(c, a[v][j], a[i][j]) for j in range(v + 1, 3)]
                b[i] = [fma(c, b[v][j], b[i][j]) for j in range(3)]
    return np.array(b, dtype=_F32)


_RGB2YIQ = np.array([[.299, .587, .114], [.596, -.274, -.321], [.211, -.523, .311]], dtype=_F32)
_YIQ2RGB = _inverse3(_RGB2YIQ)


def _linear_color(image: torch.Tensor, matrix: np.ndarray, offset, dtype) -> torch.Tensor:
    """out[k] = sum_j M[k][j] * in[j] + offset, in float32 and in DALI's order; ConvertSat."""
    if image.dim() != 3 or image.shape[-1] != 3:
        raise ValueError(f"expected an HWC image with 3 channels, got shape {tuple(image.shape)}")
    v = image.float()
    out = []
    for k in range(3):
        acc = v[..., 0] * float(matrix[k][0])
        acc = acc + v[..., 1] * float(matrix[k][1])
        acc = acc + v[..., 2] * float(matrix[k][2])
        out.append(acc + float(offset))
    return _convert_sat(torch.stack(out, -1), image.dtype if dtype is None else dtype)


def _twist_matrix(brightness, contrast, hue, saturation, value):
    """brightness * contrast * YIQ->RGB * hue rotation * saturation * value * RGB->YIQ (float32)."""
    h = float(hue) * math.pi / 180
    hue_m = np.eye(3, dtype=_F32)
    hue_m[1, 1] = hue_m[2, 2] = _F32(math.cos(_F32(h)))
    hue_m[1, 2] = _F32(math.sin(_F32(h)))
    hue_m[2, 1] = -_F32(math.sin(_F32(h)))
    sat_m = np.diag(np.array([1, saturation, saturation], dtype=_F32))
    m = np.diag(np.full(3, brightness, dtype=_F32))
    for factor in (np.diag(np.full(3, contrast, dtype=_F32)), _YIQ2RGB, hue_m, sat_m,
                   np.diag(np.full(3, value, dtype=_F32)), _RGB2YIQ):
        m = _mat3(m, factor)
    return m


def color_twist(image: torch.Tensor, brightness: float = 1.0, contrast: float = 1.0, hue: float = 0.0,
                saturation: float = 1.0, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """fn.color_twist on one RGB HWC image: a 3x3 linear map in RGB space (DALI's formula, not
    an HSV round trip). Hue (degrees) rotates and saturation scales the chroma plane of YIQ;
    contrast scales about the middle of the range (128 for integer inputs, 0.5 for float); then
    brightness multiplies: ``out = b * (c * M_hs @ rgb + (1 - c) * 128)``. float32 arithmetic;
    integer outputs round half away from zero and saturate."""
    matrix = _twist_matrix(_F32(brightness), _F32(contrast), hue, _F32(saturation), _F32(1))
    half = _F32(_half_range(image.dtype))
    offset = (half - half * _F32(contrast)) * _F32(brightness)
    return _linear_color(image, matrix, offset, dtype)


def hsv(image: torch.Tensor, hue: float = 0.0, saturation: float = 1.0, value: float = 1.0,
        dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """fn.hsv on one RGB HWC image: as DALI documents, approximated by a linear map in RGB space:
    into YIQ, rotate the IQ plane by ``hue`` degrees, scale it by ``saturation``, scale all of
    YIQ by ``value``, back to RGB. float32; integer outputs round half away from zero, saturate.
    The output is uint8 unless ``dtype`` says otherwise, even for float input (DALI's default
    dtype, measured)."""
    matrix = _twist_matrix(_F32(1), _F32(1), hue, _F32(saturation), _F32(value))
    return _linear_color(image, matrix, 0.0, torch.uint8 if dtype is None else dtype)


def brightness_contrast(image: torch.Tensor, brightness: float = 1.0, brightness_shift: float = 0.0,
                        contrast: float = 1.0, contrast_center: Optional[float] = None,
                        dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """fn.brightness_contrast: ``out = brightness_shift * range + brightness * (center + contrast *
    (in - center))``, DALI's documented formula. ``range`` is the output type's maximum (255 for
    uint8; 1 for float); ``contrast_center`` defaults to half the input type's range (128 for uint8,
    2**14 for int16, 0.5 for float). DALI folds it into ``in * (b * c) + addend`` in float32; integer
    outputs round half away from zero and saturate."""
    out_dtype = image.dtype if dtype is None else dtype
    if contrast_center is None:
        if image.dtype.is_floating_point:
            contrast_center = 0.5
        else:
            info = torch.iinfo(image.dtype)
            contrast_center = float((info.max + 1) // 2)
    full_range = _F32(1) if out_dtype.is_floating_point else _F32(torch.iinfo(out_dtype).max)
    b, c, center = _F32(brightness), _F32(contrast), _F32(contrast_center)
    addend = _F32(brightness_shift) * full_range + b * (center - c * center)
    multiplier = b * c
    return _convert_sat(image.float() * float(multiplier) + float(addend), out_dtype)
