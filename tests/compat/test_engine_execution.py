"""fastload.compat.engine.execution's BatchBuffers: a batch's outputs gathered by the threads that ran its
samples, in any order, dense exactly when every sample is a CPU tensor of one shape and type."""

from __future__ import annotations

import random
import threading

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fastload.compat.engine.execution import BatchBuffers

SHAPES = st.sampled_from([(2, 3), (3, 2), (2, 3, 1), ()])
DTYPES = st.sampled_from([torch.uint8, torch.float32, torch.int64])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.data())
def test_samples_placed_from_threads_in_any_order_give_the_batch_only_when_they_agree(size, data):
    values = []
    for _ in range(size):
        shape, dtype = data.draw(SHAPES), data.draw(DTYPES)
        values.append(torch.randint(0, 100, shape).to(dtype) if data.draw(st.booleans()) or not values
                      else values[0].clone())
    extra = data.draw(st.sampled_from(["tensor", "list", "pending"]))
    gathered = BatchBuffers(size, 2)
    placed = [None] * size

    def place(slot):
        second = [slot] if extra == "list" else torch.tensor(slot)
        placed[slot] = gathered.place(slot, "waiting" if extra == "pending" else (values[slot], second))
    slots = list(range(size))
    random.Random(data.draw(st.integers(0, 99))).shuffle(slots)
    threads = [threading.Thread(target=place, args=(slot,)) for slot in slots]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if extra == "pending":
        assert placed == ["waiting"] * size and gathered.dense(0) is None
        return
    agree = all(v.shape == values[0].shape and v.dtype == values[0].dtype for v in values)
    batch = gathered.dense(0)
    assert (batch is not None) == agree
    for slot in range(size):
        assert torch.equal(placed[slot][0], values[slot]) and placed[slot][0].dtype == values[slot].dtype
        if agree:
            assert placed[slot][0].data_ptr() == batch[slot].data_ptr()
    if agree:
        assert torch.equal(batch, torch.stack(values))
    assert (gathered.dense(1) is not None) == (extra == "tensor")
