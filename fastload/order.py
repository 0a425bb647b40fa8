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

import numpy as np
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


DALI_LOADER_SEED = 524287  # kDaliDataloaderSeed (DALI: dali/core/common.h)


def dali_shuffle(items, seed: int) -> list:
    """``items`` as std::shuffle leaves them with std::mt19937(seed), in libstdc++'s algorithm (GCC 11 and
    later, which DALI's wheels are built with): swap positions drawn in pairs from one draw of
    uniform_int_distribution while n * n fits the generator's 32 bits, one each otherwise; each draw is
    Lemire's multiply-and-reject on a 64-bit product. numpy's MT19937 with its legacy seeding is the
    same generator. Checked against DALI 2.4.0's readers.file (tests/test_order.py)."""
    generator = np.random.MT19937()
    generator._legacy_seeding(seed)

    def below(bound: int) -> int:  # uniform_int_distribution over [0, bound): Lemire's method
        product = int(generator.random_raw()) * bound
        if product & 0xFFFFFFFF < bound:
            threshold = ((1 << 32) - bound) % bound
            while product & 0xFFFFFFFF < threshold:
                product = int(generator.random_raw()) * bound
        return product >> 32

    out, n = list(items), len(items)
    if n < 2:
        return out
    if 0xFFFFFFFF // n < n:
        for i in range(1, n):
            j = below(i + 1)
            out[i], out[j] = out[j], out[i]
        return out
    i = 1
    if n % 2 == 0:  # an odd number of swaps left: the first alone
        j = below(2)
        out[1], out[j] = out[j], out[1]
        i = 2
    while i < n:  # then two positions from one draw
        bound = i + 1
        both = below(bound * (bound + 1))
        j, k = both // (bound + 1), both % (bound + 1)
        out[i], out[j] = out[j], out[i]
        out[i + 1], out[k] = out[k], out[i + 1]
        i += 2
    return out


class DaliLoaderRandom:
    """The generator DALI's loaders draw their shuffle buffer's slots from (dali/operators/reader/loader/
    loader.h): ``std::default_random_engine`` (libstdc++'s minstd_rand0) seeded through
    ``std::seed_seq({seed})``, each draw a ``std::uniform_int_distribution<int>`` over it (libstdc++'s
    divide-and-reject for a generator narrower than 32 bits). Checked against DALI 2.4.0's readers.file
    (tests/compat/test_dali_reader_shuffle.py)."""

    MODULUS = 2147483647

    def __init__(self, seed: int):
        mask, words = 0xFFFFFFFF, [0x8B8B8B8B] * 4  # seed_seq::generate for four words, one seed value
        for k in range(4):  # t = 1, p = 1, q = 2, m = 4
            arg = words[k] ^ words[(k + 1) % 4] ^ words[(k - 1) % 4]
            r1 = 1664525 * (arg ^ (arg >> 27)) & mask
            r2 = r1 + (1 if k == 0 else k + (seed & mask if k == 1 else 0)) & mask
            words[(k + 1) % 4] = words[(k + 1) % 4] + r1 & mask
            words[(k + 2) % 4] = words[(k + 2) % 4] + r2 & mask
            words[k] = r2
        for k in range(4, 8):
            arg = words[k % 4] + words[(k + 1) % 4] + words[(k - 1) % 4] & mask
            r3 = 1566083941 * (arg ^ (arg >> 27)) & mask
            r4 = r3 - k % 4 & mask
            words[(k + 1) % 4] ^= r3
            words[(k + 2) % 4] ^= r4
            words[k % 4] = r4
        self.state = words[3] % self.MODULUS or 1  # the engine takes the last of its k + 3 = 4 words

    def below(self, bound: int) -> int:
        """``uniform_int_distribution<int>(0, bound - 1)(engine)``: one draw or more, even for bound 1."""
        scaling = (self.MODULUS - 3) // bound  # the engine's range is [1, 2^31 - 2]
        while True:
            self.state = self.state * 16807 % self.MODULUS
            if self.state - 1 < bound * scaling:
                return (self.state - 1) // scaling


