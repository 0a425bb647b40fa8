"""``amd.rocal.fn``: rocAL's operators (``operators``; the audio ones in ``audio``), with ``fn.readers``,
``fn.decoders`` and ``fn.random`` as in rocAL. rocAL's other operators raise NotImplementedError naming themselves."""

from . import decoders, random, readers  # noqa: F401
from .audio import (mel_filter_bank, nonsilent_region, normalize, preemphasis_filter, resample,  # noqa: F401
                    slice, spectrogram, tensor_add_tensor_float, tensor_mul_scalar_float, to_decibels)
from .operators import (blend, blur, box_encoder, box_iou_matcher, brightness, brightness_fixed,  # noqa: F401
                        center_crop, color_temp, color_twist, contrast, copy, crop, crop_mirror_normalize, exposure,
                        external_source, fish_eye, flip, fog, gamma_correction, hue, jitter, lens_correction, log1p,
                        nop, one_hot, pixelate, rain, random_bbox_crop, random_crop, resize, resize_crop,
                        resize_crop_mirror, resize_mirror_normalize, roi_resize, rotate, saturation, snow, snp_noise,
                        ssd_random_crop, transpose, uniform, vignette, warp_affine)

centre_crop = center_crop
