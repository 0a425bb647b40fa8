"""The order's invariants over random sizes, world sizes, batch sizes, seeds and epochs (Hypothesis):
DistributedSampler's shards exactly; uneven shards partition the epoch; a resumed epoch at another world
size delivers the undelivered rest, nothing twice, every rank the same number of batches."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data.distributed import DistributedSampler

from fastload.order import ResumedOrder, ShardOrder

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)
SIZES = st.integers(1, 97)
WORLDS = st.integers(1, 9)


def _order(size, rank, world, *, shuffle=True, seed=0, drop_last=False, even=True, batch=3, drop_batch=False):
    return ShardOrder(size, rank=rank, world_size=world, shuffle=shuffle, seed=seed, drop_last=drop_last,
                      even_shards=even, batch_size=batch, drop_last_batch=drop_batch)


@SETTINGS
@given(size=SIZES, world=WORLDS, shuffle=st.booleans(), drop_last=st.booleans(), seed=st.integers(0, 2**31),
       epoch=st.integers(0, 1000))
def test_each_rank_gets_distributed_samplers_shard(size, world, shuffle, drop_last, seed, epoch):
    if drop_last and size < world:
        return  # DistributedSampler gives every rank nothing here; so does the order (tested elsewhere)
    for rank in range(world):
        sampler = DistributedSampler(range(size), num_replicas=world, rank=rank, shuffle=shuffle, seed=seed,
                                     drop_last=drop_last)
        sampler.set_epoch(epoch)
        order = _order(size, rank, world, shuffle=shuffle, seed=seed, drop_last=drop_last)
        assert order.indices(epoch) == list(sampler)
        assert order.num_samples() == len(sampler)


@SETTINGS
@given(size=SIZES, world=WORLDS, shuffle=st.booleans(), seed=st.integers(0, 2**31), epoch=st.integers(0, 50))
def test_uneven_shards_read_every_sample_once(size, world, shuffle, seed, epoch):
    shares = [_order(size, r, world, shuffle=shuffle, seed=seed, even=False).indices(epoch) for r in range(world)]
    got = [i for share in shares for i in share]
    assert sorted(got) == list(range(size))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


@SETTINGS
@given(size=SIZES, before=WORLDS, after=WORLDS, batches=st.integers(0, 12), batch=st.integers(1, 5),
       drop_last=st.booleans(), seed=st.integers(0, 2**31), epoch=st.integers(0, 50))
def test_a_resumed_epoch_delivers_the_rest_once_at_any_world_size(size, before, after, batches, batch, drop_last,
                                                                  seed, epoch):
    orders = [_order(size, r, before, seed=seed, drop_last=drop_last, batch=batch) for r in range(before)]
    batches = min(batches, len(orders[0]))  # a state never holds more than the epoch's batches
    epoch_samples = {i for order in orders for i in order.indices(epoch)}
    delivered = {i for order in orders for i in order.indices(epoch)[:batches * batch]}
    rest = [ResumedOrder(_order(size, r, after, seed=seed, drop_last=drop_last, batch=batch), epoch,
                         [[before, batches]]).indices(epoch) for r in range(after)]
    assert len({len(share) for share in rest}) == 1  # every rank steps the same number of times
    got = [i for share in rest for i in share]
    undelivered = epoch_samples - delivered
    assert not set(got) & delivered
    if drop_last:
        assert len(set(got)) == len(got) and len(undelivered) - len(got) < after
    else:
        assert set(got) == undelivered and len(got) - len(undelivered) < after


def test_the_permutation_is_torchs():
    """What the shuffled order draws from: torch.randperm seeded seed + epoch, as DistributedSampler."""
    order = _order(10, 0, 1, seed=5)
    generator = torch.Generator().manual_seed(5 + 3)
    assert order.indices(3) == torch.randperm(10, generator=generator).tolist()
