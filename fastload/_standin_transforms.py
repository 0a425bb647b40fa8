"""Stand-ins for torchvision's transforms, for a process where torchvision cannot be imported.

See ``fastload._torchvision``: a torchvision built for another torch fails
on import, yet fastload's fast path needs none of its code. These classes
take torchvision.transforms.v2's constructor arguments, check them as v2
does, and keep the attributes ``fastload.transforms.compile_plan`` reads,
so a Compose of them compiles to the same plan. They transform nothing
themselves: calling one raises, saying why torchvision is missing. The
transforms whose meaning needs more of torchvision (color, rotation,
affine) refuse to be made rather than differ.
"""

from __future__ import annotations

import enum
import numbers
from collections.abc import Sequence
from types import SimpleNamespace

import torch


class InterpolationMode(enum.Enum):
    """torchvision.transforms.InterpolationMode's values."""

    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


def _interpolation_modes_from_int(value: int) -> InterpolationMode:
    """A PIL resampling constant as torchvision reads it."""
    return {0: InterpolationMode.NEAREST, 2: InterpolationMode.BILINEAR, 3: InterpolationMode.BICUBIC,
            4: InterpolationMode.BOX, 5: InterpolationMode.HAMMING, 1: InterpolationMode.LANCZOS}[value]


def _size_pair(size, name: str) -> tuple[int, int]:
    """torchvision's ``_setup_size``: an int or a 1- or 2-sequence as (height, width)."""
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) == 1:
        return size[0], size[0]
    if isinstance(size, Sequence) and len(size) == 2:
        return size[0], size[1]
    raise ValueError(f"{name}: please provide only two dimensions (h, w) for size.")


def make(reason: str) -> SimpleNamespace:
    """The stand-in classes, as one namespace that serves as both ``v1`` and ``v2``; ``reason`` says why
    torchvision is missing."""

    class Transform(torch.nn.Module):
        """Holds its arguments for fastload's plan; running it needs torchvision."""

        def forward(self, *inputs):
            raise RuntimeError(f"{type(self).__name__} cannot run here: {reason}. fastload compiles it into "
                               f"its fast path (fastload's sources, or a fast-path transform), which needs no "
                               f"torchvision; anything else needs a torchvision built for this torch")

        def __repr__(self) -> str:
            fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_")
                               and k != "training")
            return f"{type(self).__name__}({fields})"

    class Compose(Transform):
        def __init__(self, transforms):
            super().__init__()
            if not isinstance(transforms, Sequence):
                raise TypeError("Argument transforms should be a sequence of callables")
            if not transforms:
                raise ValueError("Pass at least one transform")
            self.transforms = list(transforms)

    def interpolation_of(value) -> InterpolationMode:
        return _interpolation_modes_from_int(value) if isinstance(value, int) else InterpolationMode(value)

    class RandomResizedCrop(Transform):
        def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                     interpolation=InterpolationMode.BILINEAR, antialias=True):
            super().__init__()
            self.size = _size_pair(size, "RandomResizedCrop")
            if not isinstance(scale, Sequence) or not isinstance(ratio, Sequence):
                raise TypeError("Scale and ratio should be sequences")
            self.scale, self.ratio = scale, ratio
            self.interpolation, self.antialias = interpolation_of(interpolation), antialias

    class Resize(Transform):
        def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
            super().__init__()
            if isinstance(size, int):
                size = [size]
            elif isinstance(size, Sequence) and len(size) in (1, 2):
                size = list(size)
            elif size is None:
                if not isinstance(max_size, int):
                    raise ValueError(f"max_size must be an integer when size is None, but got {max_size}.")
            else:
                raise ValueError(f"size can be an integer, a sequence of one or two integers, or None, "
                                 f"but got {size} instead.")
            self.size, self.max_size = size, max_size
            self.interpolation, self.antialias = interpolation_of(interpolation), antialias

    class CenterCrop(Transform):
        def __init__(self, size):
            super().__init__()
            self.size = _size_pair(size, "CenterCrop")

    class _Flip(Transform):
        def __init__(self, p: float = 0.5):
            super().__init__()
            if not 0.0 <= p <= 1.0:
                raise ValueError("`p` should be a floating point value in the interval [0.0, 1.0].")
            self.p = p

    class RandomHorizontalFlip(_Flip):
        pass

    class RandomVerticalFlip(_Flip):
        pass

    class ToImage(Transform):
        pass

    class PILToTensor(Transform):
        pass

    class ToPureTensor(Transform):
        pass

    class ToDtype(Transform):
        def __init__(self, dtype, scale: bool = False):
            super().__init__()
            self.dtype, self.scale = dtype, scale

    class Normalize(Transform):
        def __init__(self, mean, std, inplace: bool = False):
            super().__init__()
            self.mean, self.std, self.inplace = list(mean), list(std), inplace

    def refused(name: str) -> type:
        def __init__(self, *args, **kwargs):
            raise ImportError(f"fastload.transforms.{name} needs torchvision, and {reason}; without it, the "
                              f"fast path's geometric and value steps (RandomResizedCrop, Resize, CenterCrop, "
                              f"flips, ToImage, ToDtype, Normalize) still work")
        return type(name, (Transform,), {"__init__": __init__})

    namespace = SimpleNamespace(**{cls.__name__: cls for cls in (
        Transform, Compose, RandomResizedCrop, Resize, CenterCrop, RandomHorizontalFlip, RandomVerticalFlip,
        ToImage, PILToTensor, ToPureTensor, ToDtype, Normalize)})
    for name in ("ColorJitter", "Grayscale", "RandomGrayscale", "RandomApply", "RandomRotation", "RandomAffine",
                 "ToTensor", "ConvertImageDtype"):
        setattr(namespace, name, refused(name))
    for cls in vars(namespace).values():
        cls.__module__ = __name__
    return namespace


def affine_unavailable(*args, **kwargs):
    """Where torchvision's affine helpers would be: unreachable, since RandomRotation/RandomAffine refuse."""
    raise ImportError("torchvision's affine helpers are unavailable: torchvision cannot be imported")
