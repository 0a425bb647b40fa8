"""DALI's ``fn.readers.numpy`` and ``fn.decoders.numpy``, measured against DALI 2.4 on the CPU
(tests/compat/test_dali_record_readers.py):

* numpy: file_root's files directly in it ("./name"), then those one folder down (folders sorted; deeper
  ones not entered), each set sorted, whose name matches ``file_filter`` (fnmatch, case-sensitive); or
  ``files`` / ``file_list`` (relative to file_root, else to the list's folder). DALI's file loader shuffles
  this list first with ``random_shuffle`` (``ReaderOrder``'s rule). A Fortran-order array reads in its
  logical shape. Regions: start and end (start + shape) per axis (``roi_axes``, else all), relative ones
  scaled by the extent in float32, each rounded halves away from zero; outside the array an error, the
  ``fill_value`` ("pad") or trimmed ("trim_to_shape").
* decoders.numpy: a .npy file of format version 1 (DALI's only), C or Fortran order, in its logical shape;
  ``dtype`` converts as ``fn.cast`` does (DALI's decoder uses ConvertSat).
"""

from __future__ import annotations

import os

import numpy as np
import torch

from ...errors import DecodeError
from ..engine.graph import Op, ReaderOp
from ..float32 import round_c
from .operators import check_args
from .record_specs import cpu_only, order_args, record_spec
from .spec import operator


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
        start[axis], end[axis] = int(round_c(np.float32(first))), int(round_c(np.float32(last)))  # llround
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
    """``array[start:end]``, the part outside the array ``fill_value`` (in the array's type as DALI converts it:
    ConvertSat, so rounded halves away from zero and saturated for an integer array)."""
    from ..engine.conversions import convert_sat
    fill = convert_sat(torch.tensor(float(fill_value), dtype=torch.float32), torch.from_numpy(array[:0]).dtype)
    out = np.full([e - s for s, e in zip(start, end)], fill.numpy(), dtype=array.dtype)
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
        if not isinstance(file_list, (str, os.PathLike)):
            raise TypeError(f"{operator}: file_list must be a path (str or os.PathLike), not "
                            f"{type(file_list).__name__}")
        try:
            with open(file_list) as handle:
                listed = [line.rstrip("\r\n") for line in handle if line.strip()]
        except OSError as error:  # DALI: a RuntimeError, "Cannot open: <path>"
            raise RuntimeError(f"{operator}: cannot open file_list {os.fspath(file_list)!r}: "
                               f"{error.strerror}") from error
        base = file_root if file_root else os.path.dirname(str(file_list))
    elif file_root is not None:
        listed, base = _list_npy(str(file_root), str(file_filter)), str(file_root)
    else:
        raise ValueError(f"{operator} needs file_root, files or file_list")
    samples = [(os.path.join(base, file), k) for k, file in enumerate(listed)]
    spec = record_spec(operator, samples, None, names=listed, listed_shuffle=True, **order_args(locals()))

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
    cpu_only(operator, device)
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
