"""DALI's automatic augmentations (``nvidia.dali.auto_aug``) on fastload: AutoAugment (``auto_augment``),
RandAugment (``rand_augment``) and TrivialAugment Wide (``trivial_augment``), their augmentation suite
(``augmentations``) and the building blocks (``core``: ``@augmentation``, ``Policy``, ``select``,
``signed_bin``), with DALI's policies, magnitude ranges and random draws (distributions, not DALI's
numbers: the draws come from fastload's per-sample streams). Each augmentation gives DALI's pixels for a
given magnitude (tests/compat/test_dali_auto_aug.py). Images: uint8 HWC, or FHWC videos frame by frame.
"""

from . import augmentations, auto_augment, core, rand_augment, trivial_augment  # noqa: F401
from ..unsupported import refuse

__all__ = ["augmentations", "auto_augment", "core", "rand_augment", "trivial_augment"]

__getattr__ = refuse(__name__, "nvidia.dali.auto_aug")  # any other name: NotImplementedError naming it
