"""DALI's image operators, one sample at a time, in plain torch: the public names of the per-sample modules.

The work lives by family: ``decoding`` (fn.decoders.image), ``crops`` (random crop windows, fn.crop,
fn.flip, fn.crop_mirror_normalize), ``resampling`` (fn.resize and its size rules), ``warping``
(fn.rotate), ``colour`` (fn.color_twist, fn.hsv, fn.brightness_contrast) and ``conversions`` (fn.cast,
ConvertSat, type promotion). This module keeps ``fastload.compat.dali.imageops`` importable for code
outside the DALI layer (the rocAL layer's random crop window, tests against real DALI) with the names it
had; code inside the layer imports from the family modules. An image is a torch tensor in HWC layout
(DALI's default), uint8 unless stated; every function returns a new tensor; integer outputs are rounded
as DALI's ``ConvertSat`` rounds (to nearest, halves away from zero, then clamped to the type's range).
tests/compat/test_dali_imageops.py compares each with real DALI's CPU operators.
"""

from .colour import brightness_contrast, color_twist, hsv
from ..engine.conversions import cast, promote, true_divide_type
from .crops import crop, crop_mirror_normalize, flip, random_crop_window
from .decoding import decode
from .resampling import resize, resize_output_size
from .warping import rotate, rotated_size

__all__ = ["brightness_contrast", "cast", "color_twist", "crop", "crop_mirror_normalize", "decode", "flip", "hsv",
           "promote", "random_crop_window", "resize", "resize_output_size", "rotate", "rotated_size",
           "true_divide_type"]
