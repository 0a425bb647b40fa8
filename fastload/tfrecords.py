"""TFRecord files of tf.train.Example as a source, without TensorFlow: each sample is one record.

A TFRecord file is a run of records: ``length`` (uint64, little-endian),
``masked_crc32c(length)``, ``data``, ``masked_crc32c(data)``. The data of an
image-classification record is a serialized ``tf.train.Example``: a map from
feature names to lists of bytes, floats or int64s. ``TFRecords`` reads the
files once to index them (each record's offset and size, checked against the
CRCs, and its label), caches that index beside the file (or in a cache
folder), and from then on a sample is one ranged read of its record, CRC
checked and parsed for its image bytes. DALI's index files (its
``tfrecord2idx``: one ``offset size`` line per record) are read when given
and checked against the file. Files may be local or behind any fsspec URL,
read indexed or streaming, as tar shards are (``shardfiles.py``).

The Example is parsed by hand (``parse_example``, protobuf's wire format:
varints and length-delimited fields; the three list types): fastload needs
two fields of one message, which does not earn the protobuf runtime and a
generated class. CRC32-C comes from ``google-crc32c`` (Google's C library,
which Google's storage clients use): Python's zlib only has the other CRC-32.
"""

from __future__ import annotations

import os
import struct
from typing import BinaryIO, Callable

import google_crc32c

from .errors import DecodeError
from .shardcache import LOCK_TIMEOUT
from .shardfiles import Sequential, ShardedSource, ShardFiles, is_remote
from .sources import INT64

INDEX_VERSION = 1
IMAGE_FEATURE = "image/encoded"  # TensorFlow's ImageNet TFRecords (models/research/inception), DALI's examples
LABEL_FEATURE = "image/class/label"
UINT64 = (1 << 64) - 1


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC32-C (tensorflow/core/lib/hash/crc32c.h: rotate right by 15, add a constant)."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    """One record as TFRecord writes it."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def unframe(record: bytes) -> bytes:
    """A whole record's data, its length and both CRCs checked (ValueError saying which failed)."""
    if len(record) < 16:
        raise ValueError(f"a record is at least 16 bytes, this one {len(record)} (truncated file?)")
    length, length_crc = struct.unpack("<QI", record[:12])
    if masked_crc(record[:8]) != length_crc:
        raise ValueError("bad CRC of the record's length")
    if len(record) != length + 16:
        raise ValueError(f"the record says {length} bytes of data, its frame holds {len(record) - 16}")
    data = record[12:12 + length]
    if masked_crc(data) != struct.unpack("<I", record[12 + length:])[0]:
        raise ValueError("bad CRC of the record's data (corrupt record)")
    return data


