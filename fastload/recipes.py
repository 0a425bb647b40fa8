"""Named transform recipes, as users know them from torchvision's references and papers.

Each function returns a transform (a torchvision v2 Compose) that works with
``fastload.DataLoader`` and anywhere torchvision's would; all compile to the
fast path (``simclr``'s color jitter and grayscale as the fused kernel's
color operations).

The command-line tools take the names with dashes: ``resnet50-train``.
This module imports torch only when a recipe is made (``dtype=None`` means
float32), so the command lists the names without loading it.
"""

from __future__ import annotations

import importlib

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _parts(dtype):
    """fastload.transforms and the output dtype (float32 for None), imported when a recipe is made."""
    import torch
    return importlib.import_module(".transforms", __package__), torch.float32 if dtype is None else dtype


def resnet50_train(size: int = 224, dtype=None):
    """torchvision's ImageNet training recipe: RandomResizedCrop, horizontal flip, normalize."""
    T, dtype = _parts(dtype)
    return T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToDtype(dtype, scale=True),
                      T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def resnet50_eval(size: int = 224, resize: int = 256, dtype=None):
    """torchvision's ImageNet evaluation recipe: Resize(256), CenterCrop(224), normalize."""
    T, dtype = _parts(dtype)
    return T.Compose([T.Resize(resize), T.CenterCrop(size), T.ToDtype(dtype, scale=True),
                      T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def simclr(size: int = 224, strength: float = 1.0, dtype=None):
    """SimCLR's augmentation (Chen et al. 2020, without blur): crop, flip, color jitter 0.8, grayscale 0.2."""
    T, dtype = _parts(dtype)
    jitter = T.ColorJitter(0.8 * strength, 0.8 * strength, 0.8 * strength, 0.2 * strength)
    return T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.RandomApply([jitter], p=0.8),
                      T.RandomGrayscale(p=0.2), T.ToDtype(dtype, scale=True),
                      T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


RECIPES = {"resnet50-train": resnet50_train, "resnet50-eval": resnet50_eval, "simclr": simclr}


def by_name(name: str, **options):
    """The recipe called ``name`` (dashes or underscores), or a ValueError listing the known ones."""
    recipe = RECIPES.get(name.replace("_", "-"))
    if recipe is None:
        raise ValueError(f"unknown recipe {name!r}; known: {', '.join(RECIPES)}")
    return recipe(**options)
