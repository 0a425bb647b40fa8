"""DALI's AutoAugment (``nvidia.dali.auto_aug.auto_augment``): ``auto_augment`` with the ImageNet (default),
reduced ImageNet, SVHN and reduced CIFAR-10 policies of the AutoAugment paper, and ``apply_auto_augment``
for a ``core.Policy`` of one's own.

Per sample, as DALI draws them: a sub-policy (``fn.random.uniform(values=...)``), one uniform [0, 1) value
per stage (the stage runs where it is below the stage's probability) and, where any augmentation negates,
one random sign per stage. A stage's augmentation is picked by ``core.select`` and its run or skip by a
``Select`` on the probability test: a sample pays only for what it gets. The random values come from
fastload's per-sample streams (``fn.random``), so they are DALI's distributions, not DALI's numbers.
"""

from __future__ import annotations

import numpy as np

from ..conditionals import Select
from ...engine.graph import DataNode
from ..operators import random_uniform
from ..types import DALIDataType
from ..unsupported import refuse
from . import augmentations as a
from ._utils import get_translations, pretty_select
from .core import Policy, _lookup, forbid_unused_kwargs, signed_bin

__all__ = ["auto_augment", "auto_augment_image_net", "apply_auto_augment", "get_image_net_policy",
           "get_reduced_image_net_policy", "get_svhn_policy", "get_reduced_cifar10_policy"]


def auto_augment(data: DataNode, policy_name: str = "image_net", shape=None, fill_value=128, interp_type=None,
                 max_translate_abs=None, max_translate_rel=None, seed=None) -> DataNode:
    """One of the AutoAugment paper's policies applied to uint8 HWC images. ``shape`` (H, W: numbers or a
    DataNode such as ``fn.peek_image_shape``'s) makes translations relative to the image (up to
    ``max_translate_rel``, default 1) instead of absolute (up to ``max_translate_abs`` pixels, default 250);
    ``fill_value`` pads the warps (None: the border repeated); ``interp_type`` INTERP_LINEAR or INTERP_NN."""
    policies = {"image_net": get_image_net_policy, "reduced_image_net": get_reduced_image_net_policy,
                "svhn": get_svhn_policy, "reduced_cifar10": get_reduced_cifar10_policy}
    if not isinstance(policy_name, str) or policy_name not in policies:
        names = ", ".join(f"`{name}`" for name in policies)
        raise Exception(f"The `policy_name` must be a string that takes one of the values: {names}")
    if policy_name == "reduced_image_net":
        given = next((name for value, name in ((shape, "shape"), (max_translate_abs, "max_translate_abs"),
                                               (max_translate_rel, "max_translate_rel")) if value is not None), None)
        if given is not None:
            raise Exception(f"The policy `{policy_name}` does not contain any augmentations that rely on the image "
                            f"shape. The `{given}` argument must not be specified in that case.")
        policy = get_reduced_image_net_policy()
    else:
        policy = policies[policy_name](use_shape=shape is not None, max_translate_abs=max_translate_abs,
                                       max_translate_rel=max_translate_rel)
    kwargs = {"fill_value": fill_value, "interp_type": interp_type}
    if shape is not None:
        kwargs["shape"] = shape
    return apply_auto_augment(policy, data, seed, **kwargs)


def auto_augment_image_net(data, shape=None, fill_value=128, interp_type=None, max_translate_abs=None,
                           max_translate_rel=None, seed=None):
    """``auto_augment(data, "image_net", ...)``."""
    return auto_augment(data, "image_net", shape, fill_value, interp_type, max_translate_abs, max_translate_rel,
                        seed)


