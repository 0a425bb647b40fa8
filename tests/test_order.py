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
