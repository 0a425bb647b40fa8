"""The epoch and shard bookkeeping DALI's framework iterators share (``nvidia.dali.plugin.base_iterator``).

A DALI reader never stops: at the end of its shard it either repeats its last sample (``pad_last_batch``)
or runs on into the next epoch's data to fill the batch. The iterator is what decides where an epoch
ends, how many samples of the last batch are real, and where the next epoch starts. Everything here
follows DALI's rules to the sample, so a script sees the same batches with the same padding; the tests
compare against real DALI iterators over real DALI pipelines.

Unlike DALI, the iterator asks its pipelines only for ``build()``, ``run()``, ``reset()``,
``reader_meta(name)`` and the batch size; it keeps no prefetch queue of its own (the pipeline's run-ahead
is the pipeline's business), which yields the same stream of batches.
"""

from __future__ import annotations

import logging
import warnings
from enum import Enum, unique

import numpy as np


@unique
class LastBatchPolicy(Enum):
    """What to do with the last batch of an epoch when the epoch has too few samples to fill it.

    * FILL - the batch is filled, by repeating the last sample or by wrapping into the data set,
      depending on the reader's ``pad_last_batch``
    * DROP - the batch is dropped if the current epoch cannot fill it
    * PARTIAL - the batch holds only the current epoch's remaining samples (it is shorter)
    """

    FILL = 0
    DROP = 1
    PARTIAL = 2


def _require(ok, message):
    """DALI checks its arguments with ``assert``: raise the same AssertionError, but also under ``python -O``."""
    if not ok:
        raise AssertionError(message)


