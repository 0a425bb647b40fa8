"""DALI's readers of record files: ``fn.readers.tfrecord``, ``fn.readers.webdataset``, ``fn.readers.numpy``
(with ``fn.decoders.numpy``), ``fn.readers.mxnet``, ``fn.readers.caffe`` / ``caffe2`` (LMDB) and
``fn.readers.sequence``.

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
* webdataset: DALI's grouping (not webdataset's own): each tar's regular files in order, a sample the run
  of consecutive members with one key (the name up to the first "." of its file name, extensions kept in
  their case unless ``case_sensitive_extensions=False``; a name without a "." is its own extension; a key
  "" (".hidden") left out); an output takes the first component matching its set, later ones are ignored;
  a sample missing an output gives an empty tensor, is left out, or is an error, as
  ``missing_component_behavior`` says; ``dtypes`` reinterpret the bytes (a size not a whole number of
  items is an error). wds2idx index files (v1.1, v1.2) give the samples instead of the tar's headers.
* numpy: file_root's files directly in it ("./name"), then those one folder down (folders sorted; deeper
  ones not entered), each set sorted, whose name matches ``file_filter`` (fnmatch, case-sensitive); or
  ``files`` / ``file_list`` (relative to file_root, else to the list's folder). DALI's file loader shuffles
  this list first with ``random_shuffle`` (``ReaderOrder``'s rule). A Fortran-order array reads in its
  logical shape. Regions: start and end (start + shape) per axis (``roi_axes``, else all), relative ones
  scaled by the extent in float32, each rounded halves away from zero; outside the array an error, the
  ``fill_value`` ("pad") or trimmed ("trim_to_shape").
* mxnet: one index file of ``index offset`` pairs whose offsets run over the files back to back, sorted
  (a record runs to the next offset; one of 0 bytes is left out); per record the image bytes and float32
  labels ([1]: the header's; [flag]: the ones before the image). A record split in parts (data holding
  the magic number, or over 512 MiB) is refused: DALI 2.4 misreads the padding between parts.
* caffe: the LMDB environments' records in key order, one environment after the other (the ``lmdb``
  module reads them; without it the reader is refused naming it); a ``caffe.Datum``'s ``data`` is the
  image, encoded bytes [n] unless ``encoded`` is present and false (then raw [height, width, channels]),
  its ``label`` int32 [1]. A record without the data or label asked for is an error (DALI 2.4 leaves that
  output unset).
* caffe2: the same LMDB order; a ``caffe2.TensorProtos``' protos are read in DALI's order (image, label,
  ``additional_inputs``, then a last proto taken for the bounding box whenever one follows). What DALI 2.4
  fails on (the sparse label types 1 and 3; an extra proto without ``bbox=True``) or leaves unset (an image
  proto neither STRING nor BYTE) is refused, by name or as an error naming the record.
* sequence: streams are file_root's folders (sorted), frames their image files (the file reader's
  extensions, any case) sorted by name; a stream's sequences start ``step`` frames apart, ``stride``
  frames between a sequence's frames, whole sequences only; frames decoded as ``fn.decoders.image`` does,
  stacked FHWC. The list is shuffled first with ``random_shuffle``, as the file loader's.
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
from ..engine.graph import Op, ReaderOp
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


class _LaidOutReader(ReaderOp):
    """A ``ReaderOp`` whose outputs have layouts (``ReaderOp`` gives none)."""

    def __init__(self, name: str, impl: Callable, reader, layouts: tuple[str, ...]):
        Op.__init__(self, name, impl, [], {}, num_outputs=len(layouts), layouts=layouts)
        self.reader = reader


def _paths(value, what: str, operator: str) -> list[str]:
    if value is None:
        raise ValueError(f"{operator} needs {what}")
    listed = [os.fspath(value)] if isinstance(value, (str, os.PathLike)) else [os.fspath(v) for v in value]
    if not listed:
        raise ValueError(f"{operator}: {what} is empty")
    return listed


def _spec(operator: str, samples: list, read: Callable | None, *, shard_id, num_shards, random_shuffle,
          initial_fill, shuffle_after_epoch, stick_to_shard, pad_last_batch, seed, name, names=None,
          listed_shuffle: bool = False) -> RecordSpec:
    """The reader's spec; ``listed_shuffle``: DALI's file loader shuffles its list first (``ReaderOrder``'s
    rule), the indexed loaders do not (``RecordOrder``'s); ``read`` None: a sample is its whole file."""
    if not samples:
        raise ValueError(f"{operator}: no samples found")
    spec = RecordSpec(samples, names or [file for file, _ in samples], int(shard_id), int(num_shards),
                      bool(random_shuffle), int(initial_fill), bool(shuffle_after_epoch), bool(stick_to_shard),
                      bool(pad_last_batch), int(seed), name, read=read)
    if listed_shuffle:
        return spec
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


# ----------------------------------------------------------------------------------------- webdataset

WDS_INDEX_VERSIONS = ("v1.1", "v1.2")  # wds2idx's: "ext offset size" per component, v1.2 with its file name


def _wds_split(name: str) -> tuple[str, str]:
    """DALI's split_name: the key up to the first "." after the last "/", the extension after it (a name
    without a "." there: the whole name is both, as DALI's npos arithmetic makes it)."""
    dot = name.find(".", name.rfind("/") + 1)
    return (name, name) if dot < 0 else (name[:dot], name[dot + 1:])


def _wds_tar(path: str) -> list[list[tuple[str, int, int, str]]]:
    """A tar's samples as DALI's ParseTarFile groups them: consecutive regular files with one key, a file
    whose key is empty (".hidden") left out; the last group is a sample even when it is empty (an empty
    archive, or one of dot files only). Each component: (extension, data offset, size, member name)."""
    from ...shardfiles import Sequential
    from ...tarshards import CorruptTar, members
    groups: list[list] = []
    current: list = []
    last = None
    with Sequential(path) as file:
        try:
            for name, offset, size, _ in members(file, lambda name, size: False):
                key, extension = _wds_split(name)
                if last is None:
                    last = key  # DALI starts at the first regular file, whatever its key
                if not key:
                    continue
                if key != last:
                    groups.append(current)
                    current, last = [], key
                current.append((extension, offset, size, name))
        except CorruptTar as error:
            raise ValueError(f"fn.readers.webdataset: {path}: {error}") from None
    groups.append(current)
    return groups


def _wds_index(path: str) -> list[list[tuple[str, int, int, str]]]:
    """A wds2idx index file's samples: a ``v1.1 N`` or ``v1.2 N`` line, then per sample its components
    ``ext offset size`` (v1.2: ``ext offset size filename``), each offset a whole tar block."""
    with open(path) as file:
        lines = file.read().split("\n")
    head = lines[0].split()
    if not head or head[0] not in WDS_INDEX_VERSIONS:
        raise ValueError(f"fn.readers.webdataset: {path}: unsupported index version {head[:1]} "
                         f"({', '.join(WDS_INDEX_VERSIONS)})")
    if len(head) < 2 or not head[1].isdigit() or int(head[1]) <= 0:
        raise ValueError(f"fn.readers.webdataset: {path}: no positive sample count on the first line")
    width = 4 if head[0] == "v1.2" else 3
    groups = []
    for number in range(1, int(head[1]) + 1):
        fields = lines[number].split() if number < len(lines) else []
        if not fields or len(fields) % width:
            raise ValueError(f"fn.readers.webdataset: {path} line {number}: expected components "
                             f"'{'ext offset size filename' if width == 4 else 'ext offset size'}'")
        group = []
        for at in range(0, len(fields), width):
            ext, offset, size = fields[at], int(fields[at + 1]), int(fields[at + 2])
            if offset % 512:
                raise ValueError(f"fn.readers.webdataset: {path} line {number}: tar offset {offset} is not a "
                                 f"multiple of 512")
            group.append((ext, offset, size, fields[at + 3] if width == 4 else ext))
        groups.append(group)
    return groups


@operator("readers.webdataset", "readers.Webdataset")
def readers_webdataset(*, paths=None, ext=None, index_paths=None, missing_component_behavior="",
                       dtypes=None, case_sensitive_extensions=True, shard_id=0, num_shards=1,
                       random_shuffle=False, initial_fill=1024, shuffle_after_epoch=False, stick_to_shard=False,
                       pad_last_batch=False, seed=-1, name=None, device="cpu", **hints):
    """``fn.readers.webdataset``: per sample, one tensor per extension set of ``ext`` ("jpg;png": either), a
    component's bytes as uint8 (or as ``dtypes``' type) [n]; samples grouped as DALI groups them
    (consecutive members with one key: the name up to the first "." of its file name); a component that
    matches an output already filled is ignored, as DALI does. A sample without some output: an empty
    tensor ("empty", the default), left out ("skip") or an error ("error")."""
    from .types import torch_dtype
    operator = "fn.readers.webdataset"
    check_args(operator, hints, set())
    _device(operator, device)
    files = _paths(paths, "paths", operator)
    sets = [ext] if isinstance(ext, str) else list(ext or [])
    if not sets:
        raise ValueError(f"{operator} needs ext (an extension set per output)")
    fold = (lambda s: s) if case_sensitive_extensions else str.lower
    wanted = [[fold(e) for e in s.split(";")] for s in sets]
    types_ = [torch.uint8] * len(sets) if dtypes is None else [
        torch_dtype(d) for d in ([dtypes] if not isinstance(dtypes, (list, tuple)) else dtypes)]
    if len(types_) != len(sets):
        raise ValueError(f"{operator}: Number of extensions does not match the number of provided types")
    behaviour = str(missing_component_behavior).lower() or "empty"
    if behaviour not in ("empty", "skip", "error"):
        raise ValueError(f"{operator}: Invalid value for missing_component_behavior "
                         f"'{missing_component_behavior}' possible values are: skip, error, empty")
    indexes = _paths(index_paths, "index_paths", operator) if index_paths else None
    if indexes is not None and len(indexes) != len(files):
        raise ValueError(f"{operator}: The number of index files, if any, must match the number of archives "
                         f"in the dataset")
    itemsizes = [torch.empty(0, dtype=t).element_size() for t in types_]
    samples, parts = [], []  # parts: per sample, (file, [(offset, size) or None per output])
    for number, file in enumerate(files):
        try:
            groups = _wds_index(indexes[number]) if indexes is not None else _wds_tar(file)
        except OSError as error:
            raise ValueError(f"{operator}: {error}") from None
        for group in groups:
            found: list = [None] * len(sets)
            first_name = None
            for extension, offset, size, member in group:
                for output, choices in enumerate(wanted):
                    if fold(extension) in choices and found[output] is None:
                        if size % itemsizes[output]:
                            raise ValueError(f"{operator}: {file}: {member}: component size and dtype incompatible "
                                             f"({size} bytes, {types_[output]})")
                        found[output] = (offset, size)
                        first_name = first_name or member
            if None in found:
                if behaviour == "skip":
                    continue
                if behaviour == "error":
                    raise ValueError(f"{operator}: Underful sample detected at {file} "
                                     f"({group[0][3] if group else 'an empty sample'})")
            key = _wds_split(first_name)[0] if first_name else f"sample {len(samples)}"
            samples.append((f"{file}:{key}", len(samples)))
            parts.append((file, found))

    def read(index: int) -> tuple:
        file, found = parts[index]
        try:
            with open(file, "rb") as handle:
                out = []
                for place in found:
                    if place is None:
                        out.append(b"")
                        continue
                    handle.seek(place[0])
                    data = handle.read(place[1])
                    if len(data) != place[1]:
                        raise ValueError(f"the archive ends inside a component at {place[0]} ({place[1]} bytes)")
                    out.append(data)
                return tuple(out)
        except (OSError, ValueError) as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    spec = _spec(operator, samples, read, **_order_args(locals()))

    def components(ctx, op):
        data, _ = ctx.readers[op.id]
        return tuple(torch.from_numpy(np.frombuffer(bytearray(part), dtype=torch.empty(0, dtype=t).numpy().dtype))
                     for part, t in zip(data, types_))

    outputs = ReaderOp("readers.webdataset", components, spec, num_outputs=len(sets)).outputs
    return outputs[0] if len(outputs) == 1 else outputs


# -------------------------------------------------------------------------------------------- numpy

def _npy_array(data: bytes) -> np.ndarray:
    """A .npy file's array, C-contiguous, in native byte order (a Fortran-order one read in its logical
    shape, as DALI gives it); ValueError for what DALI does not read (object and structured arrays)."""
    import io
    array = np.load(io.BytesIO(bytes(data)), allow_pickle=False)
    if array.dtype.fields is not None or array.dtype.kind not in "biuf":
        raise ValueError(f"a .npy array of type {array.dtype} (DALI reads booleans, integers and floats)")
    if not array.dtype.isnative:
        raise ValueError(f"a big-endian .npy array ({array.dtype.str}) is not supported")
    return np.ascontiguousarray(array)


def _list_npy(root: str, pattern: str) -> list[str]:
    """DALI's discovery under file_root: the files directly in it, then those in each folder directly in it
    (folders in sorted order; deeper ones not entered), each set sorted, whose name matches ``file_filter``
    (fnmatch, case-sensitive); a file in the root is named "./name", as DALI's source_info names it."""
    import fnmatch
    entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    found = [f"./{e.name}" for e in entries if e.is_file() and fnmatch.fnmatchcase(e.name, pattern)]
    for folder in (e for e in entries if e.is_dir()):
        found += [f"{folder.name}/{e.name}" for e in sorted(os.scandir(folder.path), key=lambda entry: entry.name)
                  if e.is_file() and fnmatch.fnmatchcase(e.name, pattern)]
    return found


def _round(value) -> int:
    """std::llround of a float32: halves away from zero."""
    value = float(np.float32(value))
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


def _roi(shape: tuple, roi: dict, policy: str, name: str) -> tuple[list[int], list[int]]:
    """The region's (start, end) per dimension, as DALI's slice arguments give it: relative values are
    scaled by the extent in float32; start and end (start + shape) are each rounded halves away from zero."""
    axes = list(roi["axes"]) if roi["axes"] else list(range(len(shape)))
    start, end = [0] * len(shape), list(shape)
    for key in ("start", "end", "shape"):
        values = roi[key]
        if values is not None and len(values) != len(axes):
            raise ValueError(f"fn.readers.numpy: {name}: roi {key} has {len(values)} values for {len(axes)} axes")
    for k, axis in enumerate(axes):
        if not -len(shape) <= axis < len(shape):
            raise ValueError(f"fn.readers.numpy: {name}: roi_axes {axis} is out of range for {len(shape)} dimensions")
        extent = np.float32(shape[axis])
        scale = (lambda v: np.float32(v) * extent) if roi["relative"] else np.float32
        first = scale(roi["start"][k]) if roi["start"] is not None else np.float32(0)
        if roi["end"] is not None:
            last = scale(roi["end"][k])
        elif roi["shape"] is not None:
            last = np.float32(first + scale(roi["shape"][k]))
        else:
            last = extent
        start[axis], end[axis] = _round(first), _round(last)
    for axis, extent in enumerate(shape):
        if end[axis] < start[axis]:
            raise ValueError(f"fn.readers.numpy: {name}: the region's end {end} is before its start {start}")
        if (start[axis] < 0 or end[axis] > extent) and policy == "error":
            raise ValueError(f"fn.readers.numpy: {name}: the region [{start}, {end}) is out of the array's bounds "
                             f"{list(shape)} (out_of_bounds_policy='error')")
        if policy == "trim_to_shape":
            start[axis], end[axis] = min(max(start[axis], 0), extent), min(max(end[axis], 0), extent)
    return start, end


def _cut(array: np.ndarray, start: list[int], end: list[int], fill_value) -> np.ndarray:
    """``array[start:end]``, the part outside the array ``fill_value``."""
    out = np.full([e - s for s, e in zip(start, end)], fill_value, dtype=array.dtype)
    source = tuple(slice(max(s, 0), min(e, n)) for s, e, n in zip(start, end, array.shape))
    target = tuple(slice(max(s, 0) - s, max(s, 0) - s + max(0, min(e, n) - max(s, 0)))
                   for s, e, n in zip(start, end, array.shape))
    if all(t.stop > t.start for t in target):
        out[target] = array[source]
    return out


def _roi_settings(roi_start, roi_end, roi_shape, rel_roi_start, rel_roi_end, rel_roi_shape, roi_axes) -> dict | None:
    given = {"roi_start": roi_start, "roi_end": roi_end, "roi_shape": roi_shape, "rel_roi_start": rel_roi_start,
             "rel_roi_end": rel_roi_end, "rel_roi_shape": rel_roi_shape}
    for key, value in given.items():
        if value is not None and not isinstance(value, (list, tuple, int, float)):
            raise NotImplementedError(f"fastload.compat.dali: fn.readers.numpy: {key} as a per-sample input is not "
                                      f"supported (a list of numbers is)")
    listed = {k: (list(v) if isinstance(v, (list, tuple)) else [v]) if v is not None else None
              for k, v in given.items()}
    absolute = any(listed[k] is not None for k in ("roi_start", "roi_end", "roi_shape"))
    relative = any(listed[k] is not None for k in ("rel_roi_start", "rel_roi_end", "rel_roi_shape"))
    if absolute and relative:
        raise ValueError("fn.readers.numpy: absolute (roi_*) and relative (rel_roi_*) region arguments cannot be "
                         "mixed")
    prefix = "rel_roi_" if relative else "roi_"
    if listed[prefix + "end"] is not None and listed[prefix + "shape"] is not None:
        raise ValueError(f"fn.readers.numpy: {prefix}end and {prefix}shape are mutually exclusive")
    if not absolute and not relative:
        return None
    axes = [int(a) for a in (roi_axes if isinstance(roi_axes, (list, tuple)) else [roi_axes])] if roi_axes else []
    return {"relative": relative, "start": listed[prefix + "start"], "end": listed[prefix + "end"],
            "shape": listed[prefix + "shape"], "axes": axes}


@operator("readers.numpy", "readers.Numpy", aliases={"numpy_reader": "NumpyReader"})
def readers_numpy(*, file_root=None, files=None, file_list=None, file_filter="*.npy", roi_start=None, roi_end=None,
                  roi_shape=None, rel_roi_start=None, rel_roi_end=None, rel_roi_shape=None, roi_axes=(),
                  fill_value=0.0, out_of_bounds_policy="error", shard_id=0, num_shards=1, random_shuffle=False,
                  initial_fill=1024, shuffle_after_epoch=False, stick_to_shard=False, pad_last_batch=False, seed=-1,
                  name=None, device="cpu", **hints):
    """``fn.readers.numpy``: each .npy file's array (its dtype and shape), or its region of interest."""
    operator = "fn.readers.numpy"
    check_args(operator, hints, {"use_o_direct", "cache_header_information", "register_buffers"})
    if device != "cpu":
        raise NotImplementedError(f"fastload.compat.dali: {operator}(device='gpu') (GPUDirect Storage) is not "
                                  f"supported; read on the CPU and move the arrays with .gpu()")
    policy = str(out_of_bounds_policy)
    if policy not in ("error", "pad", "trim_to_shape"):
        raise ValueError(f"{operator}: out_of_bounds_policy must be 'error', 'pad' or 'trim_to_shape', not {policy!r}")
    roi = _roi_settings(roi_start, roi_end, roi_shape, rel_roi_start, rel_roi_end, rel_roi_shape, roi_axes)
    if files is not None and file_list is not None:
        raise ValueError(f"{operator}: files and file_list are mutually exclusive")
    if files is not None:
        listed = [files] if isinstance(files, str) else [str(f) for f in files]
        base = file_root or ""
    elif file_list is not None:
        with open(file_list) as handle:
            listed = [line.rstrip("\r\n") for line in handle if line.strip()]
        base = file_root if file_root else os.path.dirname(str(file_list))
    elif file_root is not None:
        listed, base = _list_npy(str(file_root), str(file_filter)), str(file_root)
    else:
        raise ValueError(f"{operator} needs file_root, files or file_list")
    samples = [(os.path.join(base, file), k) for k, file in enumerate(listed)]
    spec = _spec(operator, samples, None, names=listed, listed_shuffle=True, **_order_args(locals()))

    def array(ctx, op):
        data, index = ctx.readers[op.id]
        try:
            value = _npy_array(data)
            if roi is not None:
                value = _cut(value, *_roi(value.shape, roi, policy, listed[index]), fill_value)
        except ValueError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error
        return torch.from_numpy(value)

    return ReaderOp("readers.numpy", array, spec, num_outputs=1).outputs[0]


@operator("decoders.numpy", "decoders.Numpy")
def decoders_numpy(data, *, dtype=None, device="cpu", **args):
    """``fn.decoders.numpy``: the array of the .npy file (format version 1) whose bytes are the input (C or
    Fortran order, read in its logical shape); with ``dtype``, converted to it as ``fn.cast`` converts (DALI's
    ConvertSat, as its decoder does)."""
    from ..engine import conversions
    from .types import torch_dtype
    operator = "fn.decoders.numpy"
    check_args(operator, args, set())
    _device(operator, device)
    target = torch_dtype(dtype) if dtype is not None else None

    def decode(ctx, op, encoded):
        data = encoded.to(torch.uint8).numpy().tobytes()
        try:
            if len(data) < 10 or data[1:6] != b"NUMPY" or data[6] != 1:
                raise ValueError("not a .npy file of format version 1 (the one DALI decodes)")
            value = torch.from_numpy(_npy_array(data))
        except ValueError as error:
            raise DecodeError(ctx.index, ctx.name, f"{operator}: {error}") from error
        return conversions.cast(value, target) if target is not None else value

    return Op("decoders.numpy", decode, [data], {}, fusable=False).outputs[0]


# -------------------------------------------------------------------------------------------- mxnet

RECORDIO_MAGIC = 0xCED7230A


def _recordio_ranges(operator: str, paths: list[str], index_path: str) -> list[tuple[int, int, int]]:
    """(file number, offset, size) of each record, as DALI's RecordIOLoader reads its one index file: the
    ``index offset`` pairs' offsets (into the files taken as one, back to back), sorted; a record runs to the
    next offset (the last to the end), one of 0 bytes is left out."""
    try:
        bounds = [0]
        for path in paths:
            bounds.append(bounds[-1] + os.path.getsize(path))
        with open(index_path) as file:
            words = file.read().split()
    except OSError as error:
        raise ValueError(f"{operator}: {error}") from None
    try:
        offsets = sorted(int(word) for word in words[1::2][:len(words) // 2])
    except ValueError:
        raise ValueError(f"{operator}: {index_path}: expected 'index offset' lines") from None
    if not offsets:
        raise ValueError(f"{operator}: RecordIO index file doesn't contain any indices ({index_path})")
    ranges, number = [], 0
    for at, offset in enumerate(offsets):
        if at + 1 < len(offsets) and offset >= bounds[number + 1]:
            number += 1
        elif at + 1 == len(offsets) and len(offsets) > 1 and offset >= bounds[number + 1]:
            number += 1
        end = offsets[at + 1] if at + 1 < len(offsets) else bounds[-1]
        if end - offset:
            ranges.append((number, offset - bounds[number], end - offset))
    return ranges


def _recordio_sample(record: bytes) -> tuple[torch.Tensor, torch.Tensor]:
    """(image bytes uint8, label float32) of one image record: magic, length (its top 3 bits the part
    flag), then ImageRecordIOHeader (flag, label, two ids) and, with flag > 0, ``flag`` float32 labels
    before the image; flag 0: the header's label, shape [1]."""
    import struct
    if len(record) < 32:
        raise ValueError(f"a record of {len(record)} bytes (a RecordIO image record has at least 32)")
    magic, length_flag, flag, label = struct.unpack_from("<IIIf", record)
    if magic != RECORDIO_MAGIC:
        raise ValueError("Invalid RecordIO: wrong magic number")
    if length_flag >> 29:
        raise ValueError("a record split in parts (its data holds the magic number, or it is over 512 MiB): "
                         "not supported (DALI 2.4 misreads the padding between parts)")
    length = length_flag & ((1 << 29) - 1)
    labels_size = 4 * flag
    if length < 24 + labels_size or 8 + length > len(record):
        raise ValueError(f"the record's length {length} does not hold its header, {flag} labels and the bytes read")
    data = record[32:8 + length]
    labels = np.frombuffer(data[:labels_size], dtype="<f4").copy() if flag else np.array([label], np.float32)
    return torch.frombuffer(bytearray(data[labels_size:]), dtype=torch.uint8) if len(data) > labels_size else \
        torch.zeros(0, dtype=torch.uint8), torch.from_numpy(labels.astype(np.float32))


@operator("readers.mxnet", "readers.MXNet", aliases={"mxnet_reader": "MXNetReader"})
def readers_mxnet(*, path=None, index_path=None, shard_id=0, num_shards=1, random_shuffle=False, initial_fill=1024,
                  shuffle_after_epoch=False, stick_to_shard=False, pad_last_batch=False, seed=-1, name=None,
                  device="cpu", **hints):
    """``fn.readers.mxnet``: (image bytes uint8 [n], label float32 [1] or [flag]) per record of MXNet RecordIO
    files, in the order of DALI's RecordIOLoader (one index file of ``index offset`` lines over the files)."""
    operator = "fn.readers.mxnet"
    check_args(operator, hints, set())
    _device(operator, device)
    paths = _paths(path, "path", operator)
    indexes = _paths(index_path, "index_path", operator)
    if len(indexes) != 1:
        raise ValueError(f"{operator}: RecordIOReader supports only a single index file ({len(indexes)} given)")
    ranges = _recordio_ranges(operator, paths, indexes[0])
    samples = [(f"{paths[number]} at index {offset}", k) for k, (number, offset, _) in enumerate(ranges)]

    def read(index: int) -> bytes:
        number, offset, size = ranges[index]
        try:
            data = b""
            while len(data) < size and number < len(paths):  # a range past a file's end goes on in the next
                data += _read_range(paths[number], offset, size - len(data))
                number, offset = number + 1, 0
            return data
        except OSError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    spec = _spec(operator, samples, read, **_order_args(locals()))

    def parse(ctx, op):
        data, index = ctx.readers[op.id]
        try:
            return _recordio_sample(data)
        except ValueError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    return ReaderOp("readers.mxnet", parse, spec, num_outputs=2).outputs


# --------------------------------------------------------------------------------------- caffe, caffe2

class _LMDB:
    """The records of LMDB environments, as DALI's LMDBLoader reads them: each environment's entries in
    its key order, environment after environment; a record's value read when asked (one read-only
    environment per folder, opened once)."""

    def __init__(self, operator: str, paths: list[str]):
        try:
            import lmdb
        except ImportError:
            raise NotImplementedError(f"fastload.compat.dali: {operator} reads LMDB with the lmdb module, which is "
                                      f"not installed (pip install lmdb)") from None
        import threading
        self.paths, self.envs, self.keys, self.lock = paths, [], [], threading.Lock()
        for path in paths:
            try:
                env = lmdb.open(path, readonly=True, lock=False, readahead=False, max_readers=1)
            except lmdb.Error as error:
                raise ValueError(f"{operator}: LMDB Error: {error}, with file: {path}") from None
            with env.begin() as txn:
                self.keys += [(len(self.envs), bytes(key)) for key in txn.cursor().iternext(keys=True, values=False)]
            self.envs.append(env)

    def name(self, index: int) -> str:
        number, key = self.keys[index]
        return f"{self.paths[number]} at key {key.split(bytes(1))[0].decode('utf-8', 'replace')}"

    def read(self, index: int) -> bytes:
        number, key = self.keys[index]
        with self.lock, self.envs[number].begin() as txn:
            value = txn.get(key)
        if value is None:
            raise DecodeError(index, self.name(index), "the record is gone from the LMDB")
        return bytes(value)


def _lmdb_reader(operator: str, name: str, path, parse: Callable, count: int, args: dict):
    paths = _paths(path, "path", operator)
    records = _LMDB(operator, paths)
    samples = [(records.name(k), k) for k in range(len(records.keys))]
    spec = _spec(operator, samples, records.read, **_order_args(args))

    def run(ctx, op):
        data, index = ctx.readers[op.id]
        try:
            return parse(data)
        except ValueError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    outputs = ReaderOp(name, run, spec, num_outputs=count).outputs
    return outputs[0] if count == 1 else outputs


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _caffe_datum(data: bytes, image: bool, label: bool) -> tuple:
    """A caffe.Datum's (image, label): ``data`` as uint8 [n] where it is encoded (``encoded`` absent or
    true), else [height, width, channels] as DALI shapes it; ``label`` as int32 [1]."""
    from ...tfrecords import proto_fields, varints
    fields: dict[int, object] = {}
    for number, wire, value in proto_fields(data):
        if number in (1, 2, 3, 5, 7) and wire == 0:
            fields[number] = value
        elif number == 4 and wire == 2:
            fields[4] = value
        elif number in (1, 2, 3, 5, 7) and wire == 2:
            fields[number] = varints(wire, value)[-1]
    out = []
    if image:
        if 4 not in fields:
            raise ValueError("the Datum has no data (DALI 2.4 leaves the image output unset there)")
        pixels = bytes(fields[4])
        if 7 in fields and not fields[7]:
            shape = tuple(_int32(fields.get(k, 0)) for k in (2, 3, 1))
            if math.prod(shape) != len(pixels) or min(shape) < 0:
                raise ValueError(f"the Datum's {len(pixels)} raw bytes are not its height x width x channels "
                                 f"{list(shape)}")
            out.append(torch.frombuffer(bytearray(pixels), dtype=torch.uint8).reshape(shape) if pixels else
                       torch.zeros(shape, dtype=torch.uint8))
        else:
            out.append(torch.frombuffer(bytearray(pixels), dtype=torch.uint8) if pixels else
                       torch.zeros(0, dtype=torch.uint8))
    if label:
        if 5 not in fields:
            raise ValueError("the Datum has no label (DALI 2.4 leaves the label output unset there)")
        out.append(torch.tensor([_int32(fields[5])], dtype=torch.int32))
    return tuple(out)


@operator("readers.caffe", "readers.Caffe", aliases={"caffe_reader": "CaffeReader"})
def readers_caffe(*, path=None, image_available=True, label_available=True, shard_id=0, num_shards=1,
                  random_shuffle=False, initial_fill=1024, stick_to_shard=False, pad_last_batch=False, seed=-1,
                  name=None, device="cpu", **hints):
    """``fn.readers.caffe``: per record of Caffe LMDBs (``caffe.Datum``), its image (encoded bytes, or raw
    pixels as [height, width, channels]) and int32 label [1], as ``image_available`` / ``label_available``
    say."""
    operator = "fn.readers.caffe"
    check_args(operator, hints, set())
    _device(operator, device)
    image, label = bool(image_available), bool(label_available)
    if not image and not label:
        raise ValueError(f"{operator}: image_available and label_available are both False: no output")
    return _lmdb_reader(operator, "readers.caffe", path, lambda data: _caffe_datum(data, image, label),
                        int(image) + int(label), {**locals(), "shuffle_after_epoch": False})


C2_FLOAT, C2_INT32, C2_BYTE, C2_STRING, C2_INT64 = 1, 2, 3, 4, 10  # caffe2.TensorProto.DataType


def _tensor_proto(message: bytes) -> dict:
    """A caffe2.TensorProto's dims, data_type (FLOAT by default), float_data, int32_data, byte_data,
    string_data and int64_data."""
    import struct

    from ...tfrecords import proto_fields, varints
    proto = {"dims": [], "type": C2_FLOAT, "float": [], "int32": [], "bytes": b"", "strings": [], "int64": []}
    for number, wire, value in proto_fields(message):
        if number == 1 and wire in (0, 2):
            proto["dims"] += [_int64(v) for v in varints(wire, value)]
        elif number == 2 and wire in (0, 2):
            proto["type"] = varints(wire, value)[-1]
        elif number == 3 and wire in (2, 5):
            proto["float"] += list(struct.unpack(f"<{len(value) // 4}f", value[:len(value) // 4 * 4]))
        elif number == 4 and wire in (0, 2):
            proto["int32"] += [_int32(v) for v in varints(wire, value)]
        elif number == 5 and wire == 2:
            proto["bytes"] = bytes(value)
        elif number == 6 and wire == 2:
            proto["strings"].append(bytes(value))
        elif number == 10 and wire in (0, 2):
            proto["int64"] += [_int64(v) for v in varints(wire, value)]
    return proto


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _c2_values(proto: dict, what: str) -> torch.Tensor:
    """A FLOAT, INT32 or INT64 proto's values as float32, int32 or int64 [n]."""
    kinds = {C2_FLOAT: ("float", np.float32), C2_INT32: ("int32", np.int32), C2_INT64: ("int64", np.int64)}
    if proto["type"] not in kinds:
        raise ValueError(f"Unsupported data type {proto['type']} in {what}")
    field, dtype = kinds[proto["type"]]
    return torch.from_numpy(np.array(proto[field], dtype=dtype).reshape(-1))


def _caffe2_protos(data: bytes, image: bool, label_type: int, num_labels: int, additional: int,
                   bbox: bool) -> tuple:
    """A caffe2.TensorProtos record's outputs, as DALI's Caffe2Parser reads them (see readers_caffe2)."""
    from ...tfrecords import proto_fields
    protos = [_tensor_proto(value) for number, wire, value in proto_fields(data) if number == 1 and wire == 2]

    def proto(at: int, what: str) -> dict:
        if at >= len(protos):
            raise ValueError(f"the record has {len(protos)} TensorProtos, none for {what}")
        return protos[at]

    out, at = [], 0
    if image:
        first = proto(0, "the image")
        if first["type"] == C2_STRING and first["strings"]:
            out.append(torch.frombuffer(bytearray(first["strings"][0]), dtype=torch.uint8) if first["strings"][0]
                       else torch.zeros(0, dtype=torch.uint8))
        elif first["type"] == C2_BYTE and len(first["dims"]) >= 2:
            dims = first["dims"]
            shape = (dims[0], dims[1], dims[2] if len(dims) == 3 else 1)
            if math.prod(shape) != len(first["bytes"]) or min(shape) < 0:
                raise ValueError(f"the image's {len(first['bytes'])} bytes are not its dims {list(shape)}")
            out.append(torch.frombuffer(bytearray(first["bytes"]), dtype=torch.uint8).reshape(shape)
                       if first["bytes"] else torch.zeros(shape, dtype=torch.uint8))
        else:
            raise ValueError("the image proto is neither STRING (encoded) nor BYTE with dims (DALI 2.4 leaves the "
                             "image output unset there)")
        at = 1
    if label_type != 4:
        labels = proto(at, "the label")
        if labels["type"] not in (C2_FLOAT, C2_INT32):
            raise ValueError("Unsupported label data type")
        values = _c2_values(labels, "the label")
        if label_type == 0:
            if values.numel() != 1:
                raise ValueError(f"a SINGLE_LABEL label proto holds {values.numel()} values, not 1")
            out.append(values)
        else:  # MULTI_LABEL_DENSE
            out.append(values)
        at += 1
    for k in range(additional):
        out.append(_c2_values(proto(at + k, f"additional input {k}"), f"additional input {k}"))
    if not bbox and len(protos) == at + additional + 1:
        raise ValueError("a proto after the additional inputs, which DALI 2.4 takes for a bounding box (and fails "
                         "on without bbox=True)")
    if bbox:
        if len(protos) != at + additional + 1:
            raise ValueError("no bounding-box proto after the additional inputs (DALI 2.4 leaves the bbox output "
                             "unset there)")
        box = protos[-1]
        if box["type"] != C2_INT32 or len(box["int32"]) != 4:
            raise ValueError("the bounding-box proto is not 4 INT32 values")
        out.append(_c2_values(box, "the bounding box"))
    return tuple(out)


@operator("readers.caffe2", "readers.Caffe2", aliases={"caffe2_reader": "Caffe2Reader"})
def readers_caffe2(*, path=None, image_available=True, label_type=0, num_labels=1, additional_inputs=0, bbox=False,
                   shard_id=0, num_shards=1, random_shuffle=False, initial_fill=1024, stick_to_shard=False,
                   pad_last_batch=False, seed=-1, name=None, device="cpu", **hints):
    """``fn.readers.caffe2``: per record of Caffe2 LMDBs (``caffe2.TensorProtos``): the image (protos[0]:
    STRING -> its first string's bytes, BYTE -> raw [dims0, dims1, dims2 or 1]), the label (the next proto,
    INT32 or FLOAT: SINGLE_LABEL (0) its one value [1], MULTI_LABEL_DENSE (2) all its values, NO_LABEL (4)
    none; the sparse types 1 and 3, on which DALI 2.4 fails, are refused), ``additional_inputs`` more protos
    (FLOAT, INT32, INT64) and, with ``bbox``, the last proto's 4 INT32 values."""
    operator = "fn.readers.caffe2"
    check_args(operator, hints, set())
    _device(operator, device)
    label_type, num_labels, additional = int(label_type), int(num_labels), int(additional_inputs)
    if label_type not in range(5):
        raise ValueError(f"{operator}: label_type must be 0 to 4, not {label_type}")
    if label_type in (1, 3):
        raise NotImplementedError(f"fastload.compat.dali: {operator}: label_type={label_type} (sparse labels) is not "
                                  f"supported: DALI 2.4 fails on it (its sparse label tensor has no type; the "
                                  f"weighted one's weights are read as a bounding box)")
    image = bool(image_available)
    count = int(image) + int(label_type != 4) + additional + int(bool(bbox))
    if not count:
        raise ValueError(f"{operator}: no output (no image, NO_LABEL, no additional inputs, no bbox)")
    return _lmdb_reader(operator, "readers.caffe2", path, lambda data: _caffe2_protos(
        data, image, label_type, num_labels, additional, bool(bbox)), count, {**locals(), "shuffle_after_epoch": False})


# ----------------------------------------------------------------------------------------- sequence

def _streams(operator: str, root: str) -> list[list[str]]:
    """DALI's streams: file_root's folders in sorted order, each its image files (the file reader's
    extensions, any case) sorted by name; files directly in file_root are not frames."""
    from .operators import IMAGE_EXTENSIONS
    try:
        folders = sorted(entry.path for entry in os.scandir(root) if entry.is_dir())
        return [[os.path.join(folder, name) for name in sorted(entry.name for entry in os.scandir(folder)
                                                                if entry.is_file())
                 if name.lower().endswith(IMAGE_EXTENSIONS)] for folder in folders]
    except OSError as error:
        raise ValueError(f"{operator}: {error}") from None


@operator("readers.sequence", "readers.Sequence", aliases={"sequence_reader": "SequenceReader"})
def readers_sequence(*, file_root=None, sequence_length=None, step=1, stride=1, image_type=None, shard_id=0,
                     num_shards=1, random_shuffle=False, initial_fill=1024, stick_to_shard=False, pad_last_batch=False,
                     seed=-1, name=None, device="cpu", **hints):
    """``fn.readers.sequence``: per sample, ``sequence_length`` frames of one stream (file_root's folders),
    ``stride`` frames apart, decoded and stacked as FHWC uint8; a stream's sequences start ``step`` frames
    apart and only whole ones are read (none crosses a stream's end)."""
    from .decoding import decode
    from .types import image_type_name
    operator = "fn.readers.sequence"
    check_args(operator, hints, set())
    _device(operator, device)
    if file_root is None or sequence_length is None:
        raise ValueError(f"{operator} needs file_root and sequence_length")
    length, step, stride = int(sequence_length), int(step), int(stride)
    if length < 1 or step < 1 or stride < 1:
        raise ValueError(f"{operator}: sequence_length, step and stride must be positive "
                         f"({length}, {step}, {stride})")
    kind = image_type_name(image_type) if image_type is not None else "RGB"
    sequences = []
    for frames in _streams(operator, str(file_root)):
        start = 0
        while start + (length - 1) * stride < len(frames):
            sequences.append([frames[start + k * stride] for k in range(length)])
            start += step
    samples = [(f"{frames[0]} ({length} frames)", k) for k, frames in enumerate(sequences)]

    def read(index: int) -> tuple:
        try:
            return tuple(_read_range(frame, 0, os.path.getsize(frame)) for frame in sequences[index])
        except OSError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    spec = _spec(operator, samples, read, listed_shuffle=True,
                 **_order_args({**locals(), "shuffle_after_epoch": False}))

    def frames(ctx, op):
        data, index = ctx.readers[op.id]
        try:
            decoded = [decode(frame, kind) for frame in data]
            if len({tuple(frame.shape) for frame in decoded}) > 1:
                raise ValueError(f"frames of different shapes {sorted({tuple(f.shape) for f in decoded})}")
            return torch.stack(decoded)
        except ValueError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    return _LaidOutReader("readers.sequence", frames, spec, ("FHWC",)).outputs[0]
