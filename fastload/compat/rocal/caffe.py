"""rocAL's Caffe and Caffe2 LMDB readers (``fn.readers.caffe`` / ``fn.readers.caffe2``, then a decoder
with ``path=``), for classification.

rocAL's rules, from ROCm/rocAL at 0981d5bb (rocAL/source/readers/image/caffe_lmdb_record_reader.cpp and
caffe2_lmdb_record_reader.cpp, the label readers rocAL/source/meta_data/caffe_meta_data_reader.cpp and
caffe2_meta_data_reader.cpp, the messages rocAL/proto/caffe_protos.proto and caffe2_protos.proto):

* ``path`` is an LMDB environment folder (data.mdb, lock.mdb). The samples are its records in LMDB's key
  order (bytewise), read once when the pipeline is built; the decoders' ``path`` names the same folder
  (rocAL_pybind/amd/rocal/decoders.py: source_path=path).
* Caffe: each value is a ``caffe.Datum``; the image is its ``data`` (an encoded image), the label its
  ``label`` (int32, 0 when absent).
* Caffe2: each value is a ``caffe2.TensorProtos``; the image is ``protos[0].byte_data``, the label
  ``protos[1].int32_data[0]``.
* The decoder finds a record again by its key cut at the first '.' plus ".JPEG", as the first key at or
  after that (MDB_SET_RANGE; ``read_image`` in both record readers).
* Sharding, padding and shuffling are the file reader's (fastload's ``RocalOrder``).

Refused by name, where rocAL would read another record's image, mislabel or fail: a key without '.', or
whose ".JPEG" lookup lands on another record (rocAL decodes that record's image under this key's label);
a key holding a NUL byte (rocAL reads keys as C strings); a Caffe record that is an ``AnnotatedDatum``
(rocAL's label reader parses it as a Datum) or holds raw pixels (rocAL decodes ``data`` as an encoded
image); a Caffe2 record without the image's byte_data or a label (rocAL fails on it, or indexes past
``protos``); a record that is no such message. Caffe2 records of no TensorProto are skipped, with a
warning, as rocAL skips them. The detection readers (``bbox=True``) are refused:
rocAL's Caffe reader reads NormalizedBBox's xmax/ymax as a width and height (r = xmin + xmax) from the
first annotation group only, and fastload does not reproduce its boxes through the operators for either.
"""

from __future__ import annotations

import bisect
import os
import struct
import warnings
from dataclasses import dataclass, replace

from ...tfrecords import proto_fields, varints
from ..engine.readers import open_lmdb as shared_lmdb
from .reading import refuse, same_path

PREFIX = "fastload.compat.rocal"


@dataclass(frozen=True)
class CaffeReader:
    """What ``fn.readers.caffe`` / ``fn.readers.caffe2`` record: the LMDB folder and its format."""

    path: str
    caffe2: bool

    sharded = True

    @property
    def name(self) -> str:
        return "readers.caffe2" if self.caffe2 else "readers.caffe"

    def decoder_samples(self, decoder: str, definition, file_root: str, path: str, key_map, num_shards: int):
        """``reading.RecordedReader``: each of rocAL's three decoders has a Caffe and a Caffe2 branch, reading
        its own ``path`` (decoders.py: source_path=path)."""
        refuse(decoder, user_feature_key_map=key_map)
        if not path:
            raise ValueError(f"{PREFIX}: {decoder} after fn.{self.name} reads its own path=...: give it the "
                             f"LMDB folder (rocAL's opens path='' and fails)")
        same_path(decoder, path, self.path, "fn." + self.name)
        records = CaffeRecords(replace(self, path=path))
        return records.samples, records.read


def open_lmdb(reader: CaffeReader):
    """The LMDB environment at ``reader.path``, read-only (the ``lmdb`` package: ``pip install
    torch-fastload[lmdb]``). One per folder in a process, shared by the pipelines that read it, DALI's
    included (``engine.readers.open_lmdb``); it closes when the last reader is gone."""
    try:
        import lmdb
    except ImportError as error:
        raise ImportError(f"{PREFIX}: {reader.name} reads LMDB with the lmdb package: pip install "
                          f"'torch-fastload[lmdb]'") from error
    if not os.path.isfile(os.path.join(reader.path, "data.mdb")):
        raise ValueError(f"{PREFIX}: {reader.name}: {reader.path!r} is not an LMDB folder (no data.mdb)")
    try:
        return shared_lmdb(lmdb, reader.path)
    except lmdb.Error as error:
        raise ValueError(f"{PREFIX}: {reader.name}: cannot open the LMDB at {reader.path!r}: {error}") from error


def _message(value: bytes) -> list[tuple[int, int, object]]:
    return list(proto_fields(value))


def _int32(value: int) -> int:
    value &= (1 << 64) - 1
    value = value - (1 << 64) if value >= 1 << 63 else value
    return value if -2 ** 31 <= value < 2 ** 31 else ((value + 2 ** 31) % 2 ** 32) - 2 ** 31


