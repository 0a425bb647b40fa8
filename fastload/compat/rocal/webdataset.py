"""rocAL's WebDataset reader (``fn.readers.webdataset``) on fastload's tar-shard storage.

rocAL's rules, from ROCm/rocAL at 0981d5bb:

* ``fn.readers.webdataset(path, index_paths="", ext=None, missing_components_behavior=...)`` records the
  folder and ``ext``, a list whose first set names the members a sample has (rocAL_pybind/amd/rocal/
  readers.py, webdataset; its readers use ``ext[0]``). The decoder after it reads ``file_root``
  (decoders.py: ``source_path``), with the decoder's shard_id, num_shards, random_shuffle and padding,
  as for the file reader.
* Every entry of the folder is a tar file, in sorted name order; its members grouped by key, the path up
  to the first "." of the file name, in member order (rocAL/source/readers/image/
  webdataset_source_reader.cpp: split_name, parse_tar_files). A sample's image is its JPEG member (jpg,
  jpeg or jpe, in any case: isJPEG); a key with no JPEG member is no sample.
* The other extensions of ``ext[0]`` (less "jpg", "jpeg", "JPEG" and "jpe": webdataset_meta_data_reader.cpp,
  init) are the sample's "ASCII" outputs, in the sorted order of the set: each member's raw bytes, at most
  MAX_ASCII_BUFFER = 200 (rocAL/include/pipeline/master_graph.h). The iterators return them in place of
  labels, a list per extension of one uint8 array per sample (rocal_pybind.cpp, getAsciiDatas;
  plugin/pytorch.py). A sample without one of them: MISSING_COMPONENT_ERROR (the default) stops the
  reader, MISSING_COMPONENT_SKIP leaves the sample out, MISSING_COMPONENT_EMPTY gives an empty array.

fastload indexes the tars itself (``fastload.tarshards.build_index``, cached): rocAL's ``index_paths``
(tar2idx files) are accepted and not read; they describe the same members. Extensions are compared in any
case (fastload's index lower-cases them). Members over 200 bytes, which rocAL's buffers cannot hold, are
refused by name.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np

from ...errors import DecodeError
from ...shardfiles import ShardFiles
from ...tarshards import is_whole_index, build_index
from .reading import refuse
from .types import RocalMissingComponentsBehavior

PREFIX = "fastload.compat.rocal"
JPEG_EXTENSIONS = ("jpg", "jpeg", "jpe")  # isJPEG, in any case
NOT_ASCII = ("jpg", "jpeg", "JPEG", "jpe")  # what the meta data reader removes from ext
MAX_ASCII = 200  # MAX_ASCII_BUFFER


@dataclass(frozen=True)
class WebDatasetReader:
    """What ``fn.readers.webdataset`` records: the folder, the ASCII outputs' extensions (sorted, as
    rocAL's std::set orders them) and what a missing one does."""

    path: str
    extensions: tuple[str, ...]
    missing: RocalMissingComponentsBehavior
    sharded = True

    def decoder_samples(self, decoder: str, definition, file_root: str, path: str, key_map, num_shards: int):
        """``reading.RecordedReader``: each sample's label is its own position: the iterators give its ASCII
        members in its place (the pipeline's ``definition.webdataset``)."""
        refuse(decoder, user_feature_key_map=key_map)
        webdataset = WebDatasetSamples(decoder, self, file_root or self.path)
        definition.webdataset = webdataset
        return webdataset.samples, webdataset.read


def webdataset_reader(path, ext, missing) -> WebDatasetReader:
    """The reader ``fn.readers.webdataset(path, ext=ext, missing_components_behavior=missing)`` records."""
    if not ext or not isinstance(ext, (list, tuple)) or not isinstance(ext[0], (set, frozenset, list, tuple)):
        raise ValueError(f"{PREFIX}: readers.webdataset: ext= is a list of sets of extensions, e.g. "
                         f"[{{'jpg', 'cls'}}] (rocAL reads ext[0]), not {ext!r}")
    extensions = set(ext[0])
    if not any(e.lower() in JPEG_EXTENSIONS for e in extensions):
        raise ValueError(f"{PREFIX}: readers.webdataset: ext {sorted(extensions)} names no JPEG extension "
                         f"(jpg, jpeg, jpe): rocAL's reader has no image then")
    ascii_extensions = tuple(sorted(extensions - set(NOT_ASCII)))
    odd = [e for e in ascii_extensions if e.lower() in JPEG_EXTENSIONS]
    if odd:
        raise NotImplementedError(f"{PREFIX}: readers.webdataset: ext {odd}: rocAL reads such a member as an "
                                  f"image and also as an ASCII output; name it jpg, jpeg, JPEG or jpe")
    return WebDatasetReader(str(path), ascii_extensions, RocalMissingComponentsBehavior(missing))


