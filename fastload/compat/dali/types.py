"""DALI's ``types`` module: the constants DALI scripts pass to operators.

Values are enum members named as DALI names them, so ``types.FLOAT``,
``types.DALIDataType.FLOAT`` and ``types.INTERP_LINEAR`` read the same; the
layouts ``NCHW``/``NHWC`` are DALI's per-sample layout strings ("CHW"/"HWC").
"""

from __future__ import annotations

import enum

import numpy as np
import torch

from ..engine.graph import constant


class DALIDataType(enum.Enum):
    NO_TYPE = -1
    UINT8 = 0
    UINT16 = 1
    UINT32 = 2
    UINT64 = 3
    INT8 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    FLOAT16 = 8
    FLOAT = 9
    FLOAT64 = 10
    BOOL = 11
    STRING = 12


class DALIImageType(enum.Enum):
    RGB = 0
    BGR = 1
    GRAY = 2
    YCbCr = 3
    ANY_DATA = 4


class DALIInterpType(enum.Enum):
    INTERP_NN = 0
    INTERP_LINEAR = 1
    INTERP_CUBIC = 2
    INTERP_LANCZOS3 = 3
    INTERP_TRIANGULAR = 4
    INTERP_GAUSSIAN = 5


globals().update(DALIDataType.__members__)
globals().update(DALIImageType.__members__)
globals().update(DALIInterpType.__members__)
NCHW, NHWC, NFCHW, NFHWC, SAME = "CHW", "HWC", "FCHW", "FHWC", ""
CPU_ONLY_DEVICE_ID = -999999

TORCH_DTYPES = {
    DALIDataType.UINT8: torch.uint8, DALIDataType.UINT16: torch.uint16, DALIDataType.UINT32: torch.uint32,
    DALIDataType.UINT64: torch.uint64, DALIDataType.INT8: torch.int8, DALIDataType.INT16: torch.int16,
    DALIDataType.INT32: torch.int32, DALIDataType.INT64: torch.int64, DALIDataType.FLOAT16: torch.float16,
    DALIDataType.FLOAT: torch.float32, DALIDataType.FLOAT64: torch.float64, DALIDataType.BOOL: torch.bool,
}
DALI_TYPES = {value: key for key, value in TORCH_DTYPES.items()}
_NUMPY_NAMES = {"uint8": DALIDataType.UINT8, "int32": DALIDataType.INT32, "int64": DALIDataType.INT64,
                "float32": DALIDataType.FLOAT, "float16": DALIDataType.FLOAT16, "float64": DALIDataType.FLOAT64,
                "bool": DALIDataType.BOOL, "int16": DALIDataType.INT16, "int8": DALIDataType.INT8,
                "uint16": DALIDataType.UINT16, "uint32": DALIDataType.UINT32, "uint64": DALIDataType.UINT64}

_NUMPY_TYPES = {value: getattr(np, name) for name, value in _NUMPY_NAMES.items()}


def to_numpy_type(dali_type):
    """The numpy type of a DALI type (``types.to_numpy_type(types.FLOAT)`` is ``numpy.float32``); a type
    with none (STRING, NO_TYPE) raises KeyError, as in DALI."""
    return _NUMPY_TYPES[dali_type]


def torch_dtype(dtype) -> torch.dtype:
    """A DALI type (or a numpy/torch dtype, as DALI also accepts) as a torch dtype."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, DALIDataType):
        if dtype not in TORCH_DTYPES:
            raise NotImplementedError(f"fastload.compat.dali: type {dtype.name} is not supported")
        return TORCH_DTYPES[dtype]
    name = getattr(dtype, "__name__", None) or str(dtype)
    if name in _NUMPY_NAMES:
        return TORCH_DTYPES[_NUMPY_NAMES[name]]
    raise TypeError(f"fastload.compat.dali: {dtype!r} is not a DALI data type")


def image_type_name(value) -> str:
    """"RGB"/"BGR"/"GRAY"/"YCbCr" from a DALIImageType or its name."""
    return value.name if isinstance(value, DALIImageType) else str(value)


def interp_name(value) -> str:
    """The interpolation as resampling names it: "nn", "linear", "cubic", "lanczos3", "triangular"."""
    if isinstance(value, DALIInterpType):
        if value is DALIInterpType.INTERP_GAUSSIAN:
            raise NotImplementedError("fastload.compat.dali: INTERP_GAUSSIAN is not supported; use "
                                      "INTERP_NN, INTERP_LINEAR, INTERP_CUBIC, INTERP_LANCZOS3 or "
                                      "INTERP_TRIANGULAR")
        return value.name[len("INTERP_"):].lower()
    return str(value)


class SampleInfo:
    """What a per-sample ``external_source`` callback is told (DALI's ``types.SampleInfo``)."""

    def __init__(self, idx_in_epoch: int, idx_in_batch: int, iteration: int, epoch_idx: int):
        self.idx_in_epoch, self.idx_in_batch = idx_in_epoch, idx_in_batch
        self.iteration, self.epoch_idx = iteration, epoch_idx

    def __repr__(self) -> str:
        return (f"SampleInfo(idx_in_epoch={self.idx_in_epoch}, idx_in_batch={self.idx_in_batch}, "
                f"iteration={self.iteration}, epoch_idx={self.epoch_idx})")


class BatchInfo:
    """What a batch ``external_source`` callback with ``batch_info=True`` is told."""

    def __init__(self, iteration: int, epoch_idx: int):
        self.iteration, self.epoch_idx = iteration, epoch_idx

    def __repr__(self) -> str:
        return f"BatchInfo(iteration={self.iteration}, epoch_idx={self.epoch_idx})"


def Constant(value, dtype=None, shape=None, layout=None, device=None, **kwargs):
    """A constant as a graph node (DALI's ``types.Constant``)."""
    return constant(value, dtype=None if dtype is None else torch_dtype(dtype), shape=shape, layout=layout,
                    device=device)

from .unsupported import refuse  # noqa: E402

__getattr__ = refuse(__name__, "types")  # any other name: NotImplementedError naming it
