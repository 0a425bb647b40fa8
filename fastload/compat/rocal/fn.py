"""``amd.rocal.fn``: rocAL's operators (``operators``; the audio ones in ``audio``), with ``fn.readers``,
``fn.decoders`` and ``fn.random`` as in rocAL. rocAL's other operators raise NotImplementedError naming themselves."""

from . import decoders, random, readers  # noqa: F401
from .audio import (mel_filter_bank, nonsilent_region, normalize, preemphasis_filter, resample,  # noqa: F401
                    slice, spectrogram, tensor_add_tensor_float, tensor_mul_scalar_float, to_decibels)
from .operators import (blend, blur, brightness, brightness_fixed, center_crop, color_temp,  # noqa: F401
                        color_twist, contrast, copy, crop, crop_mirror_normalize, exposure, external_source,
                        fish_eye, flip, fog, gamma_correction, hue, jitter, lens_correction, log1p, nop, one_hot,
                        pixelate, rain, random_crop, resize, resize_crop, resize_crop_mirror, resize_mirror_normalize,
                        roi_resize, rotate, saturation, snow, snp_noise, transpose, uniform, unsupported,
                        vignette, warp_affine)

centre_crop = center_crop

# rocAL's operators that fastload does not run yet (rocAL_pybind/amd/rocal/fn.py at 0981d5bb)
# detection: the random crops that move COCO boxes, and SSD's anchor encoding and matching
random_bbox_crop = unsupported("random_bbox_crop")
ssd_random_crop = unsupported("ssd_random_crop")
box_encoder = unsupported("box_encoder")
box_iou_matcher = unsupported("box_iou_matcher")
