"""DALI's reader order: which samples ``fn.readers.*`` read in an epoch, and DALI's shuffles.

The front end's half of fastload's orders (``fastload.order`` holds torch's, which the core uses): DALI's
readers split a dataset into contiguous shards, read on past an epoch's end into the next shard, and shuffle
with a buffer drawn from libstdc++'s std::mt19937 -- rules of DALI's, kept here under compat/ so the core
knows no front end.
"""

from __future__ import annotations

import numpy as np
import torch

from ...order import IndexOrder

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
    DALI's (given explicitly). ``shuffle_list``: whether the list is shuffled
    once before the buffer, as DALI's file loaders do (readers.file, numpy,
    sequence); its indexed and LMDB loaders (tfrecord, webdataset, mxnet,
    caffe, caffe2) pass their list through the buffer as it is (False).
    ``shuffle_after_epoch`` reads the block from a fresh permutation of the
    whole dataset (seeded ``seed + pass``) on every pass: DALI's in kind
    (DALI 2.4.0's passes are not the std::shuffle its 2023 sources describe,
    so not its values).
    """

    def __init__(self, dataset_size: int, *, shard_id: int, num_shards: int, batch_size: int,
                 stick_to_shard: bool = False, pad_last_batch: bool = False, random_shuffle: bool = False,
                 initial_fill: int = 1024, shuffle_after_epoch: bool = False, seed: int = 0,
                 shuffle_list: bool = True):
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
        self.shuffle_list = shuffle_list
        # the list the reader reads (None: the dataset's own order)
        self._listed = dali_shuffle(range(dataset_size), DALI_LOADER_SEED) if random_shuffle and shuffle_list \
            else None
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
        index = low + k % (high - low) if self.stick else (low + k) % self.size
        return index if self._listed is None else self._listed[index]

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


def reader_order(spec, batch_size: int, seed: int) -> ReaderOrder:
    """DALI's order of a reader's samples, by its spec's shard, padding and shuffle settings (the order the
    engine's ``ReaderSource`` runs a DALI pipeline's reader in)."""
    return ReaderOrder(len(spec.samples), shard_id=spec.shard_id, num_shards=spec.num_shards, batch_size=batch_size,
                       stick_to_shard=spec.stick_to_shard, pad_last_batch=spec.pad_last_batch,
                       random_shuffle=spec.random_shuffle, initial_fill=spec.initial_fill,
                       shuffle_after_epoch=spec.shuffle_after_epoch, seed=seed)
