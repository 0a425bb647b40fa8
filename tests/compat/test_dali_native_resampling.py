"""fastload.compat.dali's resampler pass in native code (``_native.c``) against its torch version, bit for
bit, on random images, filters and clamp ranges of awkward sizes; the DALI comparisons of fn.resize
(tests/compat/test_dali_pipeline.py and the others) run through the native pass where it is built."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastload.compat.dali import resampling

pytestmark = pytest.mark.skipif(resampling._native is None, reason="fastload.compat.dali._native not built")


@st.composite
def passes(draw):
    height, width = draw(st.integers(1, 23)), draw(st.integers(1, 23))
    channels, axis = draw(st.sampled_from([1, 3, 4])), draw(st.sampled_from([0, 1]))
    extent = height if axis == 0 else width
    out_size, support = draw(st.integers(0, 19)), draw(st.integers(1, 7))
    lo = draw(st.integers(0, extent - 1))
    hi = draw(st.integers(lo, extent - 1))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return height, width, channels, axis, out_size, support, lo, hi, seed


@settings(max_examples=150, deadline=None)
@given(passes())
def test_the_native_pass_equals_the_torch_pass(case):
    height, width, channels, axis, out_size, support, lo, hi, seed = case
    rng = np.random.default_rng(seed)
    image = torch.from_numpy(rng.uniform(-300, 300, (height, width, channels)).astype(np.float32))
    first = rng.integers(-5, max(height, width) + 5, out_size).astype(np.int64)
    weights = rng.normal(0, 1, (out_size, support)).astype(np.float32)
    native = resampling._native_pass(image, axis, first, weights, lo, hi)
    saved, resampling._native = resampling._native, None
    try:
        expected = resampling._resample_axis(image, axis, first, weights, lo, hi)
    finally:
        resampling._native = saved
    assert native.shape == expected.shape and torch.equal(native, expected)


def test_bad_buffers_are_refused_not_read_past():
    image = torch.zeros((4, 5, 3))
    with pytest.raises(ValueError, match="clamp range"):
        resampling._native_pass(image, 0, np.zeros(2, np.int64), np.ones((2, 1), np.float32), 0, 4)
    out = np.empty((2, 5, 3), np.float32)
    with pytest.raises(ValueError, match="size does not match"):
        resampling._native.resample(image.numpy(), out, 4, 5, 3, 0, np.zeros(3, np.int64),
                                    np.ones((2, 1), np.float32), 2, 1, 0, 3)
