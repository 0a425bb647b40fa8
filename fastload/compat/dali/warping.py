"""DALI's float32 warp sampler (WarpCPU) on one HWC image, and ``fn.rotate`` built on it.

``fn.warp_affine`` (``geometry.py``) and ``fn.rotate`` are one sampler in DALI: a 2x3 destination-to-source
matrix, each row's source points reached by adding the matrix's first column in float32 (from checkpoints
every 256 columns), not computed directly. :func:`warp` takes the same steps, so coordinates, and
outputs, match DALI's bit for bit; :func:`rotate` only builds its matrix and canvas. Where the extension is
built the sampler runs in native code (``_native_warp.c``), the same steps in one pass without the GIL; the
torch version is its fallback and its tests' reference. The sampler lives here, not in ``geometry.py``,
because ``geometry`` builds graph operators (it imports ``operators``, which imports this module).
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
from ..engine.conversions import convert_sat
from .resampling import _interp, _pair

try:  # the sampler in native code where the extension was built (fastload.compat.dali._native_warp)
    from . import _native_warp
except ImportError:
    _native_warp = None

# the types the native sampler reads and writes (_native_warp.c's codes)
_NATIVE_TYPES = {torch.uint8: "B", torch.int8: "b", torch.uint16: "H", torch.int16: "h", torch.int32: "i",
                 torch.float32: "f"}


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
    derivative in float32, restarting every 256 columns; :func:`warp` takes the same float32 steps.
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
    interp = _interp(interp_type)
    if interp not in ("linear", "nearest"):
        raise ValueError("rotate: interp_type must be nn or linear")
    # destination -> source: translate(in / 2) * rotation2D(angle) * translate(-out / 2), float32
    a = _F32(-angle) * _F32(math.pi / 180)
    c, s = _libm_float("cos", -a), _libm_float("sin", -a)  # rotation2D(-a) in float32 (cosf, sinf)
    ow, oh = _F32(out_w) * _F32(0.5), _F32(out_h) * _F32(0.5)
    m02 = (c * -ow + (-s) * -oh) + _F32(width) * _F32(0.5)
    m12 = (s * -ow + c * -oh) + _F32(height) * _F32(0.5)
    matrix = np.array([[c, -s, m02], [s, c, m12]], dtype=_F32)
    return warp(image, matrix, out_h, out_w, fill_value=fill_value, interp="nn" if interp == "nearest" else interp,
                dtype=dtype)


def warp(image: torch.Tensor, matrix, out_h: int, out_w: int, *, fill_value=None, interp: str = "linear",
         dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """One HWC image warped by the 2x3 destination-to-source ``matrix``, as DALI's CPU WarpCPU does.

    DALI maps each output pixel's centre ``(x + 0.5, y + 0.5)`` to the source point ``M @ (x+.5, y+.5, 1)``
    (``[0, 0]`` is the first pixel's corner): in float32, the first column of a row computed directly
    and the rest reached by adding ``M[:, 0]`` (from checkpoints every 256 columns, :func:`_walk_row`;
    this float32 walk is why the points are not computed directly). "linear" samples bilinearly between
    the four pixels around ``p - 0.5``; "nn" takes the pixel under ``floor(p)``. Source pixels outside
    the image read as ``fill_value`` (converted to the input type), or without one as the nearest border
    pixel. Output: the input type (rounded half away from zero, saturated) or ``dtype``.
    """
    if image.dim() != 3:
        raise ValueError(f"warp_affine: expected an HWC image, got shape {tuple(image.shape)}")
    height, width, _ = image.shape
    m = np.asarray(matrix, dtype=_F32).reshape(2, 3)
    out_dtype = image.dtype if dtype is None else dtype
    if (_native_warp is not None and image.dtype in _NATIVE_TYPES and out_dtype in _NATIVE_TYPES and height > 0
            and width > 0 and image.shape[2] > 0 and not image.is_cuda):
        return _native(image, m, out_h, out_w, fill_value, interp, out_dtype)
    ys = np.arange(out_h, dtype=_F32) + _F32(0.5)
    # the first column's source point; the x term and the offset are added before the y term (the order
    # measured with fn.rotate to reproduce DALI's float32 coordinates)
    row_x = (m[0, 0] * _F32(0.5) + m[0, 2]) + m[0, 1] * ys
    row_y = (m[1, 0] * _F32(0.5) + m[1, 2]) + m[1, 1] * ys
    src_x = torch.from_numpy(_walk_row(row_x, m[0, 0], out_w))
    src_y = torch.from_numpy(_walk_row(row_y, m[1, 0], out_w))
    pixels = image.float()
    fill = None if fill_value is None else _fill_in(fill_value, image.dtype)

    def tap(iy: torch.Tensor, ix: torch.Tensor) -> torch.Tensor:
        values = pixels[iy.clamp(0, height - 1), ix.clamp(0, width - 1)]
        if fill is None:
            return values
        inside = (iy >= 0) & (iy < height) & (ix >= 0) & (ix < width)
        return torch.where(inside.unsqueeze(-1), values, torch.tensor(fill))

    if interp == "nn":
        return convert_sat(tap(torch.floor(src_y).long(), torch.floor(src_x).long()), out_dtype)
    fx, fy = src_x - 0.5, src_y - 0.5
    x0, y0 = torch.floor(fx), torch.floor(fy)
    qx, qy = (fx - x0).unsqueeze(-1), (fy - y0).unsqueeze(-1)
    px = 1 - qx
    x0, y0 = x0.long(), y0.long()
    top = tap(y0, x0) * px + tap(y0, x0 + 1) * qx
    bottom = tap(y0 + 1, x0) * px + tap(y0 + 1, x0 + 1) * qx
    return convert_sat(top + (bottom - top) * qy, out_dtype)


def _fill_in(fill_value, dtype: torch.dtype) -> float:
    """The fill value as the sampler reads it: converted to the input type (ConvertSat), as float32."""
    value = float(fill_value)
    return _converted_fill(value, math.copysign(1.0, value), dtype)


@functools.lru_cache(maxsize=256)
def _converted_fill(fill_value: float, sign: float, dtype: torch.dtype) -> float:
    # once per value and type (the sign in the key: -0.0 == 0.0, but a float32 image keeps the sign): a
    # pipeline's fill value is usually one constant, and the conversion holds the GIL
    return float(convert_sat(torch.tensor([fill_value]), dtype)[0])


def _native(image: torch.Tensor, m: np.ndarray, out_h: int, out_w: int, fill_value, interp: str,
            out_dtype: torch.dtype) -> torch.Tensor:
    """:func:`warp` in native code (``_native_warp.c`` warp_affine): the same float32 row walk, taps and
    ConvertSat, in one pass without the GIL instead of two dozen full-image temporaries."""
    image = image.contiguous()
    height, width, channels = image.shape
    out = torch.empty((out_h, out_w, channels), dtype=out_dtype)
    fill = 0.0 if fill_value is None else _fill_in(fill_value, image.dtype)
    _native_warp.warp_affine(image.numpy(), out.numpy(), height, width, channels, _NATIVE_TYPES[image.dtype],
                             out_h, out_w, _NATIVE_TYPES[out_dtype], np.ascontiguousarray(m, dtype=_F32),
                             interp != "nn", fill_value is not None, fill)
    return out


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
