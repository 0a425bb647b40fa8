"""rocAL's ``types`` module (``amd.rocal.types``): its constants, with rocAL's names and values.

rocAL exports pybind11 enum members (ROCm/rocAL: rocAL_pybind/rocal_pybind.cpp, values from
rocAL/include/api/rocal_api_types.h); here they are ``enum.IntEnum`` members, so ``int(types.NHWC)``,
comparisons and identity (``policy is types.LAST_BATCH_PARTIAL``) read as in rocAL.
"""

from __future__ import annotations

import enum

import torch


class RocalStatus(enum.IntEnum):
    OK = 0
    CONTEXT_INVALID = 1
    RUNTIME_ERROR = 2
    UPDATE_PARAMETER_FAILED = 3
    INVALID_PARAMETER_TYPE = 4


class RocalProcessMode(enum.IntEnum):
    GPU = 0
    CPU = 1


class RocalTensorOutputType(enum.IntEnum):
    FLOAT = 0
    FLOAT16 = 1
    UINT8 = 2
    INT16 = 6


class RocalOutputMemType(enum.IntEnum):
    HOST_MEMORY = 0
    DEVICE_MEMORY = 1
    PINNED_MEMORY = 2


class RocalImageSizeEvaluationPolicy(enum.IntEnum):
    MAX_SIZE = 0
    USER_GIVEN_SIZE = 1
    MOST_FREQUENT_SIZE = 2
    USER_GIVEN_SIZE_ORIG = 3
    MAX_SIZE_ORIG = 4


class RocalImageColor(enum.IntEnum):
    RGB = 0
    BGR = 1
    GRAY = 2
    RGB_PLANAR = 3


class RocalTensorLayout(enum.IntEnum):
    NHWC = 0
    NCHW = 1
    NFHWC = 2
    NFCHW = 3
    NHW = 4
    NFT = 5
    NTF = 6
    NDHWC = 7
    NCDHW = 8
    NONE = 9


class RocalDecodeDevice(enum.IntEnum):
    HARDWARE_DECODE = 0
    SOFTWARE_DECODE = 1


class RocalDecoderType(enum.IntEnum):
    DECODER_TJPEG = 0
    DECODER_OPENCV = 1
    DECODER_VIDEO_FFMPEG_SW = 2
    DECODER_AUDIO_GENERIC = 3
    DECODER_VIDEO_ROCDECODE = 4
    DECODER_ROCJPEG = 5


class RocalResizeScalingMode(enum.IntEnum):
    SCALING_MODE_DEFAULT = 0
    SCALING_MODE_STRETCH = 1
    SCALING_MODE_NOT_SMALLER = 2
    SCALING_MODE_NOT_LARGER = 3
    SCALING_MODE_MIN_MAX = 4


class RocalResizeInterpolationType(enum.IntEnum):
    NEAREST_NEIGHBOR_INTERPOLATION = 0
    LINEAR_INTERPOLATION = 1
    CUBIC_INTERPOLATION = 2
    LANCZOS_INTERPOLATION = 3
    GAUSSIAN_INTERPOLATION = 4
    TRIANGULAR_INTERPOLATION = 5


class RocalExternalSourceMode(enum.IntEnum):
    EXTSOURCE_FNAME = 0
    EXTSOURCE_RAW_COMPRESSED = 1
    EXTSOURCE_RAW_UNCOMPRESSED = 2


class RocalOutOfBoundsPolicy(enum.IntEnum):
    PAD = 0
    TRIMTOSHAPE = 1
    ERROR = 2


class RocalLastBatchPolicy(enum.IntEnum):
    LAST_BATCH_FILL = 0
    LAST_BATCH_DROP = 1
    LAST_BATCH_PARTIAL = 2


class RocalMissingComponentsBehavior(enum.IntEnum):
    """What fn.readers.webdataset does with a sample that lacks one of its extensions."""

    MISSING_COMPONENT_ERROR = 0
    MISSING_COMPONENT_SKIP = 1
    MISSING_COMPONENT_EMPTY = 2


class RocalAudioBorderType(enum.IntEnum):
    """fn.preemphasis_filter's border (RPP's RpptAudioBorderType)."""

    ZERO = 0
    CLAMP = 1
    REFLECT = 2


class RocalMelScaleFormula(enum.IntEnum):
    MELSCALE_SLANEY = 0
    MELSCALE_HTK = 1


for _enum in (RocalAudioBorderType, RocalMelScaleFormula, RocalStatus, RocalProcessMode, RocalTensorOutputType,
              RocalOutputMemType, RocalImageSizeEvaluationPolicy, RocalImageColor, RocalTensorLayout, RocalDecodeDevice,
              RocalDecoderType, RocalResizeScalingMode, RocalResizeInterpolationType, RocalExternalSourceMode,
              RocalOutOfBoundsPolicy, RocalLastBatchPolicy, RocalMissingComponentsBehavior):
    globals().update(_enum.__members__)
del _enum

# rocAL's dtype() strings (rocal_pybind.cpp) and the torch dtypes of its tensor output types
DTYPE_NAMES = {RocalTensorOutputType.FLOAT: "float32", RocalTensorOutputType.FLOAT16: "float16",
               RocalTensorOutputType.UINT8: "uint8", RocalTensorOutputType.INT16: "int16"}
TORCH_DTYPES = {RocalTensorOutputType.FLOAT: torch.float32, RocalTensorOutputType.FLOAT16: torch.float16,
                RocalTensorOutputType.UINT8: torch.uint8, RocalTensorOutputType.INT16: torch.int16}


def data_type_function(dtype) -> str:
    """rocAL's name of a tensor output type."""
    try:
        return DTYPE_NAMES[RocalTensorOutputType(dtype)]
    except (ValueError, KeyError):
        raise RuntimeError(f"{dtype} does not correspond to a known type.") from None