def apply_auto_augment(policy: Policy, data: DataNode, seed=None, **kwargs) -> DataNode:
    """``policy`` applied AutoAugment's way (see the module docstring); ``kwargs`` (shape, fill_value,
    interp_type, ...) go to the augmentations that accept them, and one no augmentation accepts is an error."""
    if len(policy.sub_policies) == 0:
        raise Exception(f"Cannot run empty policy. Got {policy} in `apply_auto_augment` call.")
    stages = max(len(sub) for sub in policy.sub_policies)
    should_run = random_uniform(range=[0, 1], shape=(stages,), dtype=DALIDataType.FLOAT, seed=seed)
    sub_policy_id = random_uniform(values=list(range(len(policy.sub_policies))), seed=seed,
                                   dtype=DALIDataType.INT32)
    probabilities = _lookup(_table(policy, lambda aug, p, mag: p, 0.0, np.float32), sub_policy_id)
    magnitude_bins = _lookup(_table(policy, lambda aug, p, mag: -999 if mag is None else mag, 0, np.int32),
                             sub_policy_id)
    ids, stage_augments = _augmentation_table(policy)
    aug_ids = _lookup(ids, sub_policy_id)
    if any(aug.randomly_negate for aug in policy.augmentations.values()):
        magnitude_bins = signed_bin(magnitude_bins, seed=seed, shape=(stages,))
    forbid_unused_kwargs(policy.augmentations.values(), kwargs, "apply_auto_augment")
    for stage in range(stages):
        op_kwargs = dict(data=data, magnitude_bin=magnitude_bins[stage],
                         num_magnitude_bins=policy.num_magnitude_bins, **kwargs)
        augmented = pretty_select(stage_augments[stage], aug_ids[stage], op_kwargs,
                                  auto_aug_name="apply_auto_augment", ref_suite_name="get_image_net_policy")
        data = Select(should_run[stage] < probabilities[stage], augmented, data).outputs[0]
    return data


def _table(policy: Policy, value, empty, dtype) -> np.ndarray:
    """[sub-policy, stage] -> ``value(aug, p, mag)``; ``empty`` past a shorter sub-policy's end."""
    stages = max(len(sub) for sub in policy.sub_policies)
    table = np.full((len(policy.sub_policies), stages), empty, dtype=dtype)
    for i, sub in enumerate(policy.sub_policies):
        for j, stage in enumerate(sub):
            table[i, j] = value(*stage)
    return table


def _augmentation_table(policy: Policy):
    """Per stage, the distinct augmentations used there (first-seen order) and identity last; and the
    [sub-policy, stage] index into that list (identity past a shorter sub-policy's end)."""
    stages = max(len(sub) for sub in policy.sub_policies)
    per_stage = []
    for j in range(stages):
        seen = []
        for sub in policy.sub_policies:
            if j < len(sub) and sub[j][0] not in seen:
                seen.append(sub[j][0])
        per_stage.append(seen + [a.identity])
    ids = np.array([[len(per_stage[j]) - 1 for j in range(stages)] for _ in policy.sub_policies], dtype=np.int32)
    for i, sub in enumerate(policy.sub_policies):
        for j, (aug, _, _) in enumerate(sub):
            ids[i, j] = per_stage[j].index(aug)
    return ids, per_stage


def get_image_net_policy(use_shape: bool = False, max_translate_abs=None, max_translate_rel=None) -> Policy:
    """The AutoAugment paper's ImageNet policy (25 sub-policies of up to 2 stages, 11 magnitude bins)."""
    _, translate_y = get_translations(use_shape, 250, 1.0, max_translate_abs, max_translate_rel)
    shear_x = a.shear_x.augmentation((0, 0.3), True)
    shear_y = a.shear_y.augmentation((0, 0.3), True)
    rotate = a.rotate.augmentation((0, 30), True)
    color = a.color.augmentation((0.1, 1.9), False, None)
    posterize = a.posterize.augmentation((0, 4), False, a.poster_mask_uint8)
    solarize = a.solarize.augmentation((0, 256), False)
    solarize_add = a.solarize_add.augmentation((0, 110), False)
    invert, equalize, auto_contrast = a.invert, a.equalize, a.auto_contrast
    return Policy(name="ImageNetPolicy", num_magnitude_bins=11, sub_policies=[
        [(equalize, 0.8, None), (shear_y, 0.8, 4)],
        [(color, 0.4, 9), (equalize, 0.6, None)],
        [(color, 0.4, 1), (rotate, 0.6, 8)],
        [(solarize, 0.8, 3), (equalize, 0.4, None)],
        [(solarize, 0.4, 2), (solarize, 0.6, 2)],
        [(color, 0.2, 0), (equalize, 0.8, None)],
        [(equalize, 0.4, None), (solarize_add, 0.8, 3)],
        [(shear_x, 0.2, 9), (rotate, 0.6, 8)],
        [(color, 0.6, 1), (equalize, 1.0, None)],
        [(invert, 0.4, None), (rotate, 0.6, 0)],
        [(equalize, 1.0, None), (shear_y, 0.6, 3)],
        [(color, 0.4, 7), (equalize, 0.6, None)],
        [(posterize, 0.4, 6), (auto_contrast, 0.4, None)],
        [(solarize, 0.6, 8), (color, 0.6, 9)],
        [(solarize, 0.2, 4), (rotate, 0.8, 9)],
        [(rotate, 1.0, 7), (translate_y, 0.8, 9)],
        [(solarize, 0.8, 4)],
        [(shear_y, 0.8, 0), (color, 0.6, 4)],
        [(color, 1.0, 0), (rotate, 0.6, 2)],
        [(equalize, 0.8, None)],
        [(equalize, 1.0, None), (auto_contrast, 0.6, None)],
        [(shear_y, 0.4, 7), (solarize_add, 0.6, 7)],
        [(posterize, 0.8, 2), (solarize, 0.6, 10)],
        [(solarize, 0.6, 8), (equalize, 0.6, None)],
        [(color, 0.8, 6), (rotate, 0.4, 5)],
    ])


