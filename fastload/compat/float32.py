"""Float32 arithmetic as the C++ of DALI and RPP computes it, for both front ends' pixel-exact emulations.

Why one module: DALI's and rocAL's operators are matched bit for bit against
the libraries' CPU kernels, and those kernels' results hinge on details
numpy and torch do not share -- a multiply-add rounded once (C's ``fma``,
``fmaf``, ``_mm_fmadd_ps`` and the contractions a build makes), C's
``round`` (halves away from zero, where Python and torch round to even),
and glibc's ``sinf``/``cosf``/``expf``. Each is defined here once; the
front ends import them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
from fractions import Fraction

import numpy as np
import torch

F32 = np.float32


def fmaf(a, b, c) -> np.ndarray:
    """C's ``fmaf`` elementwise (and ``_mm_fmadd_ps``, and the multiply-adds clang contracts with -mfma): the
    float32 ``a * b + c`` rounded once. The arguments are taken as float32, as the C call converts them.

    The product of two float32 values is exact in float64; the sum is rounded to float64 by round-to-odd
    (the nearest float64, moved one ulp toward the exact sum where that is inexact and lands on an even
    mantissa), and a float64 rounded to odd then rounds to float32 exactly as the exact sum would: a plain
    float64 sum could round twice at a float32 tie."""
    a, b, c = (np.asarray(v, F32).astype(np.float64) for v in (a, b, c))
    product = a * b
    with np.errstate(invalid="ignore", over="ignore"):
        total = product + c
        part = total - product  # Knuth's two-sum: ``error`` is exactly (product + c) - total
        error = (product - (total - part)) + (c - part)
        even = (total.view(np.int64) & 1) == 0
        odd = np.nextafter(total, np.where(error > 0, np.inf, -np.inf))
        total = np.where((error != 0) & even & np.isfinite(total), odd, total)
        return total.astype(F32)


def fma(a: float, b: float, c: float) -> float:
    """C's ``fma`` on doubles: ``a * b + c`` rounded once (``math.fma`` from Python 3.13, else exactly with
    fractions)."""
    if hasattr(math, "fma"):
        return math.fma(a, b, c)
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def nearest_f32(value: Fraction) -> np.float32:
    """The float32 nearest to an exact rational, ties to even (what one rounding of an exact result gives)."""
    guess = F32(float(value))
    candidates = [np.nextafter(guess, F32(-np.inf)), guess, np.nextafter(guess, F32(np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - value), int(c.view(np.int32)) & 1))


def round_c(value) -> float:
    """C's ``round``/``roundf`` on a scalar: the nearest whole number, halves away from zero."""
    value = float(value)
    return math.copysign(math.floor(abs(value) + 0.5), value) if abs(value) < 2 ** 52 else value


def round_half_away(x: torch.Tensor) -> torch.Tensor:
    """C's ``round`` on a tensor: nearest, halves away from zero (``torch.round`` goes to even)."""
    rounded = torch.round(x)
    whole = torch.trunc(x)
    tie = (x - whole).abs() == 0.5
    return torch.where(tie, whole + torch.sign(x), rounded)


def expf(x) -> np.ndarray:
    """glibc's ``expf``, which is correctly rounded: the float64 exp rounded to float32 (numpy's float32 exp
    is off by up to 2 ulp)."""
    return np.exp(np.asarray(x, F32).astype(np.float64)).astype(F32)


@functools.lru_cache(maxsize=None)
def _libm():
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        for name in ("sinf", "cosf", "tanf", "log2f"):
            getattr(libm, name).restype, getattr(libm, name).argtypes = ctypes.c_float, [ctypes.c_float]
        return libm
    except (OSError, AttributeError):
        return None


def libm_float(name: str, x) -> np.ndarray:
    """The C library's float ``sinf``/``cosf``/``tanf``/``log2f`` (``name`` "sin", "cos", "tan" or "log2")
    elementwise, which DALI and RPP call: glibc's are not always correctly rounded (10 of the 193 Lanczos table
    entries differ by one ulp from a rounded double sin), and numpy's and torch's own float32 versions differ
    from them by machine (numpy's float32 log2 is Intel's SVML where the CPU has AVX-512, libm's elsewhere).
    Each distinct value is computed once. Falls back to the rounded double result where libm cannot be
    loaded."""
    x = np.asarray(x, dtype=F32)
    libm = _libm()
    if libm is None:
        return getattr(np, name)(x.astype(np.float64)).astype(F32)
    function = getattr(libm, name + "f")
    if x.size == 1:  # one value (an angle): the call itself, without np.unique's sort
        return np.array([function(float(x.reshape(-1)[0]))], dtype=F32).reshape(x.shape)
    values, where = np.unique(x.ravel(), return_inverse=True)
    results = np.array([function(float(v)) for v in values.tolist()], dtype=F32)
    return results[where].reshape(x.shape)