def varint(buffer: bytes, at: int) -> tuple[int, int]:
    """The varint at ``at`` and the offset after it; at most 10 bytes, the value kept to 64 bits as protobuf
    does (ValueError for one cut short or longer)."""
    value = shift = 0
    while True:
        if at >= len(buffer):
            raise ValueError("truncated varint")
        byte = buffer[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value & UINT64, at
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 64 bits")


def proto_fields(message: bytes):
    """(field number, wire type, value) of a protobuf message: varints as ints, length-delimited fields
    and fixed32/fixed64 as bytes. Every length is checked against what the message holds; ValueError for a
    field that runs past its end, a field number 0, or a wire type other than 0, 1, 2 and 5 (3 and 4 are
    the deprecated groups, which tf.train.Example has none of; 6 and 7 do not exist)."""
    at = 0
    while at < len(message):
        tag, at = varint(message, at)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ValueError("a field numbered 0")
        if wire == 0:
            value, at = varint(message, at)
        elif wire in (1, 2, 5):
            if wire == 2:
                size, at = varint(message, at)
            else:
                size = 8 if wire == 1 else 4
            if size > len(message) - at:
                raise ValueError(f"a field of {size} bytes runs past the end of its message")
            value, at = message[at:at + size], at + size
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _message(wire: int, value, what: str) -> bytes:
    """A field that must be length-delimited (a message, a string, a packed list): its bytes, else ValueError."""
    if wire != 2:
        raise ValueError(f"{what} has wire type {wire}, not 2 (length-delimited)")
    return value


def varints(wire: int, value) -> list[int]:
    """The values of a repeated varint field's occurrence: one (wire type 0) or a packed run (2)."""
    if wire == 0:
        return [value]
    items, at = [], 0
    value = _message(wire, value, "an int64_list value")
    while at < len(value):
        item, at = varint(value, at)
        items.append(item)
    return items


def _floats(wire: int, value) -> tuple[float, ...]:
    """A float_list occurrence: one fixed32 (wire type 5) or a packed run (2) of a multiple of 4 bytes."""
    if wire == 5:
        return struct.unpack("<f", value)
    value = _message(wire, value, "a float_list value")
    if len(value) % 4:
        raise ValueError(f"a packed float_list of {len(value)} bytes (not a multiple of 4)")
    return struct.unpack(f"<{len(value) // 4}f", value)


def _feature(message: bytes):
    """A tf.train.Feature's list: bytes_list (1) -> [bytes], float_list (2) -> [float], int64_list (3) ->
    [int] (packed or not; int64 as two's complement). As protobuf reads a oneof: the last kind present
    wins, and occurrences of the same kind merge; unknown fields are skipped."""
    kind, values = None, []
    for number, wire, content in proto_fields(message):
        if number not in (1, 2, 3):
            continue
        content = _message(wire, content, "a Feature's list")
        if number != kind:
            kind, values = number, []
        for field, wire, value in proto_fields(content):
            if field != 1:
                continue
            if kind == 1:
                values.append(_message(wire, value, "a bytes_list value"))
            elif kind == 2:
                values.extend(_floats(wire, value))
            else:
                values.extend(v - (1 << 64) if v >= 1 << 63 else v for v in varints(wire, value))
    return values


def parse_example(data: bytes) -> dict[str, list]:
    """A serialized tf.train.Example as {feature name: list of values} (tensorflow/core/example/
    example.proto and feature.proto: Example.features = 1, Features.feature = 1 (a map: key = 1,
    value = 2)). Raises ValueError only (a truncated varint, a length past the end of its message, a wire
    type out of range or not the field's, a packed list of the wrong byte length, a name not UTF-8): the
    record's error, never the file's."""
    features: dict[str, list] = {}
    for number, wire, message in proto_fields(data):
        if number != 1:
            continue
        for entry_number, wire, entry in proto_fields(_message(wire, message, "Example.features")):
            if entry_number != 1:
                continue
            key, value = "", b""
            for field, wire, content in proto_fields(_message(wire, entry, "a feature map entry")):
                if field == 1:
                    key = _message(wire, content, "a feature's name").decode("utf-8")
                elif field == 2:
                    value = _message(wire, content, "a Feature")
            features[key] = _feature(value)
    return features


def example(features: dict[str, list]) -> bytes:
    """A tf.train.Example serialized from {name: [bytes] | [int] | [float]} (for tests and tools)."""
    def field(number: int, payload: bytes) -> bytes:
        return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload

    entries = b""
    for name, values in features.items():
        if all(isinstance(v, (bytes, bytearray)) for v in values):
            listed = field(1, b"".join(field(1, bytes(v)) for v in values))
        elif all(isinstance(v, int) for v in values):
            if any(not INT64[0] <= v <= INT64[1] for v in values):
                raise ValueError(f"feature {name!r}: an int64_list value outside int64")
            listed = field(3, field(1, b"".join(_encode_varint(v & UINT64) for v in values)))
        else:
            listed = field(2, field(1, struct.pack(f"<{len(values)}f", *values)))
        entries += field(1, field(1, name.encode()) + field(2, listed))
    return field(1, entries)


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def read_dali_index(path: str) -> list[tuple[int, int]]:
    """DALI's tfrecord2idx file: one ``offset size`` line per record (size: the whole framed record)."""
    with open(path) as file:
        return parse_dali_index(file.read(), path)


def parse_dali_index(text: str, path: str) -> list[tuple[int, int]]:
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            fields = line.split()
            if len(fields) != 2 or not all(f.isascii() and f.isdigit() for f in fields):
                raise ValueError(f"{path}, line {number}: expected 'offset size', got {line.strip()!r}")
            records.append((int(fields[0]), int(fields[1])))
    return records


def build_index(path: str | None, stream: BinaryIO | None, image_feature: str, label_feature: str,
                name_feature: str | None = None) -> dict:
    """Every record's (offset, size, label, problem) -- and, given ``name_feature``, its name (the bytes
    feature as text, None where absent) -- from one pass over the file (the local ``path``, or read once as
    ``stream``). A record whose data CRC, Example, image or label is bad is indexed with the reason (its
    own error). The framing is trusted only as far as it checks: a length whose CRC fails, or that runs
    past the file's end, ends the index at that record, its problem saying so -- the length is compared
    with the bytes the file holds before anything of that size is read or allocated."""
    records = []
    with Sequential(path, stream) as file:
        while head := file.take(12):
            offset = file.at - len(head)
            if len(head) < 12:
                records.append([offset, len(head), -1, "the file ends inside a record's header (truncated)"])
                break
            length = struct.unpack("<Q", head[:8])[0]
            if masked_crc(head[:8]) != struct.unpack("<I", head[8:])[0]:
                records.append([offset, 12, -1, "bad CRC of the record's length: the rest of the file cannot "
                                                "be framed"])
                break
            left = file.left()  # (a stream: None; its chunks end where its bytes do)
            rest = b"" if left is not None and length + 4 > left else file.take(length + 4)
            if len(rest) < length + 4:  # before anything of that length is read, where the size is known
                follow = left if left is not None and length + 4 > left else len(rest)
                records.append([offset, 12 + follow, -1, f"the file ends inside this record (truncated: its length "
                                                         f"says {length} bytes of data, {follow} follow its header)"])
                break
            label, problem, features = -1, None, {}
            try:
                features = parse_example(unframe(head + rest))
                label, problem = _label_and_problem(features, image_feature, label_feature)
            except ValueError as error:
                problem = f"{error}"
            records.append([offset, 16 + length, label, problem])
            if name_feature is not None:
                names = features.get(name_feature)
                records[-1].append(names[0].decode("utf-8", "replace") if names and isinstance(names[0], bytes)
                                   else None)
    features = [image_feature, label_feature] + ([name_feature] if name_feature is not None else [])
    return {"version": INDEX_VERSION, "features": features, "records": records}


def is_whole_index(index: dict, features: list) -> bool:
    """Whether a cached index is one of this version, for these features, with well-formed records (a
    malformed one is rebuilt): offsets and sizes non-negative ints, labels ints, problems None or text."""
    records = index.get("records")
    return index.get("version") == INDEX_VERSION and index.get("features") == features and \
        isinstance(records, list) and all(
            isinstance(r, list) and len(r) >= 4 and type(r[0]) is int and type(r[1]) is int and r[0] >= 0 and
            r[1] >= 0 and type(r[2]) is int and (r[3] is None or isinstance(r[3], str)) for r in records)


def _label_and_problem(features: dict, image_feature: str, label_feature: str) -> tuple[int, str | None]:
    if not features.get(image_feature) or not isinstance(features[image_feature][0], bytes):
        return -1, f"no bytes feature {image_feature!r} (features: {_names(features)})"
    labels = features.get(label_feature)
    if not labels or not isinstance(labels[0], int):
        return -1, f"no int64 feature {label_feature!r} (features: {_names(features)})"
    return labels[0], None


def _names(features: dict) -> str:
    """The feature names for a problem's message, bounded (an Example may hold thousands, long ones)."""
    names = sorted(features)
    shown = ", ".join(repr(name[:40]) for name in names[:10])
    return shown + (f" and {len(names) - 10} more" if len(names) > 10 else "")


class TFRecords(ShardedSource):
    """TFRecord files of tf.train.Example as a source: ``fastload.DataLoader(TFRecords("train-*"), ...)``.

    Each record is a sample: its image the first value of the bytes feature ``image_feature``
    (``"image/encoded"``), its label the first value of the int64 feature ``label_feature``
    (``"image/class/label"``) plus ``label_offset`` -- TensorFlow's ImageNet TFRecords number classes
    1..1000 (0 is "background"); ``label_offset=-1`` gives torchvision's 0..999. Records are numbered file
    by file, so the order, sharding, resume and augmentation rules are a folder's (``fastload.Source``).
    A record with a bad CRC, a malformed Example, no image or no label, or cut by the end of the file, is
    a DecodeError naming ``file:record N`` when read (``on_error="skip"`` skips and reports it).

    Args:
        paths: a file or fsspec URL, a brace pattern, a glob, or a list of them.
        index_paths: DALI index files (``tfrecord2idx``), one per file, checked against the files.
        transform, target_transform: as torchvision's.
        image_feature, label_feature, label_offset: see above.
        name_feature: a bytes feature naming each record (``"image/filename"``, which rocAL's TFRecord reader
            keys records by), kept in ``self.names`` (None for a record without it).
        cache_dir, timeout, retries, backoff, mode: where the files are and how they are read, as for
            ``TarShards`` (with ``shuffle_buffer``, ``read_ahead``, ``cache_limit``, ``storage_options`` and
            ``lock_timeout``): local files indexed (a record one ``pread``), remote ones streamed by default
            (whole files into a local cache, each rank a run of them); fastload's own index (offsets and
            labels) goes beside a local file, else to ``cache_dir``.
        **order: ``shuffle``, ``seed``, ``drop_last``, ``even_shards``, ``rank``, ``world_size``: see
            ``fastload.Source``.
    """

    def __init__(self, paths, index_paths=None, transform: Callable | None = None,
                 target_transform: Callable | None = None, *, image_feature: str = IMAGE_FEATURE,
                 label_feature: str = LABEL_FEATURE, label_offset: int = 0, name_feature: str | None = None,
                 cache_dir: str | None = None,
                 timeout: float = 60.0, retries: int = 3, mode: str | None = None, shuffle_buffer: int = 1000,
                 read_ahead: int = 2, cache_limit: int = 16 << 30, storage_options: dict | None = None,
                 backoff: float = 0.25, lock_timeout: float = LOCK_TIMEOUT, **order):
        self.storage = ShardFiles(paths, "fastload.TFRecords", cache_dir=cache_dir, timeout=timeout,
                                  retries=retries, mode=mode, cache_limit=cache_limit,
                                  storage_options=storage_options, backoff=backoff,
                                  lock_timeout=lock_timeout)
        self.files = self.storage.paths
        self.shuffle_buffer, self.read_ahead = shuffle_buffer, read_ahead
        if index_paths is not None:
            index_paths = [index_paths] if isinstance(index_paths, (str, os.PathLike)) else list(index_paths)
            if len(index_paths) != len(self.files):
                raise ValueError(f"fastload.TFRecords: {len(index_paths)} index files for {len(self.files)} "
                                 f"TFRecord files (one each, in the same order)")
        if isinstance(label_offset, bool) or not isinstance(label_offset, int):
            raise TypeError(f"fastload.TFRecords: label_offset must be an int, not {label_offset!r}")
        self.image_feature = image_feature
        self.ranges: list[tuple[int, int, int]] = []  # per sample: (file number, offset, size) of its record
        self.problems: dict[int, str] = {}
        self.names: list[str | None] = []  # per sample, with name_feature: the record's name
        features = [image_feature, label_feature] + ([name_feature] if name_feature is not None else [])
        samples = []
        for number, path in enumerate(self.files):
            index = self.storage.index(
                number, "tfrecord-index", ".fastload-idx.json", lambda index: is_whole_index(index, features),
                lambda local, stream: build_index(local, stream, image_feature, label_feature, name_feature))
            if index_paths is not None:
                dali = self._dali_index(os.fspath(index_paths[number]))
                ours = [(entry[0], entry[1]) for entry in index["records"]]
                if dali != ours[:len(dali)] or len(dali) != len(ours):
                    raise ValueError(f"fastload.TFRecords: {index_paths[number]} does not describe {path} "
                                     f"({len(dali)} records listed, {len(ours)} found; stale index?)")
            for record, (offset, size, label, problem, *name) in enumerate(index["records"]):
                if name_feature is not None:  # (a record cut short has no name entry)
                    self.names.append(name[0] if name else None)
                if problem is None and not INT64[0] <= label + label_offset <= INT64[1]:
                    problem = f"its label {label} + label_offset {label_offset} is outside int64"
                if problem is not None:
                    self.problems[len(samples)] = problem
                self.ranges.append((number, offset, size))
                samples.append((f"{path}:record {record}", label + label_offset if problem is None else -1))
        super().__init__(samples, transform, target_transform, **order)

    def _repr_parts(self) -> list:
        return [("files", self._paths(vars(self).get("files"))), *super()._repr_parts(),
                ("mode", self._quoted(getattr(vars(self).get("storage"), "mode", None)))]

    @property
    def records(self) -> list[tuple[int, int, int]]:
        """Per sample, (file number, offset, size) of its record: ``ranges``, under its earlier name."""
        return self.ranges

    def _dali_index(self, path: str) -> list[tuple[int, int]]:
        if not is_remote(path):
            return read_dali_index(path)
        fs, inner = self.storage.filesystem(path)
        return parse_dali_index(self.storage.with_retries(lambda: fs.cat_file(inner), path).decode(), path)

    def read(self, index: int) -> bytes:
        """The record's image bytes: one ranged read (``ShardFiles.read``), its CRCs checked, its Example
        parsed."""
        name = self.samples[index][0]
        if index in self.problems:
            raise DecodeError(index, name, self.problems[index])
        try:
            image = parse_example(unframe(self.read_range(index))).get(self.image_feature)
        except ValueError as error:
            raise DecodeError(index, name, str(error)) from error
        if not image or not image[0]:
            raise DecodeError(index, name, f"empty {self.image_feature!r}")
        return image[0]

    @staticmethod
    def write(samples, path) -> str:
        """Write ``samples`` [(image bytes, label)] as one TFRecord file of Examples with the default
        feature names; returns the path."""
        path = os.fspath(path)
        with open(path, "wb") as file:
            for data, label in samples:
                file.write(frame(example({IMAGE_FEATURE: [data], LABEL_FEATURE: [int(label)]})))
        return path
