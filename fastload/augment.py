"""Augmentation on the CPU: per-sample geometry in Pillow, per-batch values in torch.

Crop, antialiased resize and flip run per sample in the worker thread on
uint8 pixels (Pillow releases the GIL, and pillow-simd vectorizes the
resampling). The value part of the plan -- dtype, scale, normalize, NCHW --
runs once per batch on the staged uint8 batch, with the math of
``fastload.kernels.normalize``.
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from fastload.kernels.normalize import normalize_reference

from .transforms import Geometry, Plan


def apply_geometry(image: Image.Image, geometry: Geometry, scale: int, resample: int) -> np.ndarray:
    """Crop, resize and flip an image decoded at 1/``scale``; returns HxWx3 uint8."""
    if scale != 1:
        box = tuple(c / scale for c in geometry.source_box)
        image = image.resize(geometry.output_size, resample, box=box)
    else:
        if geometry.crop is not None:
            image = image.crop(geometry.crop)
        if geometry.resize is not None and image.size != geometry.resize:
            image = image.resize(geometry.resize, resample)
        if geometry.post_crop is not None:
            image = image.crop(geometry.post_crop)
    if geometry.hflip:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if image.mode != "RGB":
        image = image.convert("RGB")
    return np.asarray(image)


def finish_batch(staged: torch.Tensor, plan: Plan, out: torch.Tensor | None = None) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> (N, 3, H, W) in the plan's dtype and values."""
    return normalize_reference(staged, plan.scale, plan.shift, plan.dtype, out=out)
