"""rocAL's CIFAR-10 reader (``fn.readers.cifar10``): the binary batches of the CIFAR-10 distribution.

rocAL's rules, from ROCm/rocAL at 0981d5bb:

* A record is one label byte then the 32x32 image as three planes, R, G, B: 3073 bytes, sizes fixed
  (rocAL/include/readers/image/cifar10_data_reader.h, ``_raw_file_size``; readers.py passes 32x32). A
  file holds ``size // 3073`` records, read in file order (cifar10_data_reader.cpp, open_folder).
* The files read are the regular files (not symbolic links) of ``file_root`` whose name contains
  ``filename_prefix``
  (``find(...) != npos``: anywhere in the name; no extension test). When the first entry of the sorted
  root is a folder, every entry is read as a folder, one level deep (subfolder_reading).
* A record's label is its first byte, as int32; labels are keyed by the file's name and the record's
  place, ``data_batch_1.bin_0`` (source/meta_data/cifar10_meta_data_reader.cpp).
* The image is the record's 3072 bytes as they are: (N, 3, 32, 32) uint8, NCHW, for the default
  ``image_type=RGB_PLANAR`` (cifar10_loader.cpp, convert_color_format).
* Sharding and padding are the file reader's (a shard is a contiguous block, its last record repeated
  to fill the last batch): fastload's ``RocalOrder``. Shuffling differs: rocAL seeds its generator with
  the shard id, not the pipeline's seed; fastload permutes from (seed, epoch), as for the file reader.

Where rocAL's result is not the data, fastload refuses by name: ``image_type`` RGB, BGR or GRAY (rocAL
copies the planar bytes into an interleaved or one-plane buffer unchanged, scrambling the image or
overrunning it), ``num_shards`` > 1 (rocAL's sharded loader ignores ``shard_id`` and hands every process
every shard's batches in turn: node_cifar10_loader_single_shard.cpp, cifar10_loader_sharded.cpp), two
files of one name in different folders (their records share label keys; rocAL keeps the first file's
labels for both), and a loose file among the folders (rocAL throws). rocAL reads each folder in the
order the file system lists it (readdir, unsorted); fastload reads it sorted by name, one of those
orders. A file's trailing bytes that make no whole record are left out, as in rocAL, with a warning that
names the file.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from ...read import read_range

PREFIX = "fastload.compat.rocal"
SIDE = 32
IMAGE_BYTES = 3 * SIDE * SIDE
RECORD_BYTES = 1 + IMAGE_BYTES


def cifar10_files(root: str, prefix: str) -> list[str]:
    """The data files rocAL reads from ``root`` (the module's rules), sorted by name in each folder."""
    if not os.path.isdir(root):
        raise ValueError(f"{PREFIX}: readers.cifar10: file_root {root!r} is not a folder")
    entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    if not entries:
        raise ValueError(f"{PREFIX}: readers.cifar10: {root!r} is empty")
    if entries[0].is_dir():
        loose = [entry.name for entry in entries if not entry.is_dir()]
        if loose:
            raise ValueError(f"{PREFIX}: readers.cifar10: {root!r} holds folders and files ({loose[0]!r}); rocAL "
                             f"reads every entry as a folder when the first is one, and fails on a file")
        folders = [entry.path for entry in entries]
    else:
        folders = [root]
    files, seen, links = [], {}, 0
    for folder in folders:
        for entry in sorted(os.scandir(folder), key=lambda entry: entry.name):
            links += entry.is_symlink() and prefix in entry.name
            if entry.is_file(follow_symlinks=False) and prefix in entry.name:
                if entry.name in seen:
                    raise ValueError(f"{PREFIX}: readers.cifar10: {seen[entry.name]!r} and {entry.path!r} share a "
                                     f"name; rocAL keys labels by file name and record, and would give the second "
                                     f"the first one's labels")
                seen[entry.name] = entry.path
                files.append(entry.path)
    if not files:
        why = (f" ({links} symbolic links do, which rocAL does not read)" if links else
               f" (rocAL reads the root's own files, its first entry {entries[0].name!r} being one, and not its "
               f"folders)" if folders == [root] and any(entry.is_dir() for entry in entries) else "")
        raise ValueError(f"{PREFIX}: readers.cifar10: no regular file in {root!r} has {prefix!r} in its name{why}")
    return files


class Cifar10Records:
    """The records of a CIFAR-10 folder: ``samples`` [("file:record", label)] and ``read(index)``, the
    record's 3072 image bytes."""

    def __init__(self, root: str, prefix: str):
        self.samples, self._places = [], []
        for path in cifar10_files(root, prefix):
            data = np.fromfile(path, dtype=np.uint8)
            count, rest = divmod(data.size, RECORD_BYTES)
            if rest:
                warnings.warn(f"{PREFIX}: readers.cifar10: {path}: {rest} bytes after its {count} records make no "
                              f"whole {RECORD_BYTES}-byte record and are not read (as in rocAL)", stacklevel=4)
            labels = data[:count * RECORD_BYTES:RECORD_BYTES].tolist()
            if max(labels, default=0) > 9:
                warnings.warn(f"{PREFIX}: readers.cifar10: {path}: {sum(label > 9 for label in labels)} records have "
                              f"labels over 9 (rocAL warns of an invalid label and keeps it, as fastload does)",
                              stacklevel=4)
            self.samples += [(f"{path}:{record}", label) for record, label in enumerate(labels)]
            self._places += [(path, record) for record in range(count)]
        if not self.samples:
            raise ValueError(f"{PREFIX}: readers.cifar10: the files of {root!r} hold no whole record")

    def read(self, index: int) -> bytes:
        path, record = self._places[index]
        return read_range(index, path, record * RECORD_BYTES + 1, IMAGE_BYTES, f"{path}:{record}")
