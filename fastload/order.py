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
from typing import Callable, Iterator

import torch

from .rng import SampleRandom


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
    return strided_share(epoch_permutation(dataset_size, shuffle, seed, epoch), rank=rank, world_size=world_size,
                         drop_last=drop_last, even_shards=even_shards)


def epoch_permutation(dataset_size: int, shuffle: bool, seed: int, epoch: int) -> list[int]:
    """DistributedSampler's order of the whole dataset for ``epoch``: ``randperm`` seeded ``seed + epoch``."""
    if not shuffle:
        return list(range(dataset_size))
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    return torch.randperm(dataset_size, generator=generator).tolist()


def strided_share(sequence: list[int], *, rank: int, world_size: int, drop_last: bool,
                  even_shards: bool = True) -> list[int]:
    """Rank ``rank``'s part of ``sequence`` by DistributedSampler's rule: padded by repeating its head (or
    cut) to a multiple of the world size, then every ``world_size``-th from ``rank``."""
    if not even_shards:
        return sequence[rank::world_size]
    total = num_shard_samples(len(sequence), world_size, drop_last) * world_size
    return padded(sequence, total)[rank:total:world_size]


def padded(sequence: list[int], total: int) -> list[int]:
    """``sequence`` cut, or padded by repeating it from its head, to ``total`` items."""
    if total <= len(sequence) or not sequence:
        return sequence[:total]
    return (sequence * -(-total // len(sequence)))[:total]


def split_for_workers(indices: list[int]) -> list[int]:
    """Inside a stock torch DataLoader with workers, the part of ``indices`` this worker yields."""
    info = torch.utils.data.get_worker_info()
    if info is None:
        return indices
    return indices[info.id::info.num_workers]


class Order:
    """One rank's epochs: batches of (position in the epoch's order, dataset index), and the sample that
    stands in for one that failed (``on_error="skip"``).

    The paths only ask an order these three things, so a new sharding rule
    (DALI's and rocAL's contiguous blocks, say) is a new subclass that a
    source returns from ``make_order``: nothing in the loader changes.
    """

    def __len__(self) -> int:
        """Batches per epoch."""
        raise NotImplementedError

    def batches(self, epoch: int) -> Iterator[list[tuple[int, int]]]:
        """This epoch's batches; also makes ``epoch`` the one ``replacement`` answers for."""
        raise NotImplementedError

    def replacement(self, position: int, index: int, attempt: int) -> int:
        """The dataset index tried, on its ``attempt``-th try (1, 2, ...), in place of sample ``index`` at
        ``position`` of the current epoch."""
        raise NotImplementedError

    def attempts(self) -> int:
        """How many samples a failed one may be replaced by, itself included: each of the epoch's once."""
        raise NotImplementedError

    _repeats: dict[int, tuple[int, int]] = {}  # position -> (index, earlier places); set by ``count_repeats``

    def count_repeats(self, batches: Iterator[list[tuple[int, int]]]) -> Iterator[list[tuple[int, int]]]:
        """``batches`` (this epoch's, from the start, resumed ones skipped later) as they come, noting the
        samples that came earlier in them, for ``repeat``. Only repeats are kept; a byte per dataset index
        (up to the largest seen) counts the places seen, small beside the source's own lists per sample."""
        seen, more = bytearray(), {}  # more: the counts past 254 (one index drawn that often)
        self._repeats = repeats = {}
        for batch in batches:
            for position, index in batch:
                if index >= len(seen):
                    seen.extend(bytes(max(index + 1 - len(seen), len(seen))))
                earlier = seen[index]
                if earlier == 255:
                    earlier = more.get(index, 255)
                    more[index] = earlier + 1
                else:
                    seen[index] = earlier + 1
                if earlier:
                    repeats[position] = (index, earlier)
            yield batch

    def repeat(self, position: int, index: int) -> int:
        """How often sample ``index`` at ``position`` came earlier in this rank's epoch (0: the first time):
        the ``repeat`` its augmentation draws with (``fastload.rng.SampleRandom``), so that each copy is
        augmented anew, as under torch."""
        found = self._repeats.get(position)
        return found[1] if found is not None and found[0] == index else 0


class IndexOrder(Order):
    """An order given by a list of dataset indices per epoch, cut into batches; a failed sample is replaced
    by the next ones in that list (wrapping around)."""

    def __init__(self, batch_size: int, drop_last: bool):
        self.batch_size, self.drop_last = batch_size, drop_last
        self._current: list[int] = []

    def indices(self, epoch: int) -> list[int]:
        """This rank's dataset indices for ``epoch``, in order."""
        raise NotImplementedError

    def num_samples(self) -> int:
        """How many indices ``indices`` returns (every epoch)."""
        raise NotImplementedError

    def __len__(self) -> int:
        samples = self.num_samples()
        return samples // self.batch_size if self.drop_last else -(-samples // self.batch_size)

    def batches(self, epoch: int) -> Iterator[list[tuple[int, int]]]:
        self._current = order = self.indices(epoch)
        for start in range(0, len(order), self.batch_size):
            batch = list(enumerate(order[start:start + self.batch_size], start))
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def replacement(self, position: int, index: int, attempt: int) -> int:
        return self._current[(position + attempt) % len(self._current)]

    def attempts(self) -> int:
        return len(self._current)


class ElasticOrder(IndexOrder):
    """An order whose epoch is one ``sequence`` of samples that ``share`` splits among the ranks: what lets
    an epoch saved at one world size resume at another (``ResumedOrder``)."""

    rank: int
    world_size: int

    def sequence(self, epoch: int) -> list[int]:
        """The epoch's samples over all ranks, each once, in the order ``share`` splits them."""
        raise NotImplementedError

    def share(self, sequence: list[int], rank: int, world_size: int, epoch: int) -> list[int]:
        """Rank ``rank``'s samples of ``sequence`` among ``world_size`` ranks, in its reading order."""
        raise NotImplementedError

    def indices(self, epoch: int) -> list[int]:
        return self.share(self.sequence(epoch), self.rank, self.world_size, epoch)


class ShardOrder(ElasticOrder):
    """A fastload source's order: DistributedSampler's rules (``shard_indices``)."""

    def __init__(self, dataset_size: int, *, rank: int, world_size: int, shuffle: bool, seed: int,
                 drop_last: bool, even_shards: bool, batch_size: int, drop_last_batch: bool):
        super().__init__(batch_size, drop_last_batch)
        self.dataset_size, self.rank, self.world_size = dataset_size, rank, world_size
        self.shuffle, self.seed, self.drop_last_samples, self.even_shards = shuffle, seed, drop_last, even_shards

    def sequence(self, epoch: int) -> list[int]:
        return epoch_permutation(self.dataset_size, self.shuffle, self.seed, epoch)

    def share(self, sequence: list[int], rank: int, world_size: int, epoch: int) -> list[int]:
        return strided_share(sequence, rank=rank, world_size=world_size, drop_last=self.drop_last_samples,
                             even_shards=self.even_shards)

    def num_samples(self) -> int:
        return num_shard_samples(self.dataset_size, self.world_size, self.drop_last_samples, self.rank,
                                 self.even_shards)


class StreamOrder(ElasticOrder):
    """Shards read whole, one after the other (``TarShards(mode="streaming")``): each rank reads a
    contiguous run of the epoch's shards, so it fetches each shard once, and a shuffle buffer mixes
    neighbouring shards' samples -- webdataset's and mosaicml-streaming's scheme, but a pure function of
    (seed, epoch), so it shards, resumes and resumes elastically like any fastload order.

    The epoch's sequence is the shards in a permutation seeded ``seed + epoch``, each shard's samples in a
    permutation of their own. Rank r's share is the r-th of ``world_size`` equal blocks of it, padded by
    repeating the sequence's head (or cut, ``drop_last``) as DistributedSampler pads, so every rank
    delivers the same number of batches; a rank's block spans about ``1/world_size`` of the shards, and
    two ranks share at most the shard at their border. Within the block, each sample is drawn at random
    from a buffer of the next ``shuffle_buffer`` samples. As its batches are drawn, the order asks
    ``prefetch`` for the shards the next ``read_ahead`` shards of its block need.

    Args:
        shard_of: per dataset index, the number of its shard (samples are numbered shard by shard).
    """

    def __init__(self, shard_of: list[int], *, rank: int, world_size: int, shuffle: bool, seed: int,
                 drop_last: bool, even_shards: bool, batch_size: int, drop_last_batch: bool,
                 shuffle_buffer: int = 1000, read_ahead: int = 2,
                 prefetch: Callable[[list[int]], None] | None = None):
        super().__init__(batch_size, drop_last_batch)
        self.shard_of, self.rank, self.world_size = shard_of, rank, world_size
        self.shuffle, self.seed, self.drop_last_samples, self.even_shards = shuffle, seed, drop_last, even_shards
        self.shuffle_buffer, self.read_ahead, self.prefetch = shuffle_buffer, read_ahead, prefetch
        self.members: list[list[int]] = [[] for _ in range(max(shard_of, default=-1) + 1)]
        for index, shard in enumerate(shard_of):
            self.members[shard].append(index)

    def sequence(self, epoch: int) -> list[int]:
        shards = epoch_permutation(len(self.members), self.shuffle, self.seed, epoch)
        sequence = []
        for shard in shards:
            members = self.members[shard]
            if self.shuffle:
                generator = torch.Generator().manual_seed((self.seed + epoch) * 1_000_003 + shard)
                members = [members[i] for i in torch.randperm(len(members), generator=generator).tolist()]
            sequence += members
        return sequence

    def share(self, sequence: list[int], rank: int, world_size: int, epoch: int) -> list[int]:
        if self.even_shards:
            size = num_shard_samples(len(sequence), world_size, self.drop_last_samples)
            block = padded(sequence, size * world_size)[rank * size:(rank + 1) * size]
        else:  # the first len % world_size ranks read one more, as with DistributedSampler's rule
            size, extra = divmod(len(sequence), world_size)
            start = rank * size + min(rank, extra)
            block = sequence[start:start + size + (rank < extra)]
        if not self.shuffle:
            return block
        random = SampleRandom(self.seed, epoch, rank)
        return buffer_shuffled(block, self.shuffle_buffer, lambda n: random.randint(0, n))

    def num_samples(self) -> int:
        return num_shard_samples(len(self.shard_of), self.world_size, self.drop_last_samples, self.rank,
                                 self.even_shards)

    def batches(self, epoch: int) -> Iterator[list[tuple[int, int]]]:
        return self.ahead(super().batches(epoch), lambda: self._current)

    def ahead(self, batches: Iterator[list[tuple[int, int]]], current: Callable[[], list[int]]):
        """``batches`` (of the order ``current()``), asking ``prefetch`` for the shards ahead as each is drawn."""
        ahead: list[int] = []  # this rank's shards, by first use
        reached: list[int] = []  # per position, how many of ``ahead`` it has reached
        for batch in batches:
            if self.prefetch is not None:
                if not ahead:
                    seen: set[int] = set()
                    for index in current():
                        if self.shard_of[index] not in seen:
                            seen.add(self.shard_of[index])
                            ahead.append(self.shard_of[index])
                        reached.append(len(ahead))
                last = reached[batch[-1][0]]
                self.prefetch(ahead[last - 1:last + self.read_ahead])
            yield batch


def buffer_shuffled(items: list[int], size: int, draw: Callable[[int], int]) -> list[int]:
    """``items`` through a shuffle buffer of ``size`` (webdataset's ``shuffle``): each output is drawn at
    random (``draw(n)``, in [0, n)) from the buffer, and replaced by the next item."""
    if size <= 1:
        return list(items)
    buffer, out = list(items[:size]), []
    for item in items[size:]:
        slot = draw(len(buffer))
        out.append(buffer[slot])
        buffer[slot] = item
    while buffer:  # the rest, in random order
        out.append(buffer.pop(draw(len(buffer))))
    return out


class ResumedOrder(IndexOrder):
    """The rest of an epoch that was saved at other world sizes (elastic resume).

    ``segments`` lists, in order, each world size the epoch ran at and the
    batches every rank delivered there. With DistributedSampler's strided
    rule the samples delivered are a prefix of the epoch's sequence; in
    general they are each rank's first ``batches * batch_size``, recomputed
    from the order, so nothing needs to be saved but the counts. What is
    left -- the epoch's samples (those the world size of the time did not
    drop) not yet delivered, in the epoch's order -- is shared among this
    world's ranks by the order's own rule, so every rank again gets the same
    number (padding or dropping as the order says), and each sample keeps
    its augmentation, which depends on (seed, epoch, index) alone.
    """

    def __init__(self, order: ElasticOrder, epoch: int, segments: list[list[int]]):
        super().__init__(order.batch_size, order.drop_last)
        self.order, self.segments = order, segments
        self.rank, self.world_size = order.rank, order.world_size
        self._indices = order.share(self.rest(epoch), self.rank, self.world_size, epoch)

    def rest(self, epoch: int) -> list[int]:
        """The epoch's samples not yet delivered, in the epoch's order."""
        sequence = self.order.sequence(epoch)
        for world_size, batches in self.segments:
            shares = [self.order.share(sequence, rank, world_size, epoch) for rank in range(world_size)]
            read = {index for share in shares for index in share}
            delivered = {index for share in shares for index in share[:batches * self.batch_size]}
            sequence = [index for index in sequence if index in read and index not in delivered]
        return sequence

    def indices(self, epoch: int) -> list[int]:
        return self._indices

    def num_samples(self) -> int:
        return len(self._indices)

    def batches(self, epoch: int) -> Iterator[list[tuple[int, int]]]:
        batches = super().batches(epoch)
        ahead = getattr(self.order, "ahead", None)  # a StreamOrder's read-ahead goes on
        return ahead(batches, lambda: self._current) if ahead is not None else batches


def resume_at_world_size(order: Order, epoch: int, batches: int, saved_world_size: int | None,
                         segments: list[list[int]]) -> tuple[Order, int, list[list[int]]]:
    """(order, batches to skip, segments) for resuming ``epoch`` after ``batches``, saved at
    ``saved_world_size`` and earlier ``segments``: at the same world size the order is replayed and the
    delivered batches skipped; at another, the rest of the epoch is shared anew (``ResumedOrder``)."""
    world_size = getattr(order, "world_size", None)
    if saved_world_size is not None and world_size is not None and saved_world_size != world_size:
        if not isinstance(order, ElasticOrder):
            raise ValueError(f"this state was saved at world size {saved_world_size} and this loader runs at "
                             f"{world_size}: resuming at another world size needs a fastload source "
                             f"({type(order).__name__} cannot share the rest of an epoch anew)")
        segments, batches = [*segments, [saved_world_size, batches]], 0
    if segments:
        order = ResumedOrder(order, epoch, segments)
    return order, batches, segments


class SamplerOrder(Order):
    """A torch sampler's (or batch sampler's) order, as torch's DataLoader draws it; a failed sample is
    replaced by the next dataset index (wrapping around)."""

    def __init__(self, index_sampler, dataset_size: int, auto_collation: bool):
        self.index_sampler, self.dataset_size, self.auto_collation = index_sampler, dataset_size, auto_collation
        sampler = getattr(index_sampler, "sampler", index_sampler)
        # a DistributedSampler's world size, so that a state is not resumed at another one
        self.world_size = getattr(sampler, "num_replicas", None)

    def __len__(self) -> int:
        return len(self.index_sampler)

    def batches(self, epoch: int) -> Iterator[list[tuple[int, int]]]:
        """The sampler's batches; the sampler iterator is made now, as torch's iterator makes it (the RNG
        it draws from is the caller's concern: ``Schedule.start``)."""
        return _positioned(iter(self.index_sampler), self.auto_collation)

    def replacement(self, position: int, index: int, attempt: int) -> int:
        return (index + attempt) % self.dataset_size

    def attempts(self) -> int:
        return self.dataset_size


def _positioned(batches: Iterator, auto_collation: bool) -> Iterator[list[tuple[int, int]]]:
    position = 0
    for batch in batches:
        batch = batch if auto_collation else [batch]
        yield [(position + i, index) for i, index in enumerate(batch)]
        position += len(batch)