def caffe_datum(value: bytes) -> tuple[bytes, int]:
    """A caffe.Datum's (encoded image, label): data = 4, label = 5, encoded = 7 (channels 1, height 2,
    width 3 for raw pixels); an AnnotatedDatum (datum = 1, a message) and raw pixels are refused."""
    fields = _message(value)
    if any(number == 1 and wire == 2 for number, wire, _ in fields):
        raise ValueError("an AnnotatedDatum, which rocAL's classification label reader parses as a Datum "
                         "(its label is lost); use a Datum per record")
    data = [content for number, wire, content in fields if number == 4 and wire == 2]
    labels = [content for number, wire, content in fields if number == 5 and wire == 0]
    encoded = [content for number, wire, content in fields if number == 7 and wire == 0]
    if not data:
        raise ValueError("a Datum without data")
    shape = [content for number, wire, content in fields if number in (1, 2, 3) and wire == 0]
    if not (encoded and encoded[-1]) and len(shape) == 3 and shape[0] * shape[1] * shape[2] == len(data[-1]):
        raise ValueError("a Datum of raw pixels (channels x height x width bytes, encoded false); rocAL decodes "
                         "data as an encoded image")
    return bytes(data[-1]), _int32(labels[-1]) if labels else 0


def caffe2_protos(value: bytes) -> tuple[bytes, int]:
    """A caffe2.TensorProtos' (protos[0].byte_data, protos[1].int32_data[0]) (TensorProtos.protos = 1;
    TensorProto.byte_data = 5, int32_data = 4, packed or not)."""
    protos = [content for number, wire, content in _message(value) if number == 1 and wire == 2]
    if not protos:
        raise EmptyRecord()
    image_proto = _message(protos[0])
    image = [content for number, wire, content in image_proto if number == 5 and wire == 2][-1:]
    if not image:
        where = (" (the image is in string_data, where Caffe2 writes encoded images; rocAL reads byte_data only)"
                 if any(number == 6 for number, _, _ in image_proto) else "")
        raise ValueError(f"its first TensorProto has no byte_data{where}; rocAL fails on it (\"Image parsing "
                         f"failed\")")
    if len(protos) < 2:
        raise ValueError("no second TensorProto, the label (rocAL reads protos(1) past the message's end)")
    labels = []
    for number, wire, content in _message(protos[1]):
        if number == 4 and wire in (0, 2):
            labels.extend(varints(wire, content))
    if not labels:
        raise ValueError("its label TensorProto has no int32_data (rocAL's label reader skips the record, then "
                         "fails to find its label)")
    return bytes(image[0]), _int32(labels[0])


class EmptyRecord(ValueError):
    """A Caffe2 record of no TensorProto, which rocAL's readers skip."""


class CaffeRecords:
    """The records of a Caffe or Caffe2 LMDB: ``samples`` [("path:key", label)] and ``read(index)``, a
    record's encoded image."""

    def __init__(self, reader: CaffeReader):
        self.reader = reader
        self._env = open_lmdb(reader)
        parse = caffe2_protos if reader.caffe2 else caffe_datum
        self._keys, self.samples, skipped = [], [], 0
        with self._env.begin(buffers=True) as txn:
            keys = list(txn.cursor().iternext(keys=True, values=False))
            keys = [bytes(key) for key in keys]
            for key, value in txn.cursor():
                key = bytes(key)
                name = f"{reader.path}:{key.decode('utf-8', 'replace')}"
                try:
                    _, label = parse(bytes(value))
                except EmptyRecord:
                    skipped += 1
                    continue
                except (ValueError, struct.error) as error:
                    raise ValueError(f"{PREFIX}: {reader.name}: record {name}: {error}") from None
                self._check_key(key, keys, name)
                self._keys.append(key)
                self.samples.append((name, label))
        if skipped:
            warnings.warn(f"{PREFIX}: {reader.name}: {skipped} records of no TensorProto in {reader.path} are skipped, "
                          f"as rocAL skips them", stacklevel=4)
        if not self.samples:
            raise ValueError(f"{PREFIX}: {reader.name}: the LMDB at {reader.path!r} holds no record")

    def _check_key(self, key: bytes, keys: list[bytes], name: str) -> None:
        """rocAL's decoder looks a record up by its key cut at the first '.' plus ".JPEG", the first key at
        or after it (read_image, MDB_SET_RANGE); a key that does not lead back to itself is refused."""
        where = f"{PREFIX}: {self.reader.name}: record {name}"
        if b"\0" in key:
            raise ValueError(f"{where}: the key holds a NUL byte (rocAL reads keys as C strings)")
        if b"." not in key:
            raise ValueError(f"{where}: the key has no '.'; rocAL's decoder looks records up by the key cut at its "
                             f"first '.' plus \".JPEG\" and would read another record's image")
        lookup = key[:key.index(b".")] + b".JPEG"
        found = bisect.bisect_left(keys, lookup)
        if found == len(keys) or keys[found] != key:
            other = keys[found].decode("utf-8", "replace") if found < len(keys) else "none"
            raise ValueError(f"{where}: rocAL's decoder looks it up as {lookup.decode('utf-8', 'replace')!r} (the "
                             f"key cut at its first '.' plus \".JPEG\", the first key at or after it) and would "
                             f"read the record {other!r} instead")

    def read(self, index: int) -> bytes:
        from ...errors import DecodeError
        parse = caffe2_protos if self.reader.caffe2 else caffe_datum
        with self._env.begin(buffers=False) as txn:
            value = txn.get(self._keys[index])
        if value is None:
            raise DecodeError(index, self.samples[index][0], "the record is gone from the LMDB")
        try:
            return parse(value)[0]
        except (ValueError, struct.error) as error:
            raise DecodeError(index, self.samples[index][0], str(error)) from None
