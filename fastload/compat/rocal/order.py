"""rocAL's reader order: which samples rocAL's readers read in an epoch (padded shards, sorted files).

The front end's half of fastload's orders (``fastload.order`` holds torch's, which the core uses).
"""

from __future__ import annotations

import torch

from ...order import IndexOrder


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
