import collections

import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

from fastload.order import (IndexOrder, ResumedOrder, SamplerOrder, ShardOrder, StreamOrder, buffer_shuffled,
                            dist_info, num_shard_samples, resume_at_world_size, shard_indices)


@pytest.mark.parametrize("size", [1, 2, 7, 10, 13])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_shards_equal_distributed_sampler(size, world, shuffle, drop_last):
    if drop_last and size < world:
        pytest.skip("DistributedSampler yields nothing here either")
    for epoch in (0, 3):
        union = []
        for rank in range(world):
            sampler = DistributedSampler(range(size), num_replicas=world, rank=rank, shuffle=shuffle,
                                         seed=5, drop_last=drop_last)
            sampler.set_epoch(epoch)
            ours = shard_indices(size, rank=rank, world_size=world, shuffle=shuffle, seed=5,
                                 epoch=epoch, drop_last=drop_last)
            assert ours == list(sampler)
            assert len(ours) == num_shard_samples(size, world, drop_last) == len(sampler)
            union += ours
        if not drop_last:
            assert set(union) == set(range(size))


def test_dist_info_precedence(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert dist_info() == (0, 1)
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert dist_info() == (2, 4)
    assert dist_info(rank=1) == (1, 4)
    assert dist_info(rank=0, world_size=2) == (0, 2)
    with pytest.raises(ValueError, match="rank"):
        dist_info(rank=4, world_size=4)


@pytest.mark.parametrize("size, world", [(10, 3), (11, 2), (1, 4), (24, 4)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_uneven_shards_partition_the_epoch(size, world, shuffle):
    from fastload.order import num_shard_samples, shard_indices
    shards = [shard_indices(size, rank=r, world_size=world, shuffle=shuffle, seed=1, epoch=2, drop_last=False,
                            even_shards=False) for r in range(world)]
    assert sorted(i for shard in shards for i in shard) == list(range(size))
    assert [len(s) for s in shards] == [num_shard_samples(size, world, False, r, even_shards=False)
                                        for r in range(world)]


class ContiguousBlocks(IndexOrder):
    """DALI's and rocAL's reader rule (shard i reads the block [size*i//n, size*(i+1)//n)): a second
    sharding rule, defined here, outside the package."""

    def __init__(self, size, shard, shards, batch_size, drop_last):
        super().__init__(batch_size, drop_last)
        self.start, self.end = size * shard // shards, size * (shard + 1) // shards

    def indices(self, epoch):
        return list(range(self.start, self.end))

    def num_samples(self):
        return self.end - self.start


def test_a_new_order_class_plugs_in_without_touching_the_loader(numbered_list):
    import fastload
    from fastload import transforms as T

    class BlockList(fastload.FileList):
        def make_order(self, batch_size, drop_last, **overrides):
            return ContiguousBlocks(len(self.samples), 1, 3, batch_size, drop_last)

    transform = T.Compose([T.CenterCrop(8), T.ToImage()])
    loader = fastload.DataLoader(BlockList(numbered_list, transform=transform), batch_size=3, num_workers=2)
    labels = [label for _, batch in loader for label in batch.tolist()]
    assert labels == list(range(23 // 3, 46 // 3)) and len(loader) == 3


def _dali_reader_stream(tmp_path, size, batch_size, batches, **reader):
    """The labels real DALI's fn.readers.file yields, batch after batch (label i = file i)."""
    dali = pytest.importorskip("nvidia.dali")
    files = []
    for i in range(size):
        (tmp_path / f"f{i}").write_bytes(b"%d" % i)
        files.append(str(tmp_path / f"f{i}"))

    @dali.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None)
    def pipe():
        _, labels = dali.fn.readers.file(files=files, labels=list(range(size)), name="R", **reader)
        return labels

    p = pipe()
    p.build()
    stream = []
    for _ in range(batches):
        labels, = p.run()
        stream += [int(x) for x in labels.as_array().ravel()]
    return stream, p.reader_meta("R")


@pytest.mark.parametrize("size,shards,batch_size", [(11, 3, 4), (11, 3, 3), (11, 4, 2), (7, 1, 2), (10, 5, 4)])
@pytest.mark.parametrize("stick,pad", [(False, False), (True, False), (False, True), (True, True)])
def test_reader_order_is_dalis_stream(tmp_path, size, shards, batch_size, stick, pad):
    """ReaderOrder's stream equals DALI 2.4's file reader's, for every shard (contiguous blocks, reading on
    past the block or cycling it, padding each block with its last sample to whole batches)."""
    from fastload.order import ReaderOrder
    for shard in range(shards):
        count = 7 * batch_size
        theirs, meta = _dali_reader_stream(tmp_path, size, batch_size, 7, shard_id=shard, num_shards=shards,
                                           stick_to_shard=stick, pad_last_batch=pad)
        order = ReaderOrder(size, shard_id=shard, num_shards=shards, batch_size=batch_size,
                            stick_to_shard=stick, pad_last_batch=pad)
        assert order.stream(0, count) == theirs, (shard, meta)
        # the loader's epochs follow each other along the same stream
        epochs = [i for e in range(-(-count // order.num_samples())) for i in order.indices(e)]
        assert epochs[:count] == theirs


@pytest.mark.parametrize("size,shards,batch_size,stick", [(11, 3, 4, True), (30, 2, 4, False), (8, 1, 3, True)])
def test_reader_order_random_shuffle_shuffles_the_list_first_exactly_as_dali(tmp_path, size, shards, batch_size,
                                                                             stick):
    """random_shuffle shuffles the whole file list once (std::shuffle, mt19937 seeded kDaliDataloaderSeed)
    before the shards are cut, so every shard holds a random mix; with initial_fill=1 the buffer passes the
    stream through, and the order is DALI's, sample for sample, for every shard."""
    from fastload.order import ReaderOrder
    for shard in range(shards):
        theirs, _ = _dali_reader_stream(tmp_path, size, batch_size, 6, shard_id=shard, num_shards=shards,
                                        stick_to_shard=stick, random_shuffle=True, initial_fill=1)
        order = ReaderOrder(size, shard_id=shard, num_shards=shards, batch_size=batch_size, stick_to_shard=stick,
                            random_shuffle=True, initial_fill=1, seed=5)
        assert order.stream(0, 6 * batch_size) == theirs, shard


def test_dali_shuffle_is_libstdcxx_std_shuffle():
    """Empty and one-item lists, a permutation past the pairing rule's edge (n * n over the generator's 32
    bits: one draw a swap), and 7 files as DALI 2.4.0's readers.file orders them (no DALI needed)."""
    from fastload.order import dali_shuffle
    assert dali_shuffle([], 1) == [] and dali_shuffle(["a"], 1) == ["a"]
    assert sorted(dali_shuffle(range(70000), 524287)) == list(range(70000))
    assert dali_shuffle(range(7), 524287) == [3, 0, 2, 4, 5, 1, 6]  # DALI 2.4.0's readers.file, 7 files


def test_reader_order_shuffles_as_dali_does_in_kind():
    """random_shuffle's buffer: the stream's samples, mixed through it (DALI's generator differs); one pass
    of shuffle_after_epoch over a single shard is every sample once, in another order each pass."""
    from fastload.order import ReaderOrder
    whole = ReaderOrder(11, shard_id=0, num_shards=1, batch_size=4, shuffle_after_epoch=True, seed=3)
    passes = [whole.stream(11 * k, 11) for k in range(3)]
    assert all(sorted(p) == list(range(11)) for p in passes) and passes[0] != passes[1]
    assert whole.stream(0, 11) == passes[0]  # asked again from the start: the same
    block = ReaderOrder(11, shard_id=1, num_shards=3, batch_size=4, shuffle_after_epoch=True, seed=3)
    assert all(len(set(block.stream(4 * k, 4))) == 4 for k in range(5))
    mixed = ReaderOrder(11, shard_id=0, num_shards=1, batch_size=4, random_shuffle=True, initial_fill=4, seed=3)
    stream = mixed.stream(0, 44)
    assert sorted(stream[:40]) != stream[:40]
    counts = collections.Counter(stream)  # 4 of each went in; up to 4 may still wait in the buffer
    assert set(counts) == set(range(11)) and all(0 < c <= 8 for c in counts.values())
    assert mixed.stream(0, 44) == stream  # replayed from the start: the same
    again = ReaderOrder(11, shard_id=0, num_shards=1, batch_size=4, random_shuffle=True, initial_fill=4, seed=3)
    assert [i for e in range(4) for i in again.indices(e)][:44] == stream[:44]
    with pytest.raises(ValueError, match="shuffle_after_epoch"):
        ReaderOrder(11, shard_id=0, num_shards=1, batch_size=4, shuffle_after_epoch=True, stick_to_shard=True)
    with pytest.raises(ValueError, match="shards"):
        ReaderOrder(2, shard_id=0, num_shards=3, batch_size=4)


def test_rocal_order_pads_and_wraps_shards_as_rocal():
    """rocAL's file source (file_source_reader.cpp, image_reader.cpp): contiguous blocks; every shard reads
    ceil(size / shards) samples, a smaller one wrapping around itself; where that is not whole batches, the
    epoch is padded with the shard's last file; DROP leaves the padded batch out."""
    from fastload.order import RocalOrder
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
    from fastload.order import RocalOrder
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
    from fastload.order import RocalOrder
    order = RocalOrder(20, shard_id=1, num_shards=2, batch_size=3, random_shuffle=True, seed=4)
    first, second = order.indices(0), order.indices(1)
    assert sorted(first[:10]) == list(range(10, 20)) and first[10:] == [19, 19]  # padded with the last file
    assert first != second and sorted(second[:10]) == list(range(10, 20))
    assert first == RocalOrder(20, shard_id=1, num_shards=2, batch_size=3, random_shuffle=True, seed=4).indices(0)


@pytest.mark.parametrize("size, before, after", [(23, 4, 3), (23, 2, 5), (10, 3, 4), (7, 4, 2), (5, 2, 7)])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batches", [0, 1, 2])
def test_resumed_order_shares_the_undelivered_rest_among_another_world_size(size, before, after, drop_last,
                                                                              batches):
    def order(rank, world):
        return ShardOrder(size, rank=rank, world_size=world, shuffle=True, seed=3, drop_last=drop_last,
                          even_shards=True, batch_size=2, drop_last_batch=False)
    epoch_samples = [i for rank in range(before) for i in order(rank, before).indices(5)]
    delivered = [i for rank in range(before) for i in order(rank, before).indices(5)[:2 * batches]]
    rest = [ResumedOrder(order(rank, after), 5, [[before, batches]]).indices(5) for rank in range(after)]
    assert len({len(share) for share in rest}) == 1  # every rank steps the same number of times
    undelivered = set(epoch_samples) - set(delivered)
    got = [i for share in rest for i in share]
    if drop_last:  # disjoint; only what the new world size cannot share evenly is left out
        assert len(set(got)) == len(got) and set(got) <= undelivered and len(undelivered) - len(got) < after
    else:  # all of it, padded by repeating the rest's head as DistributedSampler pads
        assert set(got) == undelivered and len(got) - len(undelivered) < after
    # saved again during the resumed epoch, at yet another world size: still nothing twice, nothing lost
    twice = [ResumedOrder(order(rank, 2), 5, [[before, batches], [after, 1]]).indices(5) for rank in range(2)]
    seen = set(delivered) | {i for share in rest for i in share[:2]}
    left = {i for share in twice for i in share}
    assert not left & seen and (drop_last or left == undelivered - seen)


def test_resuming_a_torch_sampler_at_another_world_size_is_refused():
    sampler = DistributedSampler(range(10), num_replicas=2, rank=0)
    order = SamplerOrder(torch.utils.data.BatchSampler(sampler, 2, False), 10, True)
    assert resume_at_world_size(order, 0, 1, 2, [])[1] == 1  # same world size: replay and skip
    with pytest.raises(ValueError, match="saved at world size 3.*runs at 2.*fastload source"):
        resume_at_world_size(order, 0, 1, 3, [])


def _stream(rank, world, shard_of, **rules):
    rules = {"shuffle": True, "seed": 4, "drop_last": False, "even_shards": True, "batch_size": 3,
             "drop_last_batch": False, "shuffle_buffer": 5, **rules}
    return StreamOrder(shard_of, rank=rank, world_size=world, **rules)


@pytest.mark.parametrize("world", [1, 2, 3, 5])
@pytest.mark.parametrize("drop_last", [False, True])
def test_stream_order_reads_each_rank_a_run_of_whole_shards_equal_in_length(world, drop_last):
    shard_of = [s for s, size in enumerate([7, 3, 11, 5, 9, 1, 8]) for _ in range(size)]
    shares = [_stream(rank, world, shard_of, drop_last=drop_last).indices(2) for rank in range(world)]
    assert len({len(share) for share in shares}) == 1
    assert len(shares[0]) == num_shard_samples(len(shard_of), world, drop_last)
    union = [i for share in shares for i in share]
    if drop_last:
        assert len(set(union)) == len(union)
    else:
        assert set(union) == set(range(len(shard_of))) and len(union) - len(shard_of) < world
    for share in shares:  # a run of the epoch's shards: at most 2 shards shared with the neighbours, plus padding
        touched = {shard_of[i] for i in share}
        assert len(touched) <= -(-7 // world) + 2 + (not drop_last)
    assert shares == [_stream(rank, world, shard_of, drop_last=drop_last).indices(2) for rank in range(world)]
    assert shares != [_stream(rank, world, shard_of, drop_last=drop_last).indices(3) for rank in range(world)]
    plain = [_stream(rank, world, shard_of, shuffle=False, drop_last=drop_last).indices(2) for rank in range(world)]
    assert [i for share in plain for i in share][:len(shard_of) - world] == list(range(len(shard_of) - world))


def test_stream_order_prefetches_the_shards_ahead_of_each_batch():
    shard_of = [s for s in range(6) for _ in range(4)]
    asked = []
    order = _stream(0, 1, shard_of, shuffle=False, batch_size=2, read_ahead=2, prefetch=asked.append)
    batches = list(order.batches(0))
    assert len(batches) == 12 and asked[0] == [0, 1, 2] and asked[2] == [1, 2, 3] and asked[-1] == [5]
    resumed = ResumedOrder(_stream(0, 2, shard_of, shuffle=False, batch_size=2, prefetch=asked.append), 0,
                           [[1, 3]])
    asked.clear()
    assert [i for batch in resumed.batches(0) for _, i in batch] == list(range(6, 15)) and asked[0] == [1, 2, 3]


def test_the_shuffle_buffer_draws_from_the_next_items_only():
    draws = iter([0, 1, 0, 2, 0, 0, 1, 0])
    assert buffer_shuffled(list(range(6)), 3, lambda n: next(draws) % n) == [0, 1, 3, 2, 5, 4]


class _Listed(IndexOrder):
    def __init__(self, indices: list[int], batch_size: int):
        super().__init__(batch_size, drop_last=False)
        self.listed = indices

    def indices(self, epoch: int) -> list[int]:
        return self.listed

    def num_samples(self) -> int:
        return len(self.listed)


def test_counted_batches_say_how_often_each_sample_came_before():
    """``repeat``: a sample's earlier places in the epoch, counted from its batches as they come (a sampler
    drawing with replacement, padding); 0 for a first place, and for another index put at that place (a
    replacement for a failed sample)."""
    indices = [5, 1, 5, 300, 5, 1, 0] + [7] * 300
    order = _Listed(indices, 4)
    batches = list(order.count_repeats(order.batches(0)))
    assert [pair for batch in batches for pair in batch] == list(enumerate(indices))
    expected = [collections.Counter(indices[:position])[index] for position, index in enumerate(indices)]
    assert [order.repeat(position, index) for position, index in enumerate(indices)] == expected
    assert expected[:7] == [0, 0, 1, 0, 2, 1, 0] and expected[-1] == 299  # past a byte's count too
    assert order.repeat(2, 1) == 0  # another sample in that place
    order.count_repeats(order.batches(1))  # a new epoch's generator counts nothing before it runs...
    assert order.repeat(2, 5) == 1
    next(order.count_repeats(order.batches(1)))  # ...and starts afresh when it does
    assert order.repeat(2, 5) == 1 and order.repeat(4, 5) == 0


def test_counting_follows_a_sampler_with_replacement():
    sampler = torch.utils.data.WeightedRandomSampler([1.0] * 3, 40, replacement=True,
                                                     generator=torch.Generator().manual_seed(0))
    order = SamplerOrder(torch.utils.data.BatchSampler(sampler, 8, False), 3, True)
    drawn = [pair for batch in order.count_repeats(order.batches(0)) for pair in batch]
    seen = collections.Counter()
    for position, index in drawn:
        assert order.repeat(position, index) == seen[index]
        seen[index] += 1
