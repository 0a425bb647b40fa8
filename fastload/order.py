"""Which samples this rank reads in an epoch, and in what order.

The rules are torch.utils.data.DistributedSampler's, to the letter, so a
fastload source and a DistributedSampler over the same dataset give every
rank the same indices: permute with a generator seeded by ``seed + epoch``;
pad by repeating the head (or drop the tail) to a multiple of the world size;
take ``indices[rank:total:world]``.
"""

from __future__ import annotations

import math
import os

import torch


def dist_info(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """(rank, world_size): explicit arguments, else torch.distributed, else torchrun's env, else (0, 1)."""
    if rank is None or world_size is None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            found = torch.distributed.get_rank(), torch.distributed.get_world_size()
        elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            found = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        else:
            found = 0, 1
        rank = found[0] if rank is None else rank
        world_size = found[1] if world_size is None else world_size
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"invalid rank {rank} for world_size {world_size}; "
                         f"rank must be in [0, {world_size - 1}]")
    return rank, world_size


def num_shard_samples(dataset_size: int, world_size: int, drop_last: bool, rank: int = 0,
                      even_shards: bool = True) -> int:
    """How many samples rank ``rank`` gets (DistributedSampler.num_samples when ``even_shards``).

    With ``even_shards=False`` nothing is padded or dropped: the first
    ``dataset_size % world_size`` ranks get one sample more.
    """
    if not even_shards:
        return dataset_size // world_size + (rank < dataset_size % world_size)
    if drop_last and dataset_size % world_size != 0:
        return math.ceil((dataset_size - world_size) / world_size)
    return math.ceil(dataset_size / world_size)


def shard_indices(dataset_size: int, *, rank: int, world_size: int, shuffle: bool,
                  seed: int, epoch: int, drop_last: bool, even_shards: bool = True) -> list[int]:
    """This rank's dataset indices for ``epoch``, exactly as DistributedSampler yields them.

    ``even_shards=False`` (evaluation): the same permutation, neither padded
    nor cut, so every sample is read by exactly one rank and shard sizes
    differ by at most one.
    """
    if shuffle:
        generator = torch.Generator()
        generator.manual_seed(seed + epoch)
        indices = torch.randperm(dataset_size, generator=generator).tolist()
    else:
        indices = list(range(dataset_size))
    if not even_shards:
        return indices[rank::world_size]
    total = num_shard_samples(dataset_size, world_size, drop_last) * world_size
    if not drop_last:
        padding = total - len(indices)
        if padding <= len(indices):
            indices += indices[:padding]
        else:
            indices += (indices * math.ceil(padding / len(indices)))[:padding]
    else:
        indices = indices[:total]
    return indices[rank:total:world_size]


def split_for_workers(indices: list[int]) -> list[int]:
    """Inside a stock torch DataLoader with workers, the part of ``indices`` this worker yields."""
    info = torch.utils.data.get_worker_info()
    if info is None:
        return indices
    return indices[info.id::info.num_workers]
