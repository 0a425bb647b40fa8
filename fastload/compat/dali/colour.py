"""DALI's colour operators on one RGB image: ``fn.color_twist``, ``fn.hsv``, ``fn.brightness_contrast``,
and the RGB -> GRAY / YCbCr conversions its decoder and ``fn.color_space_conversion`` use.

DALI applies these as 3x3 float32 matrices (YIQ for hue and saturation) built by its own float32
matrix product and Gauss-Jordan inverse; the same matrices are built here, element by element in
DALI's order, so outputs match its CPU operators bit for bit (tests/compat/test_dali_imageops.py).
Where the extension is built, the maps of uint8 and float32 images run in native code (``_native_effects.c``),
the torch version their fallback and their tests' reference (tests/compat/test_dali_native_effects.py).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional

import numpy as np
import torch

from ..float32 import F32 as _F32
from ..float32 import nearest_f32 as _f32_exact
from ..engine.conversions import convert_sat

try:  # the colour maps in native code where the extension was built (fastload.compat.dali._native_effects)
    from . import _native_effects as _native
except ImportError:  # pragma: no cover - the torch versions below are the fallback (and the tests' reference)
    _native = None

_NATIVE_TYPES = {torch.uint8: "B", torch.float32: "f"}


def _native_ready(image: torch.Tensor, out_dtype: torch.dtype) -> bool:
    return (_native is not None and image.dtype in _NATIVE_TYPES and out_dtype in _NATIVE_TYPES
            and not image.is_cuda)


def _weighted(rgb: torch.Tensor, weights, bias: float) -> torch.Tensor:
    """sum_c weights[c] * rgb[..., c] + bias in float32, in channel order (DALI's dot)."""
    values = rgb.float()
    acc = values[..., 0] * float(_F32(weights[0]))
    acc = acc + values[..., 1] * float(_F32(weights[1]))
    acc = acc + values[..., 2] * float(_F32(weights[2]))
    return acc + bias


def _rgb_to_gray(rgb: torch.Tensor) -> torch.Tensor:
    return convert_sat(_weighted(rgb, (0.299, 0.587, 0.114), 0.0), torch.uint8)


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
    return convert_sat(torch.stack(out, -1), torch.uint8)


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
    out_dtype = image.dtype if dtype is None else dtype
    if _native_ready(image, out_dtype):  # the same float32 steps in one pass (_native_effects.c)
        src = image.contiguous()
        result = torch.empty(src.shape, dtype=out_dtype)
        _native.linear_color(src.numpy(), result.numpy(), src.numel() // 3, _NATIVE_TYPES[src.dtype],
                             _NATIVE_TYPES[out_dtype], np.ascontiguousarray(matrix, dtype=_F32),
                             float(_F32(offset)))
        return result
    v = image.float()
    out = []
    for k in range(3):
        acc = v[..., 0] * float(matrix[k][0])
        acc = acc + v[..., 1] * float(matrix[k][1])
        acc = acc + v[..., 2] * float(matrix[k][2])
        out.append(acc + float(offset))
    return convert_sat(torch.stack(out, -1), image.dtype if dtype is None else dtype)


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
    if _native_ready(image, out_dtype):  # the same float32 steps in one pass (_native_effects.c)
        src = image.contiguous()
        result = torch.empty(src.shape, dtype=out_dtype)
        _native.scale_shift(src.numpy(), result.numpy(), src.numel(), _NATIVE_TYPES[src.dtype],
                            _NATIVE_TYPES[out_dtype], float(multiplier), float(addend))
        return result
    return convert_sat(image.float() * float(multiplier) + float(addend), out_dtype)
