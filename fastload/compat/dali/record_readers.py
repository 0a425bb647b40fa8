"""DALI's readers of record files: ``fn.readers.tfrecord``, ``fn.readers.webdataset``, ``fn.readers.numpy``
(with ``fn.decoders.numpy``) and ``fn.readers.mxnet``.

Each is one reader op (a ``ReaderOp``, which the pipeline runs as its reader, with DALI's order, shards and
``reader_meta``) whose spec reads a sample's bytes (``RecordSpec.read``) and whose outputs are that sample's
tensors. The rules, measured against DALI 2.4 on the CPU (tests/compat/test_dali_record_readers.py):

* order: a sample stream as ``fn.readers.file``'s (contiguous shards, read on past the shard's end,
  ``stick_to_shard``, ``pad_last_batch``); with ``random_shuffle`` DALI's shuffle buffer over the records in
  file order (these loaders do not shuffle their list first, as the file loader does), so a shuffled stream
  is DALI's for an explicit ``seed``;
* tfrecord: records as DALI's index files (``tfrecord2idx``: ``offset size`` per line) list them, file after
  file; each record's length and data CRCs are checked (DALI checks neither: a corrupt record is an error
  here). Per feature: ``FixedLenFeature(shape, int64/float32)`` -> exactly ``prod(shape)`` values in
  ``shape`` (``()``: a scalar); ``FixedLenFeature(shape, string)`` -> the first value's bytes as uint8 [n];
  ``VarLenFeature`` -> all values [n] (or [n / prod(p), *p] with a partial shape ``p``; a feature stored as
  another type reads as none, as DALI's protobuf does). DALI leaves the tensor uninitialised where a feature
  is missing or a fixed one has fewer values (it ignores ``default_value``): such a record is an error
  naming the feature here, never made-up values.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from ...errors import DecodeError
from ...tfrecords import parse_dali_index, parse_example, unframe
from ..engine.graph import ReaderOp
from . import tfrecord as tfrec
from .operators import ReaderSpec, check_args
from .order import ReaderOrder
from .spec import operator


@dataclass
class RecordSpec(ReaderSpec):
    """A record reader's ``ReaderSpec``: ``read(index)`` gives the sample's bytes (what ``ReaderSource`` reads)
    and ``order(batch_size, seed)`` its order (DALI's indexed loaders: no shuffle of the list first)."""

    read: Callable | None = None
    order: Callable | None = None


class RecordOrder(ReaderOrder):
    """``ReaderOrder`` for DALI's loaders that do not shuffle their list before the shuffle buffer."""

    def __init__(self, dataset_size: int, **args):
        super().__init__(dataset_size, **args)
        if self.random_shuffle:
            self._listed = list(range(dataset_size))


def _paths(value, what: str, operator: str) -> list[str]:
    if value is None:
        raise ValueError(f"{operator} needs {what}")
    listed = [os.fspath(value)] if isinstance(value, (str, os.PathLike)) else [os.fspath(v) for v in value]
    if not listed:
        raise ValueError(f"{operator}: {what} is empty")
    return listed


def _spec(operator: str, samples: list, read: Callable, *, shard_id, num_shards, random_shuffle, initial_fill,
          shuffle_after_epoch, stick_to_shard, pad_last_batch, seed, name) -> RecordSpec:
    if not samples:
        raise ValueError(f"{operator}: no samples found")
    spec = RecordSpec(samples, [file for file, _ in samples], int(shard_id), int(num_shards), bool(random_shuffle),
                      int(initial_fill), bool(shuffle_after_epoch), bool(stick_to_shard), bool(pad_last_batch),
                      int(seed), name, read=read)
    spec.order = lambda batch_size, order_seed: RecordOrder(
        len(spec.samples), shard_id=spec.shard_id, num_shards=spec.num_shards, batch_size=batch_size,
        stick_to_shard=spec.stick_to_shard, pad_last_batch=spec.pad_last_batch, random_shuffle=spec.random_shuffle,
        initial_fill=spec.initial_fill, shuffle_after_epoch=spec.shuffle_after_epoch, seed=order_seed)
    return spec


def _device(operator: str, device: str) -> None:
    if device != "cpu":
        raise ValueError(f"{operator} runs on the CPU (device='cpu'), as in DALI")


def _read_range(file: str, offset: int, size: int) -> bytes:
    with open(file, "rb") as handle:
        handle.seek(offset)
        return handle.read(size)


_ORDER_ARGS = ("shard_id", "num_shards", "random_shuffle", "initial_fill", "shuffle_after_epoch", "stick_to_shard",
               "pad_last_batch", "seed", "name")


def _order_args(args: dict) -> dict:
    return {key: args[key] for key in _ORDER_ARGS}


# ------------------------------------------------------------------------------------------- tfrecord

def _feature_tensor(feature: tfrec.Feature, values: list | None, name: str) -> torch.Tensor:
    """One feature of one record as DALI's TFRecord parser makes it (see the module's docstring)."""
    if values is None:
        raise ValueError(f"the record has no feature {name!r} (DALI 2.4 gives an uninitialised value there, "
                         f"not default_value)")
    kind = {tfrec.int64: int, tfrec.float32: float, tfrec.string: bytes}[feature.dtype]
    values = [v for v in values if isinstance(v, kind)]  # another list type: none of this one
    if feature.dtype == tfrec.string:
        if not values:
            raise ValueError(f"the string feature {name!r} holds no bytes value")
        return torch.frombuffer(bytearray(values[0]), dtype=torch.uint8) if values[0] else \
            torch.zeros(0, dtype=torch.uint8)
    dtype = np.int64 if feature.dtype == tfrec.int64 else np.float32
    array = np.array(values, dtype=dtype)
    if feature.fixed:
        volume = math.prod(feature.shape)
        if array.size != volume:
            raise ValueError(f"feature {name!r} has {array.size} values, its FixedLenFeature shape "
                             f"{list(feature.shape)} {volume} (DALI 2.4 leaves the rest uninitialised, or fails)")
        return torch.from_numpy(array.reshape(feature.shape))
    inner = math.prod(feature.shape)
    if inner == 0 or array.size % inner:
        raise ValueError(f"feature {name!r}: {array.size} values do not fill rows of its partial shape "
                         f"{list(feature.shape)}")
    return torch.from_numpy(array.reshape((array.size // inner, *feature.shape)))


def _tfrecord_samples(operator: str, paths: list[str], index_paths: list[str]) -> tuple[list, list]:
    """[(name, position)] and [(file, offset, size)] of every record the index files list, file by file."""
    if len(index_paths) != len(paths):
        raise ValueError(f"{operator}: {len(index_paths)} index files for {len(paths)} TFRecord files "
                         f"(one each, in the same order)")
    samples, ranges = [], []
    for path, index_path in zip(paths, index_paths):
        try:
            with open(index_path) as file:
                records = parse_dali_index(file.read(), index_path)
            size = os.path.getsize(path)
        except OSError as error:
            raise ValueError(f"{operator}: {error}") from None
        for number, (offset, length) in enumerate(records):
            if offset + length > size:
                raise ValueError(f"{operator}: {index_path} lists a record at {offset} of {length} bytes past the "
                                 f"end of {path} ({size} bytes): not this file's index")
            samples.append((f"{path}:record {number}", len(samples)))
            ranges.append((path, offset, length))
    return samples, ranges


@operator("readers.tfrecord", "readers.TFRecord", aliases={"tfrecord_reader": "TFRecordReader"})
def readers_tfrecord(*, path=None, index_path=None, features=None, shard_id=0, num_shards=1, random_shuffle=False,
                     initial_fill=1024, shuffle_after_epoch=False, stick_to_shard=False, pad_last_batch=False,
                     seed=-1, name=None, device="cpu", **hints):
    """``fn.readers.tfrecord``: a dict {feature name: its tensor} per record (see the module's docstring)."""
    operator = "fn.readers.tfrecord"
    check_args(operator, hints, {"use_o_direct"})
    _device(operator, device)
    if not isinstance(features, dict) or not features:
        raise ValueError(f"{operator} needs features: a dict of feature names to tfrecord.FixedLenFeature / "
                         f"VarLenFeature")
    for key, feature in features.items():
        if not isinstance(feature, tfrec.Feature):
            raise TypeError(f"{operator}: features[{key!r}] is a {type(feature).__name__}, not a "
                            f"fastload.compat.dali.tfrecord feature (FixedLenFeature or VarLenFeature)")
        if feature.dtype == tfrec.string and (not feature.fixed or math.prod(feature.shape) > 1):
            raise ValueError(f"{operator}: feature {key!r}: Tensors of strings are not supported (as in DALI: a "
                             f"string feature is a FixedLenFeature of one value)")
    if index_path is None:
        raise ValueError(f"{operator} needs index_path (DALI's tfrecord2idx index of each file)")
    paths = _paths(path, "path", operator)
    samples, ranges = _tfrecord_samples(operator, paths, _paths(index_path, "index_path", operator))

    def read(index: int) -> bytes:
        file, offset, size = ranges[index]
        try:
            return unframe(_read_range(file, offset, size))
        except (OSError, ValueError) as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    spec = _spec(operator, samples, read, **_order_args(locals()))
    names = list(features)

    def parse(ctx, op):
        data, index = ctx.readers[op.id]
        try:
            found = parse_example(bytes(data))
            return tuple(_feature_tensor(features[key], found.get(key), key) for key in names)
        except ValueError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    reader = ReaderOp("readers.tfrecord", parse, spec, num_outputs=len(names))
    return dict(zip(names, reader.outputs))
