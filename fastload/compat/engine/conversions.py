"""DALI's saturating type conversion (``ConvertSat``, ``fn.cast``) and its arithmetic type promotion.

Every DALI operator that writes an integer image ends in the same conversion: round to nearest,
halves away from zero, then clamp to the type's range (float16 rounds halves away too). The other
per-sample modules (colour, crops, resampling, warping, and geometry/effects) end in
:func:`convert_sat`, so it lives on its own, below all of them. The promotion table answers the
type of ``a op b`` for DataNode arithmetic (``graph.py``), for both front ends.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..float32 import round_half_away as _round_half_away


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


def convert_sat(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
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
        out = np.asarray(np.clip(values, float(info.min), np.nextafter(top, 0) if top >= 2.0 ** 63 else top))
        out = out.astype(_NUMPY[dtype])
        out[values >= top] = info.max
        return torch.from_numpy(out)
    values = x.numpy()
    source = np.iinfo(values.dtype)
    low, high = max(info.min, source.min), min(info.max, source.max)
    clipped = np.asarray(np.clip(values, values.dtype.type(low), values.dtype.type(high)))  # (0-d: still an array)
    return torch.from_numpy(clipped.astype(_NUMPY[dtype]))


def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """fn.cast: DALI's saturating conversion (checked against real DALI for every pair of its 12
    numeric types). Float to integer rounds to nearest, halves away from zero, and clamps to the
    target's range (300.7 -> uint8 255, -2.5 -> int8 -3); integer to integer clamps (300 -> uint8
    255, -1 -> uint8 0); to float16 rounds halves away from zero and overflows to infinity; to
    bool is ``round(x) != 0``."""
    return convert_sat(x, dtype)


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


def static_cast(value: float, dtype: torch.dtype):
    """A float assigned to an element of ``dtype`` as C++ does (what DALI's kernels do with fill values):
    integers truncate toward zero and wrap (two's complement); floats keep the value."""
    if dtype.is_floating_point:
        return float(value)
    return torch.tensor(int(math.trunc(float(value))), dtype=torch.int64).to(dtype).item()
