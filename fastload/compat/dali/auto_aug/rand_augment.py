"""DALI's RandAugment (``nvidia.dali.auto_aug.rand_augment``): ``rand_augment`` (DALI's suite, monotonic or
not), ``apply_rand_augment`` for a list of one's own, and the two suites.

Per sample, as DALI draws them: ``n`` augmentations picked uniformly with replacement
(``fn.random.uniform(values=...)``) and, where any negates, ``n`` random signs; each applies magnitude bin
``m``. From fastload's per-sample streams: DALI's distributions, not DALI's numbers.
"""

from __future__ import annotations

import warnings

from ...engine.graph import DataNode
from ..operators import random_uniform
from ..types import DALIDataType
from ..unsupported import refuse
from . import augmentations as a
from ._utils import get_translations, pretty_select
from .core import forbid_unused_kwargs, signed_bin

__all__ = ["rand_augment", "apply_rand_augment", "get_rand_augment_suite", "get_rand_augment_non_monotonic_suite"]


def rand_augment(data: DataNode, n: int, m: int, num_magnitude_bins: int = 31, shape=None, fill_value=128,
                 interp_type=None, max_translate_abs=None, max_translate_rel=None, seed=None, monotonic_mag=True,
                 excluded=None) -> DataNode:
    """RandAugment on uint8 HWC images: ``n`` random augmentations of DALI's suite, each at bin ``m`` of
    ``num_magnitude_bins``, leaving out the ``excluded`` names. ``shape`` makes translations relative (up to
    ``max_translate_rel``, default 100/224), else they are absolute (up to ``max_translate_abs``, 100 px)."""
    kwargs = {"fill_value": fill_value, "interp_type": interp_type}
    use_shape = shape is not None
    if use_shape:
        kwargs["shape"] = shape
    suite = (get_rand_augment_suite if monotonic_mag else get_rand_augment_non_monotonic_suite)(
        use_shape, max_translate_abs, max_translate_rel)
    names = {aug.name for aug in suite}
    for name in excluded or []:
        if name not in names:
            raise Exception(f"The `{name}` was specified in `excluded`, but the RandAugment suite does not contain "
                            f"augmentation with this name. The augmentations in the suite are: "
                            f"{', '.join(names)}.")
    chosen = [aug for aug in suite if aug.name not in (excluded or [])]
    return apply_rand_augment(chosen, data, n, m, num_magnitude_bins=num_magnitude_bins, seed=seed, **kwargs)


def apply_rand_augment(augmentations, data: DataNode, n: int, m: int, num_magnitude_bins: int = 31, seed=None,
                       **kwargs) -> DataNode:
    """``augmentations`` applied RandAugment's way (see the module docstring)."""
    if not isinstance(n, int) or n < 0:
        raise Exception(f"The number of operations to apply `n` must be a non-negative integer, got {n}.")
    if not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
        raise Exception(f"The `num_magnitude_bins` must be a positive integer, got {num_magnitude_bins}.")
    if not isinstance(m, int) or not 0 <= m < num_magnitude_bins:
        raise Exception(f"The magnitude bin `m` must be an integer from `[0, {num_magnitude_bins - 1}]` range. "
                        f"Got {m}.")
    if n == 0:
        warnings.warn("The `apply_rand_augment` was called with `n=0`, no augmentation will be applied.", Warning)
        return data
    if len(augmentations) == 0:
        raise Exception("The `augmentations` list cannot be empty, unless n=0. Got empty list in "
                        "`apply_rand_augment` call.")
    shape = tuple() if n == 1 else (n,)
    op_idx = random_uniform(values=list(range(len(augmentations))), seed=seed, shape=shape,
                            dtype=DALIDataType.INT32)
    signed = any(aug.randomly_negate for aug in augmentations)
    mag_bin = signed_bin(m, seed=seed, shape=shape) if signed else m
    forbid_unused_kwargs(augmentations, kwargs, "apply_rand_augment")
    for level in range(n):
        level_bin = mag_bin if not signed or n == 1 else mag_bin[level]
        op_kwargs = dict(data=data, magnitude_bin=level_bin, num_magnitude_bins=num_magnitude_bins, **kwargs)
        data = pretty_select(augmentations, op_idx if n == 1 else op_idx[level], op_kwargs,
                             auto_aug_name="apply_rand_augment", ref_suite_name="get_rand_augment_suite")
    return data


def get_rand_augment_suite(use_shape: bool = False, max_translate_abs=None, max_translate_rel=None):
    """RandAugment's 14 augmentations, each stronger at a higher bin."""
    return get_translations(use_shape, 100, 100 / 224, max_translate_abs, max_translate_rel) + [
        a.shear_x.augmentation((0, 0.3), True),
        a.shear_y.augmentation((0, 0.3), True),
        a.rotate.augmentation((0, 30), True),
        a.brightness.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.contrast.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.color.augmentation((0, 0.9), True, a.shift_enhance_range),
        a.sharpness.augmentation((0, 0.9), True, a.sharpness_kernel),
        a.posterize.augmentation((8, 4), False, a.poster_mask_uint8),
        a.solarize.augmentation((256, 0)),  # a lower threshold solarizes more
        a.equalize,
        a.auto_contrast,
        a.identity,
    ]


def get_rand_augment_non_monotonic_suite(use_shape: bool = False, max_translate_abs=None, max_translate_rel=None):
    """RandAugment's augmentations with AutoAugment's ranges for the colour ones (not stronger with the bin)."""
    return get_translations(use_shape, 100, 100 / 224, max_translate_abs, max_translate_rel) + [
        a.shear_x.augmentation((0, 0.3), True),
        a.shear_y.augmentation((0, 0.3), True),
        a.rotate.augmentation((0, 30), True),
        a.brightness.augmentation((0.1, 1.9), False, None),
        a.contrast.augmentation((0.1, 1.9), False, None),
        a.color.augmentation((0.1, 1.9), False, None),
        a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted),
        a.posterize.augmentation((0, 4), False, a.poster_mask_uint8),
        a.solarize.augmentation((0, 256), False, None),
        a.equalize,
        a.auto_contrast,
        a.identity,
    ]


__getattr__ = refuse(__name__, "nvidia.dali.auto_aug.rand_augment")  # any other name: NotImplementedError
