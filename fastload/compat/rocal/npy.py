"""rocAL's numpy reader (``fn.readers.numpy``): .npy files as the pipeline's tensors.

rocAL's rules, from ROCm/rocAL at 0981d5bb (rocAL/source/readers/image/numpy_data_reader.cpp, its
loader numpy_loader.cpp, numpy_source_evaluator.cpp):

* Files: with ``files=[...]``, those whose name ends in ``.npy`` (any case), in the order given, relative
  to ``file_root``; else the sorted ``.npy`` files of ``file_root``, or, when it holds none, of each of its
  folders in sorted order, one level deep. ``file_root`` must be a folder in both cases.
* A file is a version 1.0 .npy of one of the types u1, u4, i2, i4, f4, f2 (uint8, uint32, int16, int32,
  float32, float16), little-endian (numpy_data_reader.h: the type table; parse_header); the table maps
  i1 too, but rocAL's tensors have no int8 size (tensor.cpp), so int8 fails there and is refused here. A Fortran-ordered
  array is read as its bytes lie with its shape reversed: the array's transpose.
* All files have the same type and number of dimensions. The batch is one tensor of ``[batch] + the
  largest shape over the whole dataset`` (the source evaluator's maximum, found once), each array at its
  origin; fastload zeroes the rest (rocAL leaves what the buffer held before).
* ``output_layout`` says how rocAL's operators see the array: NHWC (height, width, channels) and NCHW
  (channels, height, width) make a 3-D array an image that fn.resize and the other image operators
  take (fastload's take uint8 ones with 1 or 3 channels, one count for all files); NONE (the default), the
  volume layouts, and NHWC or NCHW over more than three dimensions (which rocAL's test reads, its image
  bookkeeping on the wrong axes) leave it an array, for fn.log1p and the iterators. The numpy reader has no labels:
  ``ROCALNumpyIterator`` returns the arrays alone.
* Sharding and padding are the file reader's (fastload's ``RocalOrder``). Shuffling differs: rocAL
  re-seeds a generator with the reader's ``seed`` each epoch and applies that one permutation again to
  the shuffled list; fastload permutes from (seed, epoch), as for the file reader.

Refused by name, where rocAL skips or fails: a missing listed file, an unreadable or malformed file, a
type or byte order rocAL does not read, a 0-d array, files of different types or numbers of dimensions,
images of different channel counts, a file that changed after the build (when read), and a root
whose own .npy files sort after one of its folders (rocAL then reads that folder twice and the root's
files never).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import DecodeError

PREFIX = "fastload.compat.rocal"
TYPES = {"u1": "uint8", "u4": "uint32", "i2": "int16", "i4": "int32", "f4": "float32", "f2": "float16"}


@dataclass(frozen=True)
class NpyLayout:
    """A numpy-reader tensor as rocAL describes it: the largest shape of its arrays, their type, and the
    layout the reader was told."""

    max_shape: tuple[int, ...]
    dtype: str
    layout: str


def npy_files(root: str, files) -> list[str]:
    """The files rocAL's numpy reader reads (the module's rules)."""
    if not os.path.isdir(root):
        raise ValueError(f"{PREFIX}: readers.numpy: file_root {root!r} is not a folder (rocAL opens it first)")
    if files:
        listed = [path if os.path.isabs(path) else os.path.join(root, path) for path in files]
        missing = [path for path in listed if not os.path.isfile(path)]
        if missing:
            raise ValueError(f"{PREFIX}: readers.numpy: {len(missing)} listed files do not exist, e.g. {missing[0]!r} "
                             f"(rocAL leaves them out)")
        return [path for path in listed if path.lower().endswith(".npy")]
    entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    own = [entry for entry in entries if entry.is_file() and entry.name.lower().endswith(".npy")]
    folders = [entry for entry in entries if entry.is_dir()]
    if own:
        if folders and folders[0].name < own[0].name:
            raise ValueError(f"{PREFIX}: readers.numpy: {root!r} holds .npy files and, sorting before them, the "
                             f"folder {folders[0].name!r}: rocAL then reads that folder twice and the root's files "
                             f"never; keep the files in the root or in folders, not both")
        return [entry.path for entry in own]
    return [path for folder in folders for path in
            sorted(entry.path for entry in os.scandir(folder.path)
                   if entry.is_file() and entry.name.lower().endswith(".npy"))]


def _header(path: str) -> tuple[tuple[int, ...], str, bool]:
    """(shape, type name, fortran order) from a .npy header, refused where rocAL does not read it."""
    try:
        with open(path, "rb") as file:
            version = np.lib.format.read_magic(file)
            if version != (1, 0):
                raise ValueError(f".npy version {version[0]}.{version[1]}; rocAL reads version 1.0 only")
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(file)
    except (OSError, ValueError) as error:
        raise ValueError(f"{PREFIX}: readers.numpy: {path}: {error}") from None
    if dtype.byteorder == ">":
        raise ValueError(f"{PREFIX}: readers.numpy: {path}: big-endian {dtype.str!r}; rocAL reads little-endian "
                         f"arrays only")
    name = TYPES.get(dtype.str[1:])
    if name is None:
        why = (" (its type table maps i1, but its tensors have no int8 size: tensor.cpp)" if dtype.str[1:] == "i1"
               else "")
        raise ValueError(f"{PREFIX}: readers.numpy: {path}: type {dtype} is not one rocAL reads{why} "
                         f"({', '.join(TYPES.values())})")
    if not shape:
        raise ValueError(f"{PREFIX}: readers.numpy: {path}: a 0-d array; rocAL's tensors have a shape")
    return tuple(shape), name, bool(fortran)


class NpyFiles:
    """A numpy reader's files: ``samples`` [(path, 0)], their common type and largest shape
    (``layout``), and ``read(index)``, a file's bytes."""

    def __init__(self, root: str, files, layout: str):
        paths = npy_files(root, files)
        if not paths:
            raise ValueError(f"{PREFIX}: readers.numpy: no .npy files in {root!r}")
        headers = [_header(path) for path in paths]
        shapes = [shape[::-1] if fortran else shape for shape, _, fortran in headers]
        for path, shape, (_, dtype, _) in zip(paths, shapes, headers):
            if dtype != headers[0][1] or len(shape) != len(shapes[0]):
                raise ValueError(f"{PREFIX}: readers.numpy: {path} is {dtype} of {len(shape)} dimensions, "
                                 f"{paths[0]} {headers[0][1]} of {len(shapes[0])}: rocAL reads arrays of one type "
                                 f"and one number of dimensions")
        if layout in ("NHWC", "NCHW") and len(shapes[0]) < 3:
            raise ValueError(f"{PREFIX}: readers.numpy(output_layout={layout}): the arrays have {len(shapes[0])} "
                             f"dimensions, fewer than the layout's 3 (rocAL fails; NONE reads them as arrays)")
        if layout in ("NHWC", "NCHW") and len(shapes[0]) == 3:
            channels = {shape[2 if layout == "NHWC" else 0] for shape in shapes}
            if len(channels) > 1:
                raise ValueError(f"{PREFIX}: readers.numpy(output_layout={layout}): the images have "
                                 f"{sorted(channels)} channels; rocAL copies each with the largest one's strides")
        self.samples = [(path, 0) for path in paths]
        self.layout = NpyLayout(tuple(int(n) for n in np.max(np.array(shapes), axis=0)), headers[0][1], layout)

    def read(self, index: int) -> bytes:
        path = self.samples[index][0]
        try:
            with open(path, "rb") as file:
                return file.read()
        except OSError as error:
            raise DecodeError(index, path, f"cannot read: {error}") from error