def get_reduced_cifar10_policy(use_shape: bool = False, max_translate_abs=None, max_translate_rel=None) -> Policy:
    """The AutoAugment paper's reduced CIFAR-10 policy."""
    translate_x, translate_y = get_translations(use_shape, 250, 1.0, max_translate_abs, max_translate_rel)
    shear_y = a.shear_y.augmentation((0, 0.3), True)
    rotate = a.rotate.augmentation((0, 30), True)
    brightness = a.brightness.augmentation((0.1, 1.9), False, None)
    color = a.color.augmentation((0.1, 1.9), False, None)
    contrast = a.contrast.augmentation((0.1, 1.9), False, None)
    sharpness = a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted)
    posterize = a.posterize.augmentation((0, 4), False, a.poster_mask_uint8)
    solarize = a.solarize.augmentation((0, 256), False)
    invert, equalize, auto_contrast = a.invert, a.equalize, a.auto_contrast
    return Policy(name="ReducedCifar10Policy", num_magnitude_bins=11, sub_policies=[
        [(invert, 0.1, None), (contrast, 0.2, 6)],
        [(rotate, 0.7, 2), (translate_x, 0.3, 9)],
        [(sharpness, 0.8, 1), (sharpness, 0.9, 3)],
        [(shear_y, 0.5, 8), (translate_y, 0.7, 9)],
        [(auto_contrast, 0.5, None), (equalize, 0.9, None)],
        [(shear_y, 0.2, 7), (posterize, 0.3, 7)],
        [(color, 0.4, 3), (brightness, 0.6, 7)],
        [(sharpness, 0.3, 9), (brightness, 0.7, 9)],
        [(equalize, 0.6, None), (equalize, 0.5, None)],
        [(contrast, 0.6, 7), (sharpness, 0.6, 5)],
        [(color, 0.7, 7), (translate_x, 0.5, 8)],
        [(equalize, 0.3, None), (auto_contrast, 0.4, None)],
        [(translate_y, 0.4, 3), (sharpness, 0.2, 6)],
        [(brightness, 0.9, 6), (color, 0.2, 8)],
        [(solarize, 0.5, 2)],
        [(equalize, 0.2, None), (auto_contrast, 0.6, None)],
        [(equalize, 0.2, None), (equalize, 0.6, None)],
        [(color, 0.9, 9), (equalize, 0.6, None)],
        [(auto_contrast, 0.8, None), (solarize, 0.2, 8)],
        [(brightness, 0.1, 3), (color, 0.7, 0)],
        [(solarize, 0.4, 5), (auto_contrast, 0.9, None)],
        [(translate_y, 0.9, 9), (translate_y, 0.7, 9)],
        [(auto_contrast, 0.9, None), (solarize, 0.8, 3)],
        [(equalize, 0.8, None), (invert, 0.1, None)],
        [(translate_y, 0.7, 9), (auto_contrast, 0.9, None)],
    ])


