"""What DALI's record readers (``record_readers``, ``numpy_readers``, ``lmdb_readers``) share: the reader
spec that says how a sample's bytes are read (``RecordSpec.read``) and DALI's order for it.

The order is a sample stream as ``fn.readers.file``'s (contiguous shards, read on past the shard's end,
``stick_to_shard``, ``pad_last_batch``, ``ReaderOrder``); with ``random_shuffle``, DALI's shuffle buffer. DALI's
file loaders (fn.readers.numpy's, fn.readers.sequence's) shuffle their list first, as fn.readers.file's does;
its indexed and LMDB loaders (tfrecord, webdataset, mxnet, caffe, caffe2) do not (``ReaderOrder``'s
``shuffle_list``). Either way a shuffled stream is DALI's for an explicit ``seed`` (measured against DALI 2.4,
tests/compat/test_dali_record_readers.py). ``shuffle_after_epoch``, whose permutations fastload does not
reproduce, is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from ..engine.graph import ReaderOp
from .operators import ReaderSpec
from .order import ReaderOrder


@dataclass
class RecordSpec(ReaderSpec):
    """A record reader's ``ReaderSpec``: ``read(index)`` gives the sample's bytes (what ``ReaderSource`` reads)
    and ``order(batch_size, seed)`` its order (DALI's indexed loaders: no shuffle of the list first)."""

    read: Callable | None = None
    order: Callable | None = None


class LaidOutReader(ReaderOp):
    """A ``ReaderOp`` with one output per layout."""

    def __init__(self, name: str, impl: Callable, reader, layouts: tuple[str, ...]):
        super().__init__(name, impl, reader, num_outputs=len(layouts), layouts=layouts)


def reader_paths(value, what: str, operator: str) -> list[str]:
    """A path argument (one, or a list) as a non-empty list of paths."""
    if value is None:
        raise ValueError(f"{operator} needs {what}")
    listed = [os.fspath(value)] if isinstance(value, (str, os.PathLike)) else [os.fspath(v) for v in value]
    if not listed:
        raise ValueError(f"{operator}: {what} is empty")
    return listed


def record_spec(operator: str, samples: list, read: Callable | None, *, shard_id, num_shards, random_shuffle,
                initial_fill, shuffle_after_epoch, stick_to_shard, pad_last_batch, seed, name, names=None,
                listed_shuffle: bool = False) -> RecordSpec:
    """The reader's spec; ``listed_shuffle``: DALI's file loader shuffles its list first (``ReaderOrder``'s
    default), the indexed loaders do not (``shuffle_list=False``); ``read`` None: a sample is its whole file."""
    if shuffle_after_epoch:  # ReaderOrder's per-pass permutation is DALI's in kind only, not its samples
        raise NotImplementedError(f"fastload.compat.dali: {operator}(shuffle_after_epoch=True) is not supported "
                                  f"(DALI's per-epoch permutation is not reproduced); use random_shuffle with a seed")
    if not samples:
        raise ValueError(f"{operator}: no samples found")
    spec = RecordSpec(samples, names or [file for file, _ in samples], int(shard_id), int(num_shards),
                      bool(random_shuffle), int(initial_fill), bool(shuffle_after_epoch), bool(stick_to_shard),
                      bool(pad_last_batch), int(seed), name, read=read)
    if listed_shuffle:
        return spec
    spec.order = lambda batch_size, order_seed: ReaderOrder(
        len(spec.samples), shard_id=spec.shard_id, num_shards=spec.num_shards, batch_size=batch_size,
        stick_to_shard=spec.stick_to_shard, pad_last_batch=spec.pad_last_batch, random_shuffle=spec.random_shuffle,
        initial_fill=spec.initial_fill, shuffle_after_epoch=spec.shuffle_after_epoch, seed=order_seed,
        shuffle_list=False)
    return spec


def cpu_only(operator: str, device: str) -> None:
    if device != "cpu":
        raise ValueError(f"{operator} runs on the CPU (device='cpu'), as in DALI")


def read_range(file: str, offset: int, size: int) -> bytes:
    with open(file, "rb") as handle:
        handle.seek(offset)
        return handle.read(size)


ORDER_ARGS = ("shard_id", "num_shards", "random_shuffle", "initial_fill", "shuffle_after_epoch", "stick_to_shard",
              "pad_last_batch", "seed", "name")


def order_args(args: dict) -> dict:
    """A builder's order arguments (its ``locals()``), as ``record_spec`` takes them."""
    return {key: args[key] for key in ORDER_ARGS}
