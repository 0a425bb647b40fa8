"""DALI's readers of record files: ``fn.readers.tfrecord``, ``fn.readers.webdataset``, ``fn.readers.mxnet``
and ``fn.readers.sequence`` here; ``fn.readers.numpy`` and ``fn.decoders.numpy`` in ``numpy_readers``,
``fn.readers.caffe`` and ``caffe2`` (LMDB) in ``lmdb_readers`` (imported here, so that their declarations are
made with these).

Each is one reader op (a ``ReaderOp``, which the pipeline runs as its reader, with DALI's order, shards and
``reader_meta``: ``record_specs``) whose spec reads a sample's bytes (``RecordSpec.read``) and whose outputs are
that sample's tensors. The rules, measured against DALI 2.4 on the CPU (tests/compat/test_dali_record_readers.py):

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
* mxnet: one index file of ``index offset`` pairs whose offsets run over the files back to back, sorted
  (a record runs to the next offset; one of 0 bytes is left out); per record the image bytes and float32
  labels ([1]: the header's; [flag]: the ones before the image). A record split in parts (data holding
  the magic number, or over 512 MiB) is refused: DALI 2.4 misreads the padding between parts.
* sequence: streams are file_root's folders (sorted), frames their image files (the file reader's
  extensions, any case) sorted by name; a stream's sequences start ``step`` frames apart, ``stride``
  frames between a sequence's frames, whole sequences only; frames decoded as ``fn.decoders.image`` does,
  stacked FHWC. The list is shuffled first with ``random_shuffle``, as the file loader's.

"""

from __future__ import annotations

import math
import os

import numpy as np
import torch

from ...errors import DecodeError
from ...tfrecords import parse_dali_index, parse_example, unframe
from ..engine.graph import ReaderOp
from . import lmdb_readers, numpy_readers  # noqa: F401  (their @operator declarations)
from . import tfrecord as tfrec
from .operators import check_args
from .record_specs import LaidOutReader, cpu_only, order_args, read_range, reader_paths, record_spec
from .spec import operator


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
    cpu_only(operator, device)
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
    paths = reader_paths(path, "path", operator)
    samples, ranges = _tfrecord_samples(operator, paths, reader_paths(index_path, "index_path", operator))

    def read(index: int) -> bytes:
        file, offset, size = ranges[index]
        try:
            return unframe(read_range(file, offset, size))
        except (OSError, ValueError) as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    spec = record_spec(operator, samples, read, **order_args(locals()))
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
    cpu_only(operator, device)
    files = reader_paths(paths, "paths", operator)
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
    indexes = reader_paths(index_paths, "index_paths", operator) if index_paths else None
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

    spec = record_spec(operator, samples, read, **order_args(locals()))

    def components(ctx, op):
        data, _ = ctx.readers[op.id]
        return tuple(torch.from_numpy(np.frombuffer(bytearray(part), dtype=torch.empty(0, dtype=t).numpy().dtype))
                     for part, t in zip(data, types_))

    outputs = ReaderOp("readers.webdataset", components, spec, num_outputs=len(sets)).outputs
    return outputs[0] if len(outputs) == 1 else outputs


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
    cpu_only(operator, device)
    paths = reader_paths(path, "path", operator)
    indexes = reader_paths(index_path, "index_path", operator)
    if len(indexes) != 1:
        raise ValueError(f"{operator}: RecordIOReader supports only a single index file ({len(indexes)} given)")
    ranges = _recordio_ranges(operator, paths, indexes[0])
    samples = [(f"{paths[number]} at index {offset}", k) for k, (number, offset, _) in enumerate(ranges)]

    def read(index: int) -> bytes:
        number, offset, size = ranges[index]
        try:
            data = b""
            while len(data) < size and number < len(paths):  # a range past a file's end goes on in the next
                data += read_range(paths[number], offset, size - len(data))
                number, offset = number + 1, 0
            return data
        except OSError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    spec = record_spec(operator, samples, read, **order_args(locals()))

    def parse(ctx, op):
        data, index = ctx.readers[op.id]
        try:
            return _recordio_sample(data)
        except ValueError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    return ReaderOp("readers.mxnet", parse, spec, num_outputs=2).outputs


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
    cpu_only(operator, device)
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
            return tuple(read_range(frame, 0, os.path.getsize(frame)) for frame in sequences[index])
        except OSError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    spec = record_spec(operator, samples, read, listed_shuffle=True,
                 **order_args({**locals(), "shuffle_after_epoch": False}))

    def frames(ctx, op):
        data, index = ctx.readers[op.id]
        try:
            decoded = [decode(frame, kind) for frame in data]
            if len({tuple(frame.shape) for frame in decoded}) > 1:
                raise ValueError(f"frames of different shapes {sorted({tuple(f.shape) for f in decoded})}")
            return torch.stack(decoded)
        except ValueError as error:
            raise DecodeError(index, samples[index][0], str(error)) from error

    return LaidOutReader("readers.sequence", frames, spec, ("FHWC",)).outputs[0]
