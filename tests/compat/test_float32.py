"""fastload.compat.float32: the float32 arithmetic both front ends' emulations share, against exact rationals."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

from fastload.compat.float32 import fma, fmaf, nearest_f32, round_c, round_half_away


def _exact_fmaf(a, b, c) -> np.float32:
    return nearest_f32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def test_fmaf_rounds_once_on_random_values_of_every_magnitude():
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal(3001).astype(np.float32) for _ in range(2))
    c = (rng.standard_normal(3001) * 10.0 ** rng.integers(-9, 9, 3001)).astype(np.float32)
    got = fmaf(a, b, c)
    assert got.dtype == np.float32
    assert all(got[i] == _exact_fmaf(a[i], b[i], c[i]) for i in range(0, 3001, 3))


def test_fmaf_where_a_float64_sum_would_round_twice():
    """(1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 is a float32 tie; + 2^-60 puts the exact sum above it. A float64 sum
    drops the 2^-60 and the tie then goes to even (down); one rounding goes up."""
    a, c = np.float32(1 + 2 ** -12), np.float32(2 ** -60)
    assert (a.astype(np.float64) * a + np.float64(c)).astype(np.float32) == np.float32(1 + 2 ** -11)
    assert fmaf(a, a, c) == np.float32(1 + 2 ** -11 + 2 ** -23) == _exact_fmaf(a, a, c)


def test_double_fma_and_c_rounding():
    assert fma(0.1, 10.0, -1.0) == float(Fraction(0.1) * 10 - 1)  # 5.55e-17, where 0.1 * 10 - 1 gives 0
    assert [round_c(v) for v in (0.5, 1.5, 2.5, -0.5, -2.5, 2.4999)] == [1, 2, 3, -1, -3, 2]
    values = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 2.4999])
    assert round_half_away(values).tolist() == [1, 2, 3, -1, -3, 2]
