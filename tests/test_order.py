import os

import pytest
from torch.utils.data.distributed import DistributedSampler

from fastload.order import IndexOrder, dist_info, num_shard_samples, shard_indices


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
