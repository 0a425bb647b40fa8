"""``amd.rocal.fn``: rocAL's operators (the ``ops_*`` modules, one per family; the audio ones in ``audio``),
with ``fn.readers``, ``fn.decoders`` and ``fn.random`` as in rocAL. rocAL's other operators raise
NotImplementedError naming themselves."""

from . import decoders, random, readers  # noqa: F401
from .audio import (mel_filter_bank, nonsilent_region, normalize, preemphasis_filter, resample,  # noqa: F401
                    slice, spectrogram, tensor_add_tensor_float, tensor_mul_scalar_float, to_decibels)
from .ops_colour import (blend, brightness, brightness_fixed, color_temp, color_twist, contrast, copy,  # noqa: F401
                         exposure, gamma_correction, hue, nop, saturation, vignette)
from .ops_decoders import external_source  # noqa: F401
from .ops_effects import blur, fish_eye, fog, jitter, lens_correction, pixelate, rain, snow, snp_noise  # noqa: F401
from .ops_geometry import (center_crop, crop, crop_mirror_normalize, flip, random_crop, resize,  # noqa: F401
                           resize_crop, resize_crop_mirror, resize_mirror_normalize, roi_resize, rotate, transpose,
                           warp_affine)
from .ops_labels import box_encoder, box_iou_matcher, one_hot, random_bbox_crop, ssd_random_crop, uniform  # noqa: F401
from .ops_readers import log1p  # noqa: F401

centre_crop = center_crop
