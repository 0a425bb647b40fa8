"""fastload.compat.rocal.order: rocAL's reader order (padded shards, sorted files)."""

import pytest

from fastload.compat.rocal.order import RocalOrder


def test_rocal_order_pads_and_wraps_shards_as_rocal():
    """rocAL's file source (file_source_reader.cpp, image_reader.cpp): contiguous blocks; every shard reads
    ceil(size / shards) samples, a smaller one wrapping around itself; where that is not whole batches, the
    epoch is padded with the shard's last file; DROP leaves the padded batch out."""
    order = lambda shard, **kw: RocalOrder(10, shard_id=shard, num_shards=3, batch_size=4, **kw)  # noqa: E731
    assert [order(s).indices(0) for s in range(3)] == [[0, 1, 2, 0], [3, 4, 5, 3], [6, 7, 8, 9]]
    assert order(0).padded == 0 and len(order(0)) == 1
    single = RocalOrder(10, shard_id=0, num_shards=1, batch_size=4)
    assert single.indices(0) == list(range(10)) + [9, 9] and single.padded == 2 and len(single) == 3
    assert RocalOrder(10, shard_id=0, num_shards=1, batch_size=4, drop=True).indices(0) == list(range(8))
    three = RocalOrder(10, shard_id=0, num_shards=3, batch_size=3)
    assert three.indices(0) == [0, 1, 2, 2, 2, 2] and three.padded == 2
    assert order(0, stick_to_shard=False).indices(1) == [3, 4, 5, 3]  # the next shard, next epoch


def test_rocal_order_without_padding_reads_the_shard_as_a_cycle_across_epochs():
    """rocAL's pad_last_batch=False: an epoch is the whole batches of the shard (Reader::count_items; the
    loader stops when fewer than a batch are left), and the next epoch goes on from there
    (FileSourceReader::reset keeps the read position); DROP delivers a batch fewer where the shard is no
    multiple of the batch, and its reset skips a batch more."""
    single = RocalOrder(10, shard_id=0, num_shards=1, batch_size=4, pad=False)
    assert single.indices(0) == list(range(8)) and len(single) == 2
    assert single.indices(1) == [8, 9, 0, 1, 2, 3, 4, 5] and single.padded == 2
    assert single.indices(2) == [6, 7, 8, 9, 0, 1, 2, 3]
    dropping = RocalOrder(10, shard_id=0, num_shards=1, batch_size=4, pad=False, drop=True)
    assert dropping.indices(0) == [0, 1, 2, 3] and dropping.indices(1) == [8, 9, 0, 1]
    even = RocalOrder(9, shard_id=0, num_shards=1, batch_size=3, pad=False, drop=True)  # no padding: all 3
    assert even.indices(0) == list(range(9)) and even.indices(1) == [3, 4, 5, 6, 7, 8, 0, 1, 2]
    small = RocalOrder(10, shard_id=0, num_shards=3, batch_size=2, pad=False)  # shard of 3, largest 4
    assert small.indices(0) == [0, 1, 2, 0] and small.indices(1) == [1, 2, 0, 1]
    tiny = RocalOrder(3, shard_id=0, num_shards=1, batch_size=5, pad=False)  # a batch larger than the shard
    assert tiny.indices(0) == [0, 1, 2, 0, 1] and tiny.indices(1) == [2, 0, 1, 2, 0]
    whole = RocalOrder(8, shard_id=1, num_shards=2, batch_size=2, pad=False)  # divides: as with padding
    assert whole.indices(0) == whole.indices(3) == RocalOrder(8, shard_id=1, num_shards=2, batch_size=2).indices(0)
    with pytest.raises(NotImplementedError, match="stick_to_shard=False"):
        RocalOrder(10, shard_id=0, num_shards=2, batch_size=4, pad=False, stick_to_shard=False)


def test_rocal_order_shuffles_within_the_shard():
    order = RocalOrder(20, shard_id=1, num_shards=2, batch_size=3, random_shuffle=True, seed=4)
    first, second = order.indices(0), order.indices(1)
    assert sorted(first[:10]) == list(range(10, 20)) and first[10:] == [19, 19]  # padded with the last file
    assert first != second and sorted(second[:10]) == list(range(10, 20))
    assert first == RocalOrder(20, shard_id=1, num_shards=2, batch_size=3, random_shuffle=True, seed=4).indices(0)
