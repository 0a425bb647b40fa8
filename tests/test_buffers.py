"""A buffer pool reuses a batch's memory only once nobody holds a tensor on it (and, on a GPU, the stream that
read it has passed it: tests/gpu)."""

import gc

import torch

from fastload.buffers import BufferPool, LazyTake


def test_buffer_is_reused_only_after_every_view_is_dropped():
    pool = BufferPool(2, (4, 3, 5, 5), torch.float32)
    first = pool.take(4)[0]
    pointer = first.data_ptr()
    view = first[1:3].permute(0, 2, 3, 1)  # the training loop keeps a view
    del first
    second = pool.take(4)[0]
    assert second.data_ptr() != pointer  # still viewed: not handed out again
    del view
    gc.collect()
    third = pool.take(4)[0]
    assert third.data_ptr() == pointer and third.shape == (4, 3, 5, 5)


def test_numpy_views_and_short_batches_keep_the_buffer_busy():
    pool = BufferPool(1, (4, 2, 3), torch.float16)
    short = pool.take(3)[0]
    assert short.shape == (3, 2, 3) and short.dtype == torch.float16
    as_numpy = short.numpy()
    pointer = short.data_ptr()
    del short
    busy = pool.take(4)[0]
    assert busy.data_ptr() != pointer  # the pool is full: a fresh tensor
    del as_numpy, busy
    assert pool.take(4)[0].data_ptr() == pointer


def test_bfloat16_buffers_work():
    pool = BufferPool(1, (2, 3, 4, 4), torch.bfloat16)
    out = pool.take(2)[0]
    out.fill_(1.5)
    assert out.dtype == torch.bfloat16 and out.sum().item() == 1.5 * 96


def test_held_batches_are_never_overwritten():
    """A training loop that keeps every batch (a list) sees each batch's own values."""
    pool = BufferPool(2, (2, 1, 1, 1), torch.float32)
    kept = []
    for value in range(6):
        batch = pool.take(2)[0]
        batch.fill_(value)
        kept.append(batch)
    assert [batch[0].item() for batch in kept] == list(range(6))


def test_a_lazy_take_holds_the_buffer_from_its_first_sample_until_dropped():
    pool = BufferPool(1, (2, 3), torch.uint8)
    rows = LazyTake(pool.take, 2)
    assert pool.nbytes == 0  # nothing taken while the job is only queued
    held = rows.get().data_ptr()
    assert rows.get().data_ptr() == held  # one buffer for the whole batch
    assert pool.take(2)[1] is None and pool.overflow == 1  # in use: a fresh tensor instead
    rows.drop()
    gc.collect()
    assert pool.take(2)[1] == 0  # free again