def array(data: bytes, index: int, name: str, kind: NpyLayout) -> torch.Tensor:
    """A .npy file's bytes as rocAL reads them: the array, or a Fortran-ordered one's transpose; one that
    no longer has the type, dimensions or fitting shape its header had at build is a DecodeError."""
    try:
        buffer = io.BytesIO(data)
        np.lib.format.read_magic(buffer)
        _, fortran, _ = np.lib.format.read_array_header_1_0(buffer)
        buffer.seek(0)
        value = np.load(buffer, allow_pickle=False)
    except Exception as error:
        raise DecodeError(index, name, f"cannot read the .npy array: {error}") from error
    value = value.T if fortran else value
    if TYPES.get(value.dtype.str[1:]) != kind.dtype or value.ndim != len(kind.max_shape) or \
            any(n > most for n, most in zip(value.shape, kind.max_shape)):
        raise DecodeError(index, name, f"the file changed since the pipeline was built: {value.dtype} "
                                       f"{value.shape}, not {kind.dtype} within {kind.max_shape}")
    return torch.from_numpy(np.ascontiguousarray(value))


def pad_arrays(samples: list[torch.Tensor], max_shape: tuple[int, ...]) -> torch.Tensor:
    """The batch as rocAL's tensor holds it: [batch] + max_shape, each array at its origin, zeros elsewhere."""
    out = torch.zeros((len(samples),) + tuple(max_shape), dtype=samples[0].dtype)
    for row, sample in enumerate(samples):
        out[(row,) + tuple(slice(0, n) for n in sample.shape)] = sample
    return out
