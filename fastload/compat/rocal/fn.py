"""``amd.rocal.fn``: rocAL's operators (``operators``), with ``fn.readers``, ``fn.decoders`` and
``fn.random`` as in rocAL. Operators not listed here raise NotImplementedError naming themselves."""

from . import decoders, random, readers  # noqa: F401
from .operators import (brightness, brightness_fixed, center_crop, color_twist, contrast, crop,  # noqa: F401
                        crop_mirror_normalize, external_source, flip, one_hot, resize, resize_mirror_normalize,
                        rotate, uniform, unsupported)

centre_crop = center_crop
for _name in ("hue", "saturation", "blur", "warp_affine", "fish_eye", "vignette", "jitter",
              "snp_noise", "snow", "rain", "fog", "pixelate", "exposure", "gamma_correction", "color_temp",
              "lens_correction", "blend", "resize_crop", "resize_crop_mirror", "roi_resize", "nop", "copy", "log1p"):
    globals().setdefault(_name, unsupported(_name))
del _name
