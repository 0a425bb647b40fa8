"""rocAL's MXNet RecordIO reader (``fn.readers.mxnet``, then ``fn.decoders.image(path=...)``).

rocAL's rules, from ROCm/rocAL at 0981d5bb (rocAL/source/readers/image/mxnet_recordio_reader.cpp, its
label reader rocAL/source/meta_data/mxnet_meta_data_reader.cpp):

* ``path`` is a folder holding the ``.rec`` file and its ``.idx`` (found by extension); both are needed.
  The decoder reads its own ``path`` (rocAL_pybind/amd/rocal/decoders.py: source_path=path).
* The .idx's lines are "key offset"; the keys are not used: the records are those whose offsets it
  lists, read in the order of their offsets, each up to the next one (the last to the file's end).
* A record is RecordIO's: the magic 0xced7230a, a word of (cflag << 29 | length), then ``length`` bytes:
  MXNet's image header (uint32 flag, float32 label, uint64 id, uint64 id2; 24 bytes) and the encoded
  image. rocAL reads single-part records (cflag 0) with flag 0: a record with extra labels (flag > 0)
  is skipped with a warning, and a multi-part one fails when read.
* The label is the header's float label as int32 (truncated toward zero); the record's name, by which
  rocAL pairs image and label, is the header's id.
* Sharding, padding and shuffling are the file reader's (fastload's ``RocalOrder``).

Refused by name, where rocAL would fail, read the wrong record or lose records silently: a folder with
several .rec or .idx files (rocAL takes whichever the file system lists last), an .idx line that is not
two integers (rocAL stops reading the index there), a bad magic, a multi-part record, a record longer
than its chunk, two records with one id (rocAL serves the first one's image for both), and the random-crop
and slice decoders after this reader (rocAL's read ``file_root`` as a folder of images instead).
"""

from __future__ import annotations

import math
import os
import re
import struct
import warnings
from dataclasses import dataclass

from ...read import read_range
from .reading import refuse, same_path

PREFIX = "fastload.compat.rocal"
MAGIC = 0xCED7230A
WORD = struct.Struct("<II")  # magic, cflag << 29 | length
HEADER = struct.Struct("<IfQQ")  # MXNet's IRHeader: flag, label, id, id2
IMAGE_START = WORD.size + HEADER.size


@dataclass(frozen=True)
class MXNetReader:
    """What ``fn.readers.mxnet`` records: the folder of the .rec and .idx files."""

    path: str
    sharded = True

    def decoder_samples(self, decoder: str, definition, file_root: str, path: str, key_map, num_shards: int):
        """``reading.RecordedReader``: fn.decoders.image(path=...) reads the records."""
        if decoder != "fn.decoders.image":  # rocAL's has no MXNet branch: it reads file_root as image files
            raise NotImplementedError(f"{PREFIX}: {decoder} after fn.readers.mxnet: rocAL's reads file_root as a "
                                      f"folder of images, not the records; use fn.decoders.image(path=...)")
        refuse(decoder, user_feature_key_map=key_map)
        same_path(decoder, path, self.path, "fn.readers.mxnet")
        records = MXNetRecords(path or self.path)
        return records.samples, records.read


def record_files(path: str) -> tuple[str, str]:
    """The folder's .rec and .idx files (one of each)."""
    if not os.path.isdir(path):
        raise ValueError(f"{PREFIX}: readers.mxnet: path {path!r} is not a folder (rocAL reads the .rec and .idx "
                         f"files in it)")
    found = {"rec": [], "idx": []}
    for name in sorted(os.listdir(path)):
        extension = name.rsplit(".", 1)[-1] if "." in name else ""
        if extension in found and os.path.isfile(os.path.join(path, name)):
            found[extension].append(os.path.join(path, name))
    for extension, files in found.items():
        if len(files) != 1:
            raise ValueError(f"{PREFIX}: readers.mxnet: {path!r} holds {len(files)} .{extension} files "
                             f"({', '.join(os.path.basename(f) for f in files) or 'none'}); rocAL reads one .rec "
                             f"and its .idx")
    return found["rec"][0], found["idx"][0]


def _offsets(idx: str, size: int) -> list[int]:
    offsets = []
    with open(idx) as lines:
        for number, line in enumerate(lines, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 2 or not all(re.fullmatch(r"-?[0-9]+", f) for f in fields):
                raise ValueError(f"{PREFIX}: readers.mxnet: {idx} line {number} is not 'key offset' "
                                 f"({line.strip()!r}); rocAL stops reading the index there")
            offsets.append(int(fields[1]))
    if not offsets:
        raise ValueError(f"{PREFIX}: readers.mxnet: {idx} lists no record")
    if len(set(offsets)) != len(offsets) or min(offsets) < 0 or max(offsets) >= size:
        raise ValueError(f"{PREFIX}: readers.mxnet: {idx} lists an offset twice or past the .rec's {size} bytes")
    return sorted(offsets)


class MXNetRecords:
    """The records of an MXNet folder: ``samples`` [("file.rec:id", label)] and ``read(index)``, a
    record's encoded image."""

    def __init__(self, path: str):
        self.rec, idx = record_files(path)
        size = os.path.getsize(self.rec)
        offsets = _offsets(idx, size)
        self.samples, self._places, skipped, first = [], [], 0, {}
        with open(self.rec, "rb") as file:
            for offset, end in zip(offsets, offsets[1:] + [size]):
                file.seek(offset)
                head = file.read(IMAGE_START)
                where = f"{self.rec} at byte {offset}"
                if len(head) < IMAGE_START:
                    raise ValueError(f"{PREFIX}: readers.mxnet: {where}: the file ends inside the record's header")
                magic, word = WORD.unpack_from(head)
                if magic != MAGIC:
                    raise ValueError(f"{PREFIX}: readers.mxnet: {where}: no RecordIO record (magic {magic:#x})")
                cflag, length = word >> 29, word & ((1 << 29) - 1)
                if cflag != 0:
                    raise NotImplementedError(f"{PREFIX}: readers.mxnet: {where}: a multi-part record (cflag "
                                              f"{cflag}), which rocAL does not read")
                if length < HEADER.size or offset + WORD.size + length > end:
                    raise ValueError(f"{PREFIX}: readers.mxnet: {where}: a {length}-byte record does not fit "
                                     f"before the next one")
                flag, label, image_id, _ = HEADER.unpack_from(head, WORD.size)
                if flag > 0:
                    skipped += 1
                    continue
                if image_id in first:
                    raise ValueError(f"{PREFIX}: readers.mxnet: {self.rec}: the records at bytes {first[image_id]} "
                                     f"and {offset} share the id {image_id}; rocAL pairs images and labels by id "
                                     f"and would read the first one for both")
                if not math.isfinite(label) or not -2 ** 31 <= int(label) < 2 ** 31:
                    raise ValueError(f"{PREFIX}: readers.mxnet: {where}: the label {label} is no int32 (rocAL's "
                                     f"conversion of it is undefined)")
                first[image_id] = offset
                self.samples.append((f"{self.rec}:{image_id}", int(label)))
                self._places.append((offset + IMAGE_START, length - HEADER.size))
        if skipped:
            warnings.warn(f"{PREFIX}: readers.mxnet: {self.rec}: {skipped} records with extra labels (flag > 0) "
                          f"are skipped, as rocAL skips them", stacklevel=4)
        if not self.samples:
            raise ValueError(f"{PREFIX}: readers.mxnet: {self.rec} holds no record rocAL reads")

    def read(self, index: int) -> bytes:
        start, length = self._places[index]
        return read_range(index, self.rec, start, length, self.samples[index][0])