class WebDatasetSamples:
    """The samples rocAL's reader finds in ``folder``: ``samples`` as (shard.tar:key, its own position),
    ``read(index)`` its JPEG's bytes, ``ascii(index)`` its ASCII members' (one uint8 array per extension)."""

    def __init__(self, decoder: str, reader: WebDatasetReader, folder: str):
        if not folder or not os.path.isdir(folder):
            raise NotADirectoryError(f"{decoder}: {folder!r}: not a folder of tar files (after "
                                     f"fn.readers.webdataset, rocAL's decoder reads its file_root)")
        names = sorted(entry.name for entry in os.scandir(folder)  # (not fastload's own index files)
                       if ".idx.json" not in entry.name)
        if not names:
            raise ValueError(f"{decoder}: no tar files in {folder!r}")
        self.storage = ShardFiles([os.path.join(folder, name) for name in names], f"{PREFIX}: readers.webdataset")
        self.reader = reader
        self.samples: list[tuple[str, int]] = []
        self.images: list[tuple[int, int, int]] = []  # per sample: (shard, offset, size) of its JPEG
        self.members: list[tuple] = []  # per sample and extension: (shard, offset, size), or None if missing
        self.problems: dict[int, str] = {}  # per sample whose members the index found unreadable: why
        no_image = skipped = 0
        for number, path in enumerate(self.storage.paths):
            index = self.storage.index(number, "shard-index", ".idx.json",
                                       is_whole_index, build_index)  # a malformed cached index is rebuilt
            if index["error"] and not index["samples"]:
                raise ValueError(f"{decoder}: {path}: not a readable tar ({index['error']}); rocAL reads every "
                                 f"entry of {folder} as one")
            problems = dict(index["problems"])  # (a duplicate member, one cut by the end: read() says which)
            for position, (key, members, _) in enumerate(index["samples"]):
                image = next((e for e in members if e in JPEG_EXTENSIONS), None)
                if image is None:
                    no_image += 1
                    continue
                found = tuple(members.get(e.lower()) for e in reader.extensions)
                missing = [e for e, m in zip(reader.extensions, found) if m is None]
                name = f"{path}:{key}"
                if missing and reader.missing == RocalMissingComponentsBehavior.MISSING_COMPONENT_ERROR:
                    raise ValueError(f"{decoder}: {name} has no {', '.join('.' + e for e in missing)} member "
                                     f"(missing_components_behavior=MISSING_COMPONENT_ERROR, rocAL's default)")
                if missing and reader.missing == RocalMissingComponentsBehavior.MISSING_COMPONENT_SKIP:
                    skipped += 1
                    continue
                large = [e for e, m in zip(reader.extensions, found) if m is not None and m[1] > MAX_ASCII]
                if large:
                    raise NotImplementedError(f"{decoder}: {name}: its {', '.join('.' + e for e in large)} member "
                                              f"is over {MAX_ASCII} bytes, which rocAL's ASCII buffers hold")
                if position in problems:
                    self.problems[len(self.samples)] = problems[position]
                self.samples.append((name, len(self.samples)))
                self.images.append((number, *members[image]))
                self.members.append(tuple(None if m is None else (number, *m) for m in found))
        left_out = ([f"{no_image} keys without a JPEG member are not samples"] if no_image else []) + \
            ([f"{skipped} samples lacking one of {list(reader.extensions)} are skipped (rocAL's "
              f"MISSING_COMPONENT_SKIP)"] if skipped else [])
        if left_out:
            warnings.warn(f"{decoder}: {'; '.join(left_out)}", stacklevel=3)

    def read(self, index: int) -> bytes:
        if index in self.problems:
            raise DecodeError(index, self.samples[index][0], self.problems[index])
        number, offset, size = self.images[index]
        data = self.storage.read(number, offset, size)
        if len(data) < size:
            raise DecodeError(index, self.samples[index][0], f"the tar ends {size - len(data)} bytes into this "
                                                             f"image (truncated)")
        return data

    def ascii(self, index: int) -> list[np.ndarray]:
        """The sample's ASCII members' raw bytes, one uint8 array per extension (empty where missing)."""
        out = []
        for extension, member in zip(self.reader.extensions, self.members[index]):
            data = b"" if member is None else self.storage.read(*member)
            if member is not None and len(data) < member[2]:
                raise DecodeError(index, self.samples[index][0], f"the tar ends {member[2] - len(data)} bytes "
                                                                 f"into its .{extension} member (truncated)")
            out.append(np.frombuffer(data, dtype=np.uint8).copy())
        return out
