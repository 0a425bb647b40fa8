"""``amd.rocal.fn``: rocAL's operators (``operators``), with ``fn.readers``, ``fn.decoders`` and
``fn.random`` as in rocAL. Operators not listed here raise NotImplementedError naming themselves."""

from . import decoders, random, readers  # noqa: F401
from .operators import (blend, blur, brightness, brightness_fixed, center_crop, color_temp,  # noqa: F401
                        color_twist, contrast, copy, crop, crop_mirror_normalize, exposure, external_source,
                        fish_eye, flip, fog, gamma_correction, hue, jitter, lens_correction, log1p, nop, one_hot,
                        pixelate, rain, resize, resize_crop, resize_crop_mirror, resize_mirror_normalize,
                        roi_resize, rotate, saturation, snow, snp_noise, uniform, vignette, warp_affine)

centre_crop = center_crop
