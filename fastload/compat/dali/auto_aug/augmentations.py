"""DALI's standard suite of augmentations (``nvidia.dali.auto_aug.augmentations``), used by AutoAugment,
RandAugment and TrivialAugment: the same names, default magnitude ranges, random negation and
magnitude-to-parameter mappings, so a policy built of them draws the same parameters. Each runs on an
operator of ``operations`` (fastload's rotate, brightness and hsv numerics, and the warps, filters and
histogram work DALI chains its own operators for), on HWC images or FHWC sequences frame by frame.

A parameter mapping is applied once per magnitude (``core.Augmentation``), so these are plain numpy.
"""

from __future__ import annotations

import numpy as np

from ..unsupported import refuse
from . import operations
from .core import augmentation

_F32 = np.float32


def warp_x_param(magnitude):
    """A shear or translation along x: [magnitude, 0]."""
    return [magnitude, 0]


def warp_y_param(magnitude):
    """A shear or translation along y: [0, magnitude]."""
    return [0, magnitude]


@augmentation(mag_range=(0, 0.3), randomly_negate=True, mag_to_param=warp_x_param)
def shear_x(data, shear, fill_value=128, interp_type=None):
    return operations.shear(data, shear, fill_value=fill_value, interp_type=interp_type)


@augmentation(mag_range=(0, 0.3), randomly_negate=True, mag_to_param=warp_y_param)
def shear_y(data, shear, fill_value=128, interp_type=None):
    return operations.shear(data, shear, fill_value=fill_value, interp_type=interp_type)


@augmentation(mag_range=(0.0, 1.0), randomly_negate=True, mag_to_param=warp_x_param)
def translate_x(data, rel_offset, shape, fill_value=128, interp_type=None):
    """A translation by ``rel_offset`` of the width (``shape`` is the image's (H, W[, C]))."""
    return operations.translate(data, rel_offset, fill_value=fill_value, interp_type=interp_type,
                                scale_by=shape[1])


@augmentation(mag_range=(0, 250), randomly_negate=True, mag_to_param=warp_x_param, name="translate_x")
def translate_x_no_shape(data, offset, fill_value=128, interp_type=None):
    return operations.translate(data, offset, fill_value=fill_value, interp_type=interp_type)


@augmentation(mag_range=(0.0, 1.0), randomly_negate=True, mag_to_param=warp_y_param)
def translate_y(data, rel_offset, shape, fill_value=128, interp_type=None):
    """A translation by ``rel_offset`` of the height (``shape`` is the image's (H, W[, C]))."""
    return operations.translate(data, rel_offset, fill_value=fill_value, interp_type=interp_type,
                                scale_by=shape[0])


@augmentation(mag_range=(0, 250), randomly_negate=True, mag_to_param=warp_y_param, name="translate_y")
def translate_y_no_shape(data, offset, fill_value=128, interp_type=None):
    return operations.translate(data, offset, fill_value=fill_value, interp_type=interp_type)


@augmentation(mag_range=(0, 30), randomly_negate=True)
def rotate(data, angle, fill_value=128, interp_type=None, rotate_keep_size=True):
    return operations.rotate(data, angle, fill_value=fill_value, interp_type=interp_type,
                             keep_size=rotate_keep_size)


def shift_enhance_range(magnitude):
    """Enhancements (brightness, contrast, color, sharpness) are neutral at 1: a magnitude in [0, 1],
    randomly negated, becomes 1 + magnitude."""
    return 1 + magnitude


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def brightness(data, parameter):
    return operations.brightness(data, parameter)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def contrast(data, parameter):
    """PIL's contrast enhancement: about the channel-weighted mean brightness."""
    return operations.contrast(data, parameter)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def color(data, parameter):
    return operations.saturation(data, parameter)


def sharpness_kernel(magnitude):
    """The 3x3 kernel blending the image with PIL's smoothing filter: identity * (1 + m) - smooth * m,
    for m in [-1, 1]."""
    smooth = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], dtype=_F32) / 13
    identity = np.zeros((3, 3), dtype=_F32)
    identity[1, 1] = 1
    return -magnitude * smooth + (1 + magnitude) * identity


def sharpness_kernel_shifted(magnitude):
    """``sharpness_kernel`` for a magnitude in [0, 2] (1 neutral)."""
    return sharpness_kernel(magnitude - 1)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=sharpness_kernel, param_device="auto")
def sharpness(data, kernel):
    """PIL's ImageEnhance.Sharpness, except at the 1-pixel border (PIL keeps the input there)."""
    return operations.sharpen(data, kernel)


def poster_mask_uint8(magnitude):
    """The uint8 mask keeping the top ``round(magnitude)`` bits, 1 to 8 (0 becomes 1, as the
    RandAugment paper's reference implementations do, so an image is never blanked)."""
    bits = int(np.round(magnitude).astype(np.uint32))
    bits = min(max(bits, 1), 8)
    return np.array(np.uint8(255) ^ np.uint8(2 ** (8 - bits) - 1), dtype=np.uint8)


@augmentation(mag_range=(0, 4), mag_to_param=poster_mask_uint8, param_device="auto")
def posterize(data, mask):
    return operations.posterize(data, mask)


@augmentation(mag_range=(256, 0), param_device="auto")
def solarize(data, threshold):
    return operations.solarize(data, threshold)


def solarize_add_shift(shift):
    if shift >= 128:
        raise Exception("The solarize_add augmentation accepts shifts from 0 to 128")
    return np.uint8(shift)


@augmentation(mag_range=(0, 110), param_device="auto", mag_to_param=solarize_add_shift)
def solarize_add(data, shift):
    return operations.solarize_add(data, shift)


@augmentation
def invert(data, _):
    return operations.invert(data)


@augmentation
def equalize(data, _):
    """OpenCV's histogram equalisation (DALI follows it; PIL's lookup table differs slightly)."""
    return operations.equalize(data)


@augmentation
def auto_contrast(data, _):
    return operations.auto_contrast(data)


@augmentation
def identity(data, _):
    return data


__getattr__ = refuse(__name__, "nvidia.dali.auto_aug.augmentations")  # any other name: NotImplementedError