def _round_up(n, multiple):
    return -(-int(n) // multiple) * multiple


def _max_batch_size(pipe):
    # Real DALI pipelines call it max_batch_size (batch_size there is a deprecated alias that warns).
    size = getattr(pipe, "max_batch_size", None)
    return pipe.batch_size if size is None else size


class _DaliBaseIterator:
    """Shared part of DALI's iterators; framework iterators add ``_to_framework(outputs)``.

    Parameters are DALI's (see ``DALIGenericIterator``). Sizes are counted per pipeline when
    ``reader_name`` is given (each pipeline reads its own shard), and summed over the pipelines when
    ``size`` is given, as in DALI.

    With the data set ``[1,2,3,4,5,6,7]`` and batch size 2 (DALI's table):

    =========  =================  ==========  ================
    policy     last_batch_padded  last batch  next epoch starts
    =========  =================  ==========  ================
    PARTIAL    True               [7]         [1, 2]
    PARTIAL    False              [7]         [2, 3]
    FILL       True               [7, 7]      [1, 2]
    FILL       False              [7, 1]      [2, 3]
    DROP       True               [5, 6]      [1, 2]
    DROP       False              [5, 6]      [2, 3]
    =========  =================  ==========  ================
    """

    def __init__(self, pipelines, size=-1, reader_name=None, auto_reset=False, fill_last_batch=None,
                 last_batch_padded=False, last_batch_policy=LastBatchPolicy.FILL, prepare_first_batch=True):
        _require(pipelines is not None, "Number of provided pipelines has to be at least 1")
        self._pipes = pipelines if isinstance(pipelines, list) else [pipelines]
        self._num_gpus = len(self._pipes)
        self.batch_size = _max_batch_size(self._pipes[0])
        _require(all(_max_batch_size(p) == self.batch_size for p in self._pipes),
                 "All pipelines should have the same batch size set")
        self._size = int(size)
        self._auto_reset = _auto_reset_mode(auto_reset)
        self._prepare_first_batch = prepare_first_batch
        self._last_batch_policy = _policy(fill_last_batch, last_batch_policy)
        self._last_batch_padded = last_batch_padded

        _require(self._size != 0, "Size cannot be 0")
        _require(self._size > 0 or self._num_gpus == 1 or reader_name,
                 "Negative size is supported only for a single pipeline: give `size` or `reader_name`")
        _require(not reader_name or self._size < 0,
                 "When reader_name is provided, size should not be set (it is read from the reader)")
        _require(not reader_name or not last_batch_padded,
                 "When reader_name is provided, last_batch_padded should not be set "
                 "(it is the reader's pad_last_batch)")
        if self._size < 0 and not reader_name:
            # Unsized: the epoch ends where the pipeline raises StopIteration; there is no last batch to pad.
            self._last_batch_policy = LastBatchPolicy.FILL
            self._last_batch_padded = False
        if self._size > 0 and not reader_name:
            warnings.warn("Please set `reader_name` and don't set last_batch_padded and size manually "
                          "whenever possible: a hand-given size may skip samples or repeat them "
                          "(see DALI's documentation on sharding).", Warning, stacklevel=3)
        self._counter = 0   # samples delivered this epoch: per pipeline with a reader, summed without
        for p in self._pipes:
            p.build()
        self._reader_name = reader_name
        if reader_name:
            self._read_reader_meta()
        self._ever_consumed = False
        self._first_batch = None

    def _prepare(self):
        """Called by subclasses at the end of ``__init__``: DALI's ``prepare_first_batch`` runs one batch now."""
        if self._prepare_first_batch:
            try:
                self._first_batch = self._next_batch()
            except StopIteration:
                raise RuntimeError("It seems that there is no data in the pipeline. This may happen if "
                                   "`last_batch_policy` is set to PARTIAL and the requested batch size "
                                   "is greater than the shard size.") from None

    # -- sizing from the reader ---------------------------------------------------------------------------

    def _read_reader_meta(self):
        metas = [p.reader_meta(self._reader_name) for p in self._pipes]

        def same(key, what, compare=lambda v: v):
            values = [compare(m[key]) for m in metas]
            _require(all(v == values[0] for v in values),
                     f"Reader Operator should have the same {what} in all the pipelines.")
            return metas[0][key]

        self._epoch_size = int(same("epoch_size", "size value"))
        self._shards_num = int(same("number_of_shards", "`num_shards` argument set"))
        self._last_batch_padded = bool(same("pad_last_batch", "`pad_last_batch` argument set", bool))
        self._stick_to_shard = bool(same("stick_to_shard", "`stick_to_shard` argument set", bool))
        self._shards_id = np.array([m["shard_id"] for m in metas], dtype=np.int64)

        bs, n, shards = self.batch_size, self._epoch_size, self._shards_num
        if self._last_batch_policy == LastBatchPolicy.DROP:
            self._size = n // shards          # the smallest shard: no pipeline may run short
        elif self._last_batch_padded:
            self._size = metas[0]["epoch_size_padded"] // shards   # padded shards are all equal
        else:
            self._size = _round_up(-(-n // shards), bs)   # whole batches covering the biggest shard
        # The reader's shard split: shard i is samples [floor(i*n/shards), floor((i+1)*n/shards)).
        bounds = np.arange(shards + 1, dtype=np.int64) * n // shards
        self._shard_sizes_initial = np.diff(bounds)
        # For FILL without padding: the shard size each reader covers this epoch, and how far each reader
        # already read into it while filling the previous epoch's last batch (DALI's _counter_per_gpu).
        self._shard_sizes = self._shard_sizes_initial.copy()
        self._read_ahead = np.zeros(shards, dtype=np.int64)

    # -- one batch ----------------------------------------------------------------------------------------

    def _to_framework(self, outputs):
        """One pipeline's outputs (a tuple of TensorLists) as the framework's batch (a dict)."""
        raise NotImplementedError

    def _get_outputs(self):
        if self._size > 0 and self._counter >= self._size:
            self._end_iteration()
        try:
            outputs = [p.run() for p in self._pipes]
        except StopIteration:
            # The pipeline itself ended the epoch (an external source ran dry).
            if self._size < 0 and self._auto_reset == "yes":
                self.reset()
            raise
        if self._reader_name or self._size != -1:
            for out in outputs:
                for o in out:
                    _require(len(o) == self.batch_size,
                             "Variable batch size is not supported by the iterator when reader_name is "
                             "provided or iterator size is set explicitly")
        return outputs

    def _advance(self):
        """Count the batch just read; True when DROP says it was incomplete (so it is thrown away)."""
        self._counter += self.batch_size if self._reader_name else self._num_gpus * self.batch_size
        return self._last_batch_policy == LastBatchPolicy.DROP and self._counter > self._size

    def _next_batch(self):
        batches = [self._to_framework(out) for out in self._get_outputs()]
        if self._advance():
            self._end_iteration()
        if self._last_batch_policy != LastBatchPolicy.PARTIAL:
            return batches
        if self._reader_name:
            # Each pipeline keeps only the samples still inside its own shard (shards may differ by one).
            keep = self.batch_size - (self._counter - self._shard_sizes_initial[self._shards_id])
            if np.any(keep < self.batch_size):
                return [_head(b, int(k)) for b, k in zip(batches, keep)]
        elif self._size > 0 and self._counter > self._size:
            # `size` counts over all pipelines: keep whole batches up to it, then part of one.
            wanted = self._num_gpus * self.batch_size - (self._counter - self._size)
            batches = batches[:-(-wanted // self.batch_size)]
            batches[-1] = _head(batches[-1], wanted % self.batch_size or self.batch_size)
        return batches

    def _end_iteration(self):
        if self._auto_reset == "yes":
            self.reset()
        raise StopIteration

    # -- epochs -------------------------------------------------------------------------------------------

    def reset(self):
        """Starts the next epoch. DALI ignores (with a logged warning) a reset before the epoch's end."""
        step = self.batch_size if self._reader_name else self._num_gpus * self.batch_size
        if self._last_batch_policy == LastBatchPolicy.DROP:
            # A caller who stopped after len(self) batches left the incomplete batch in the pipeline:
            # read it and throw it away, so the next epoch starts where it should.
            ended = self._size > 0 and self._counter >= self._size
            if self._counter + step > self._size and not ended:
                self._get_outputs()
                self._counter += step

        if not (self._counter >= self._size or self._size < 0):
            logging.warning("DALI iterator does not support resetting while epoch is not finished. "
                            "Ignoring...")
            return
        if self._last_batch_policy == LastBatchPolicy.FILL and not self._last_batch_padded:
            # The filler samples of the last batch came from the next epoch: it starts that far in.
            if self._reader_name:
                self._carry_read_ahead()
            else:
                self._counter %= self._size
        else:
            self._counter = 0
        if self._reader_name and not self._stick_to_shard:
            # Without stick_to_shard every reader moves on to the next shard each epoch.
            self._shards_id = (self._shards_id + 1) % self._shards_num
        for p in self._pipes:
            p.reset()

    def _carry_read_ahead(self):
        """FILL with an unpadded reader: each reader filled its last batch from the next epoch's data,
        by a different amount when shards differ in size. The next epoch is sized to whole batches
        covering what the furthest-behind reader still has to read (DALI's rule, kept as DALI has it)."""
        read = self._counter - self._read_ahead.min()
        self._read_ahead = self._read_ahead + read - self._shard_sizes
        self._counter = int(self._read_ahead.min())
        if not self._stick_to_shard:
            self._shard_sizes = np.roll(self._shard_sizes, 1)
        self._size = _round_up(max(self._shard_sizes - self._read_ahead), self.batch_size)
        if self._size == 0:
            # Read so far ahead that the next epoch is already done: skip to the one after.
            self._read_ahead = np.zeros(self._shards_num, dtype=np.int64)
            self._counter = 0
            self._shard_sizes = np.roll(self._shard_sizes, 1)
            self._size = _round_up(max(self._shard_sizes), self.batch_size)

    def checkpoints(self):
        """DALI's answer for pipelines made without ``enable_checkpointing`` (the only kind here)."""
        raise ValueError("Cannot access checkpoints with checkpointing disabled")

    # -- Python iteration ---------------------------------------------------------------------------------

    def __next__(self):
        self._ever_consumed = True
        if self._first_batch is not None:
            batch, self._first_batch = self._first_batch, None
            return batch
        return self._next_batch()

    def next(self):
        """Returns the next batch of data."""
        return self.__next__()

    def __iter__(self):
        # iter() on a used iterator starts a new epoch (DALI's rule); on a fresh one it must not.
        if self._counter != 0 and self._ever_consumed:
            self.reset()
        return self

    @property
    def size(self):
        return self._size

    def __len__(self):
        step = self.batch_size if self._reader_name else self._num_gpus * self.batch_size
        if self._last_batch_policy == LastBatchPolicy.DROP:
            return self._size // step
        return -(-self._size // step)


def _auto_reset_mode(auto_reset):
    if auto_reset is False or auto_reset is None or auto_reset == "no":
        return "no"
    if auto_reset is True or auto_reset == "yes":
        return "yes"
    raise ValueError(f"Unsupported value for `auto_reset` {auto_reset!r}: use True/False, 'yes'/'no' or None")


def _policy(fill_last_batch, last_batch_policy):
    if fill_last_batch is not None:
        warnings.warn("Please do not use `fill_last_batch` and use `last_batch_policy` instead.",
                      Warning, stacklevel=4)
        return LastBatchPolicy.FILL if fill_last_batch else LastBatchPolicy.PARTIAL
    if type(last_batch_policy) is not LastBatchPolicy:
        raise ValueError(f"Wrong type for `last_batch_policy`. Expected {LastBatchPolicy}, "
                         f"got {type(last_batch_policy)}")
    return last_batch_policy


def _head(batch, n):
    """The first ``n`` samples of every output of one pipeline's batch (slicing as Python does)."""
    return {name: value[0:n] for name, value in batch.items()}

from ..unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "nvidia.dali.plugin.base_iterator")  # any other name: NotImplementedError naming it
