"""DALI's TrivialAugment Wide (``nvidia.dali.auto_aug.trivial_augment``): ``trivial_augment_wide``,
``apply_trivial_augment`` for a list of one's own, and the wide suite.

Per sample, as DALI draws them: one augmentation and one magnitude bin, both uniform
(``fn.random.uniform(values=...)``), and a random sign where any augmentation negates. From fastload's
per-sample streams: DALI's distributions, not DALI's numbers.
"""

from __future__ import annotations

from ...engine.graph import DataNode
from ..operators import random_uniform
from ..types import DALIDataType
from ..unsupported import refuse
from . import augmentations as a
from ._utils import get_translations, pretty_select
from .core import forbid_unused_kwargs, signed_bin

__all__ = ["trivial_augment_wide", "apply_trivial_augment", "get_trivial_augment_wide_suite"]


def trivial_augment_wide(data: DataNode, num_magnitude_bins: int = 31, shape=None, fill_value=128,
                         interp_type=None, max_translate_abs=None, max_translate_rel=None, seed=None,
                         excluded=None) -> DataNode:
    """TrivialAugment Wide on uint8 HWC images: one random augmentation of the wide suite at a random bin.
    ``shape`` makes translations relative (up to ``max_translate_rel``, default 1), else they are absolute
    (up to ``max_translate_abs``, default 32 px)."""
    kwargs = {"fill_value": fill_value, "interp_type": interp_type}
    use_shape = shape is not None
    if use_shape:
        kwargs["shape"] = shape
    suite = get_trivial_augment_wide_suite(use_shape=use_shape, max_translate_abs=max_translate_abs,
                                           max_translate_rel=max_translate_rel)
    names = {aug.name for aug in suite}
    for name in excluded or []:
        if name not in names:
            raise Exception(f"The `{name}` was specified in `excluded`, but the TrivialAugmentWide suite does not "
                            f"contain augmentation with this name. The augmentations in the suite are: "
                            f"{', '.join(names)}.")
    chosen = [aug for aug in suite if aug.name not in (excluded or [])]
    return apply_trivial_augment(chosen, data, num_magnitude_bins=num_magnitude_bins, seed=seed, **kwargs)


def apply_trivial_augment(augmentations, data: DataNode, num_magnitude_bins: int = 31, seed=None,
                          **kwargs) -> DataNode:
    """``augmentations`` applied TrivialAugment's way (see the module docstring)."""
    if not isinstance(num_magnitude_bins, int) or num_magnitude_bins < 1:
        raise Exception(f"The `num_magnitude_bins` must be a positive integer, got {num_magnitude_bins}.")
    if len(augmentations) == 0:
        raise Exception("The `augmentations` list cannot be empty. Got empty list in `apply_trivial_augment` call.")
    magnitude_bin = random_uniform(values=list(range(num_magnitude_bins)), dtype=DALIDataType.INT32, seed=seed)
    if any(aug.randomly_negate for aug in augmentations):
        magnitude_bin = signed_bin(magnitude_bin, seed=seed)
    forbid_unused_kwargs(augmentations, kwargs, "apply_trivial_augment")
    op_kwargs = dict(data=data, magnitude_bin=magnitude_bin, num_magnitude_bins=num_magnitude_bins, **kwargs)
    op_idx = random_uniform(values=list(range(len(augmentations))), seed=seed, dtype=DALIDataType.INT32)
    return pretty_select(augmentations, op_idx, op_kwargs, auto_aug_name="apply_trivial_augment",
                         ref_suite_name="get_trivial_augment_wide_suite")


def get_trivial_augment_wide_suite(use_shape: bool = False, max_translate_abs=None, max_translate_rel=None):
    """TrivialAugment's wide augmentation space: 14 augmentations with wide magnitude ranges."""
    return get_translations(use_shape, 32, 1.0, max_translate_abs, max_translate_rel) + [
        a.shear_x.augmentation((0, 0.99), True),
        a.shear_y.augmentation((0, 0.99), True),
        a.rotate.augmentation((0, 135), True),
        a.brightness.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.contrast.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.color.augmentation((0.01, 0.99), True, a.shift_enhance_range),
        a.sharpness.augmentation((0.01, 0.99), True, a.sharpness_kernel),
        a.posterize.augmentation((8, 2), False, a.poster_mask_uint8),
        a.solarize.augmentation((256, 0)),  # a lower threshold solarizes more
        a.equalize,
        a.auto_contrast,
        a.identity,
    ]


__getattr__ = refuse(__name__, "nvidia.dali.auto_aug.trivial_augment")  # any other name: NotImplementedError
