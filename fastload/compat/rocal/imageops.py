"""rocAL's and RPP's per-sample rules, in torch, under one name: the operators (``ops_*``), the JSON
pipeline and the tests call ``imageops.<rule>``. Each rule lives in its family's module, citing the rocAL
or RPP source it follows (ROCm/rocAL at 0981d5bb, ROCm/rpp at f1d37473):

* ``image_io``: the decoder and its size cap; output types, normalization and batch buffers;
* ``image_resize``: resize sizes and buffers, crop windows, RPP's resize kernels, pixelate;
* ``image_colour``: the colour point operations, vignette and blend;
* ``image_effects``: rotate / warp_affine, lens correction, noise and weather, fish eye.

Names are imported here, not defined: a test that replaces a rule's helper (``monkeypatch``) replaces it
in the module that defines it.
"""

from .image_colour import (_fast_exp, blend, color_temperature, color_twist, exposure, gamma_lut,  # noqa: F401
                           hue_saturation, vignette)
from .image_effects import (SNOW_STAMP, _atan2_ps, _sincos_ps, fish_eye, jitter, lens_correction,  # noqa: F401
                            lens_remap_tables, rain, remap_bilinear, rotate, snow, snp_noise, warp_affine)
from .image_io import (EXTENSIONS, _tj_scale, _turbo_rgb, as_output, decode, normalize, pad_batch,  # noqa: F401
                       per_channel, require_dct_scaling)
from .image_resize import (MAX_ASPECT_RATIO, anchored_crop, central_window, crop_resize,  # noqa: F401
                           crop_resize_window, fixed_crop, fixed_window, pixelate, pixelate_size,
                           random_crop_window_xywh, resample, resize_buffer, resize_crop_mirror, resize_size)
