"""DALI's LMDB readers, ``fn.readers.caffe`` and ``fn.readers.caffe2``, measured against DALI 2.4 on the CPU
(tests/compat/test_dali_record_readers.py):

* caffe: the LMDB environments' records in key order, one environment after the other (the ``lmdb``
  module reads them; without it the reader is refused naming it); a ``caffe.Datum``'s ``data`` is the
  image, encoded bytes [n] unless ``encoded`` is present and false (then raw [height, width, channels]),
  its ``label`` int32 [1]. A record without the data or label asked for is an error (DALI 2.4 leaves that
  output unset).
* caffe2: the same LMDB order; a ``caffe2.TensorProtos``' protos are read in DALI's order (image, label,
  ``additional_inputs``, then a last proto taken for the bounding box whenever one follows). What DALI 2.4
  fails on (the sparse label types 1 and 3; an extra proto without ``bbox=True``) or leaves unset (an image
  proto neither STRING nor BYTE) is refused, by name or as an error naming the record.
"""

from __future__ import annotations

import math
import threading
from typing import Callable

import numpy as np
import torch

from ...errors import DecodeError
from ..engine.graph import ReaderOp
from ..engine.readers import open_lmdb
from .operators import check_args
from .record_specs import cpu_only, order_args, reader_paths, record_spec
from .spec import operator


# --------------------------------------------------------------------------------------- caffe, caffe2

class _LMDB:
    """The records of LMDB environments, as DALI's LMDBLoader reads them: each environment's entries in
    its key order, environment after environment; a record's value read when asked (one read-only
    environment per folder in the process, ``engine.readers.open_lmdb``)."""

    def __init__(self, operator: str, paths: list[str]):
        try:
            import lmdb
        except ImportError:
            raise NotImplementedError(f"fastload.compat.dali: {operator} reads LMDB with the lmdb module, which is "
                                      f"not installed (pip install lmdb)") from None
        self.paths, self.envs, self.keys, self.lock = paths, [], [], threading.Lock()
        for path in paths:
            try:
                env = open_lmdb(lmdb, path)
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
    paths = reader_paths(path, "path", operator)
    records = _LMDB(operator, paths)
    samples = [(records.name(k), k) for k in range(len(records.keys))]
    spec = record_spec(operator, samples, records.read, **order_args(args))

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
    cpu_only(operator, device)
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
    cpu_only(operator, device)
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