class ReaderOrder(IndexOrder):
    """DALI's (and rocAL's) file reader order: a stream of samples, not a per-epoch permutation.

    Shard ``shard_id`` of ``num_shards`` is the contiguous block
    ``[size * shard_id // num_shards, size * (shard_id + 1) // num_shards)``.
    The reader never rewinds: without ``stick_to_shard`` it reads on past
    its block, through the next shards and around the dataset; with it, it
    cycles its own block. ``pad_last_batch`` pads each block, by repeating
    its last sample, to the largest shard's size rounded up to whole batches,
    so every shard yields the same number of full batches. What makes an
    epoch is the iterator's business (``plugin``); here an epoch of the
    loader is one padded block's worth of batches, and epochs follow each
    other along the stream. Measured against DALI 2.4.0's ``readers.file``
    (tests/test_order.py, tests/compat/test_dali_reader_shuffle.py).

    Shuffling: ``random_shuffle`` first shuffles the whole list once, as
    DALI's file loader does with std::shuffle on mt19937 seeded
    kDaliDataloaderSeed (the same list on every shard, so each shard holds a
    random mix: ``dali_shuffle``, DALI's order exactly), then passes what it
    reads through DALI's shuffle buffer (loader.h's ``ReadOne``): a ring of
    the next ``initial_fill`` samples read, split into the reader's epochs
    (one shard's worth of reads each); every sample comes from the oldest
    epoch still in the ring, drawn uniformly among its samples there, and its
    slot takes the next sample read. So each epoch is a permutation of the
    shard it read, whatever ``initial_fill`` (a shard smaller than the ring
    shares it with the next epochs' reads, never mixes with them), and
    ``pad_last_batch`` pads with the last sample returned. The draws are
    DALI's generator (``DaliLoaderRandom``, seeded with the reader's seed),
    so the order is DALI's sample for sample when the reader's seed is
    DALI's (given explicitly).
    ``shuffle_after_epoch`` reads the block from a fresh permutation of the
    whole dataset (seeded ``seed + pass``) on every pass: DALI's in kind
    (DALI 2.4.0's passes are not the std::shuffle its 2023 sources describe,
    so not its values).
    """

    def __init__(self, dataset_size: int, *, shard_id: int, num_shards: int, batch_size: int,
                 stick_to_shard: bool = False, pad_last_batch: bool = False, random_shuffle: bool = False,
                 initial_fill: int = 1024, shuffle_after_epoch: bool = False, seed: int = 0):
        super().__init__(batch_size, drop_last=False)
        if not 0 <= shard_id < num_shards:
            raise ValueError(f"shard_id {shard_id} is not in [0, num_shards={num_shards})")
        if dataset_size < num_shards:
            raise ValueError(f"{dataset_size} samples cannot be split into {num_shards} shards")
        if shuffle_after_epoch and (stick_to_shard or random_shuffle):
            raise ValueError("shuffle_after_epoch cannot be combined with stick_to_shard or random_shuffle "
                             "(as in DALI)")
        self.size, self.shard_id, self.num_shards = dataset_size, shard_id, num_shards
        self.stick, self.pad, self.seed = stick_to_shard, pad_last_batch, seed
        self.random_shuffle, self.initial_fill = random_shuffle, max(1, initial_fill)
        self.shuffle_after_epoch = shuffle_after_epoch
        self._buffer_state: tuple | None = None  # where _shuffled stopped (see there)
        self._listed = dali_shuffle(range(dataset_size), DALI_LOADER_SEED) if random_shuffle else None
        self._permutation: tuple[int, list[int]] = (-1, [])  # (pass, permutation) of shuffle_after_epoch

    def bounds(self, shard: int) -> tuple[int, int]:
        return self.size * shard // self.num_shards, self.size * (shard + 1) // self.num_shards

    def block(self) -> int:
        """Samples the reader reads from one shard before moving on (or around): the padded block with
        ``pad_last_batch``, else the shard's size."""
        if self.pad:
            largest = -(-self.size // self.num_shards)
            return -(-largest // self.batch_size) * self.batch_size
        low, high = self.bounds(self.shard_id)
        return high - low

    def num_samples(self) -> int:
        return -(-self.block() // self.batch_size) * self.batch_size

    def indices(self, epoch: int) -> list[int]:
        count = self.num_samples()
        return self.stream(epoch * count, count)

    def stream(self, start: int, count: int) -> list[int]:
        """The dataset indices at stream positions ``start .. start + count - 1``."""
        if self.random_shuffle:
            return self._shuffled(start, count)
        return [self._at(p) for p in range(start, start + count)]

    def _at(self, p: int) -> int:
        """The (unshuffled, or permuted per pass) sample at stream position ``p``."""
        if self.shuffle_after_epoch:
            block = self.block()
            low, high = self.bounds(self.shard_id)
            if self._permutation[0] != p // block:  # one permutation per pass, made once
                generator = torch.Generator().manual_seed(self.seed + p // block)
                self._permutation = (p // block, torch.randperm(self.size, generator=generator).tolist())
            return self._permutation[1][low + min(p % block, high - low - 1)]
        index = self._position(p)
        return index if self._listed is None else self._listed[index]

    def _position(self, p: int) -> int:
        """The place in the (shuffled) list that stream position ``p`` reads."""
        if self.pad:
            block = self.block()
            shard = self.shard_id if self.stick else (self.shard_id + p // block) % self.num_shards
            low, high = self.bounds(shard)
            return low + min(p % block, high - low - 1)
        low, high = self.bounds(self.shard_id)
        if self.stick:
            return low + p % (high - low)
        return (low + p) % self.size

    def _read(self, k: int) -> int:
        """The dataset index of the ``k``-th sample the reader reads (no padding: the file loader's own
        order, on through the next shards and around, or around its own shard)."""
        low, high = self.bounds(self.shard_id)
        return self._listed[low + k % (high - low) if self.stick else (low + k) % self.size]

    def _epoch_size(self, epoch: int) -> int:
        """Samples the reader reads in its ``epoch``-th epoch: the size of the shard it reads then."""
        low, high = self.bounds(self.shard_id if self.stick else (self.shard_id + epoch) % self.num_shards)
        return high - low

    def _shuffled(self, start: int, count: int) -> list[int]:
        """Positions ``start ..`` of the stream drawn through DALI's shuffle buffer (see the class). The
        state is kept, so consecutive epochs continue it; an earlier start replays it from the beginning."""
        state = self._buffer_state
        if state is None or state[0] > start:
            state = (0, DaliLoaderRandom(self.seed), [self._read(k) for k in range(self.initial_fill)], 0, 0, 0, -1)
        position, generator, ring, draws, epoch, returned, last = state
        fill, block, size, out = len(ring), self.block(), self._epoch_size(epoch), []
        while position < start + count:
            if returned == (block if self.pad else size):  # the epoch is over: the next shard's reads
                epoch, returned = epoch + 1, 0
                size = self._epoch_size(epoch)
            if returned < size:  # the oldest epoch's samples still in the ring: one of them, at random
                chosen, slot = (draws + generator.below(min(size - returned, fill))) % fill, draws % fill
                ring[chosen], ring[slot] = ring[slot], ring[chosen]
                last, ring[slot] = ring[slot], self._read(draws + fill)  # its slot takes the next read
                draws += 1
            if position >= start:  # past the epoch's samples: pad_last_batch's copies of the last one
                out.append(last)
            position, returned = position + 1, returned + 1
        self._buffer_state = (position, generator, ring, draws, epoch, returned, last)
        return out


class RocalOrder(IndexOrder):
    """rocAL's file-source order (ROCm/rocAL: rocAL/source/readers/image/file_source_reader.cpp,
    image_reader.cpp): shard ``shard_id`` of ``num_shards`` is the contiguous block starting at
    ``size * shard_id // num_shards``, read in sorted order; every shard reads ``largest = ceil(size /
    num_shards)`` samples an epoch, a smaller one wrapping around inside itself. Where ``largest`` is not
    a multiple of the batch, the epoch is padded to whole batches with copies of the shard's last file
    (``pad_last_batch``, rocAL's decoders' default: ``update_filenames_with_padding``), so every batch is
    full; DROP leaves the padded batch out. Without ``stick_to_shard`` the next epoch reads the next shard.
    ``random_shuffle`` permutes the shard's own files each epoch, from (seed, epoch) -- rocAL's in kind (it
    calls ``std::random_shuffle`` with ``rand()``), never across shards.

    ``pad=False`` (rocAL's ``pad_last_batch=False``): nothing is padded; the shard is read as an endless
    cycle whose position carries over from epoch to epoch (FileSourceReader::reset leaves
    ``_curr_file_idx`` where it is; Reader::increment_curr_file_idx wraps inside the shard). An epoch is
    the whole batches of ``max(largest, batch)`` samples (Reader::count_items; the loaders stop when fewer
    than a batch are left: image_read_and_decode.cpp), one fewer with DROP where ``largest`` is no
    multiple of the batch; the next epoch begins where this one stopped, DROP skipping a batch's worth
    more (reset: ``increment_curr_file_idx`` batch_size times).
    """

    def __init__(self, dataset_size: int, *, shard_id: int, num_shards: int, batch_size: int,
                 stick_to_shard: bool = True, random_shuffle: bool = False, drop: bool = False, seed: int = 0,
                 pad: bool = True, reshuffle: bool = True):
        super().__init__(batch_size, drop_last=drop)
        self.reshuffle = reshuffle  # False: epoch 0's permutation every epoch (rocAL's sequence reader)
        if not pad and not stick_to_shard:
            raise NotImplementedError("rocAL's pad_last_batch=False with stick_to_shard=False (one cycle over "
                                      "the whole dataset, read by every shard in turn) is not supported")
        self.pad = pad
        if not 0 <= shard_id < num_shards:
            raise ValueError(f"shard_id {shard_id} is not in [0, num_shards={num_shards})")
        if dataset_size < num_shards:
            raise ValueError(f"{dataset_size} samples cannot be split into {num_shards} shards")
        self.size, self.shard_id, self.num_shards = dataset_size, shard_id, num_shards
        self.stick, self.shuffle, self.seed = stick_to_shard, random_shuffle, seed
        self.largest = -(-dataset_size // num_shards)

    @property
    def padded(self) -> int:
        """Copies of the last file that fill the last batch (rocAL's ``getLastBatchPaddedSize``)."""
        rest = self.largest % self.batch_size
        return self.batch_size - rest if self.batch_size > 1 and rest else 0

    def _cycle(self) -> int:
        """How far an unpadded epoch moves the shard's cycle: the samples it delivers, and with DROP the
        batch its reset skips."""
        return self.num_samples() + (self.batch_size if self.drop_last else 0)

    def counted(self) -> int:
        """rocAL's count of an epoch's samples (Reader::count_items at its start: what getRemainingImages
        reports); without padding not always whole batches, of which the loaders deliver the whole ones."""
        if not self.pad:
            return max(self.largest, self.batch_size) - (self.batch_size if self.drop_last and self.padded else 0)
        return self.num_samples()

    def num_samples(self) -> int:
        if not self.pad:
            return self.counted() // self.batch_size * self.batch_size
        if self.drop_last:  # DROP: the padded batch is not made
            return self.largest // self.batch_size * self.batch_size
        return self.largest + self.padded

    def indices(self, epoch: int) -> list[int]:
        shard = self.shard_id if self.stick else (self.shard_id + epoch) % self.num_shards
        low, high = self.size * shard // self.num_shards, self.size * (shard + 1) // self.num_shards
        files = list(range(low, high))
        if self.shuffle:
            generator = torch.Generator().manual_seed((self.seed * 1_000_003 + (epoch if self.reshuffle else 0))
                                                      % (1 << 63))
            files = [files[i] for i in torch.randperm(len(files), generator=generator).tolist()]
        if not self.pad:
            start = epoch * self._cycle()
            return [files[(start + k) % len(files)] for k in range(self.num_samples())]
        if self.padded and not self.drop_last:
            # rocAL pads every shard to the largest one, and that to whole batches, with its last file
            return files + [high - 1] * (self.num_samples() - len(files))
        # a smaller shard wraps around itself
        return [files[i % len(files)] for i in range(self.num_samples())]