def get_svhn_policy(use_shape: bool = False, max_translate_abs=None, max_translate_rel=None) -> Policy:
    """The AutoAugment paper's SVHN policy."""
    translate_x, translate_y = get_translations(use_shape, 250, 1.0, max_translate_abs, max_translate_rel)
    shear_x = a.shear_x.augmentation((0, 0.3), True)
    shear_y = a.shear_y.augmentation((0, 0.3), True)
    rotate = a.rotate.augmentation((0, 30), True)
    contrast = a.contrast.augmentation((0.1, 1.9), False, None)
    solarize = a.solarize.augmentation((0, 256), False)
    invert, equalize, auto_contrast = a.invert, a.equalize, a.auto_contrast
    return Policy(name="SvhnPolicy", num_magnitude_bins=11, sub_policies=[
        [(shear_x, 0.9, 4), (invert, 0.2, None)],
        [(shear_y, 0.9, 8), (invert, 0.7, None)],
        [(equalize, 0.6, None), (solarize, 0.6, 6)],
        [(invert, 0.9, None), (equalize, 0.6, None)],
        [(equalize, 0.6, None), (rotate, 0.9, 3)],
        [(shear_x, 0.9, 4), (auto_contrast, 0.8, None)],
        [(shear_y, 0.9, 8), (invert, 0.4, None)],
        [(shear_y, 0.9, 5), (solarize, 0.2, 6)],
        [(invert, 0.9, None), (auto_contrast, 0.8, None)],
        [(equalize, 0.6, None), (rotate, 0.9, 3)],
        [(shear_x, 0.9, 4), (solarize, 0.3, 3)],
        [(shear_y, 0.8, 8), (invert, 0.7, None)],
        [(equalize, 0.9, None), (translate_y, 0.6, 6)],
        [(invert, 0.9, None), (equalize, 0.6, None)],
        [(contrast, 0.3, 3), (rotate, 0.8, 4)],
        [(invert, 0.8, None)],
        [(shear_y, 0.7, 6), (solarize, 0.4, 8)],
        [(invert, 0.6, None), (rotate, 0.8, 4)],
        [(shear_y, 0.3, 7), (translate_x, 0.9, 3)],
        [(shear_x, 0.1, 6), (invert, 0.6, None)],
        [(solarize, 0.7, 2), (translate_y, 0.6, 7)],
        [(shear_y, 0.8, 4), (invert, 0.8, None)],
        [(shear_x, 0.7, 9), (translate_y, 0.8, 3)],
        [(shear_y, 0.8, 5), (auto_contrast, 0.7, None)],
        [(shear_x, 0.7, 2), (invert, 0.1, None)],
    ])


def get_reduced_image_net_policy() -> Policy:
    """The AutoAugment paper's reduced ImageNet policy (no translations)."""
    shear_x = a.shear_x.augmentation((0, 0.3), True)
    rotate = a.rotate.augmentation((0, 30), True)
    color = a.color.augmentation((0.1, 1.9), False, None)
    contrast = a.contrast.augmentation((0.1, 1.9), False, None)
    sharpness = a.sharpness.augmentation((0.1, 1.9), False, a.sharpness_kernel_shifted)
    posterize = a.posterize.augmentation((0, 4), False, a.poster_mask_uint8)
    solarize = a.solarize.augmentation((0, 256), False)
    invert, equalize, auto_contrast = a.invert, a.equalize, a.auto_contrast
    return Policy(name="ReducedImageNetPolicy", num_magnitude_bins=11, sub_policies=[
        [(posterize, 0.4, 8), (rotate, 0.6, 9)],
        [(solarize, 0.6, 5), (auto_contrast, 0.6, None)],
        [(equalize, 0.8, None), (equalize, 0.6, None)],
        [(posterize, 0.6, 7), (posterize, 0.6, 6)],
        [(equalize, 0.4, None), (solarize, 0.2, 4)],
        [(equalize, 0.4, None), (rotate, 0.8, 8)],
        [(solarize, 0.6, 3), (equalize, 0.6, None)],
        [(posterize, 0.8, 5), (equalize, 1.0, None)],
        [(rotate, 0.2, 3), (solarize, 0.6, 8)],
        [(equalize, 0.6, None), (posterize, 0.4, 6)],
        [(rotate, 0.8, 8), (color, 0.4, 0)],
        [(rotate, 0.4, 9), (equalize, 0.6, None)],
        [(equalize, 0.8, None)],
        [(invert, 0.6, None), (equalize, 1.0, None)],
        [(color, 0.6, 4), (contrast, 1.0, 8)],
        [(rotate, 0.8, 8), (color, 1.0, 2)],
        [(color, 0.8, 8), (solarize, 0.8, 7)],
        [(sharpness, 0.4, 7), (invert, 0.6, None)],
        [(shear_x, 0.6, 5), (equalize, 1.0, None)],
        [(color, 0.4, 0), (equalize, 0.6, None)],
        [(equalize, 0.4, None), (solarize, 0.2, 4)],
        [(solarize, 0.6, 5), (auto_contrast, 0.6, None)],
        [(invert, 0.6, None), (equalize, 1.0, None)],
        [(color, 0.6, 4), (contrast, 1.0, 8)],
        [(equalize, 0.8, None), (equalize, 0.6, None)],
    ])


__getattr__ = refuse(__name__, "nvidia.dali.auto_aug.auto_augment")  # any other name: NotImplementedError
