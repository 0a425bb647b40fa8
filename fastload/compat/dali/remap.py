"""DALI's operators that move or mask pixels by a coordinate rule: ``fn.grid_mask`` and
``fn.experimental.warp_perspective``.

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_remap.py); the rules below are
the ones measured there:

- ``grid_mask``: pixel (y, x) is kept where ``frac(fx) >= ratio`` or ``frac(fy) >= ratio``, with, in
  float32, ``ca = cosf(angle) / tile``, ``sa = sinf(angle) / tile``, ``fx = (-shift_x / tile - y sa) + x ca``
  and ``fy = (-shift_y / tile + y ca) + x sa``; the others are zeroed, every channel. Exact (tolerance 0).
  DALI reads any 3-D sample as (H, W, C); uint8, int16, int32 and float32, as DALI.

DALI 2.4 has no CPU operator for ``fn.experimental.remap``, ``fn.experimental.median_blur``,
``fn.experimental.erode``, ``fn.experimental.dilate`` or ``fn.jitter`` (GPU-only: ``GPU_ONLY``); fastload runs
the CPU operators, so those names are refused.
"""

from __future__ import annotations

import numpy as np
import torch

from ..engine.graph import Op
from ..float32 import libm_float
from .operators import _device, _one, check_args
from .spec import operator

_F32 = np.float32

# DALI 2.4 operators registered for the GPU only (checked against its registry by the tests): fn name -> ops name
GPU_ONLY = {"experimental.remap": "experimental.Remap", "experimental.median_blur": "experimental.MedianBlur",
            "experimental.erode": "experimental.Erode", "experimental.dilate": "experimental.Dilate",
            "jitter": "Jitter"}
GPU_ONLY_REASON = "GPU-only in DALI 2.4; fastload runs the CPU operators"


# ------------------------------------------------------------------------------------------ grid mask

_GRID_TYPES = (torch.uint8, torch.int16, torch.int32, torch.float32)


def grid_keep(height: int, width: int, tile: int, ratio: float, angle: float, shift_x: float,
              shift_y: float) -> np.ndarray:
    """(height, width) booleans: True where fn.grid_mask keeps the pixel (the module docstring's rule)."""
    tile_f = _F32(tile)
    ca = _F32(libm_float("cos", _F32(angle)) / tile_f)
    sa = _F32(libm_float("sin", _F32(angle)) / tile_f)
    sx, sy = _F32(_F32(shift_x) / tile_f), _F32(_F32(shift_y) / tile_f)
    ys = np.arange(height, dtype=_F32)[:, None]
    xs = np.arange(width, dtype=_F32)[None, :]
    fx = (-sx + ys * -sa) + xs * ca
    fy = (-sy + ys * ca) + xs * sa
    return ((fx - np.floor(fx)) >= _F32(ratio)) | ((fy - np.floor(fy)) >= _F32(ratio))


def grid_mask_image(image: torch.Tensor, tile, ratio, angle, shift_x, shift_y) -> torch.Tensor:
    """One (H, W, C) sample with fn.grid_mask's squares zeroed."""
    if image.dim() != 3:
        raise ValueError(f"fastload.compat.dali: fn.grid_mask: expected 3-D (HWC) samples, got shape "
                         f"{tuple(image.shape)}")
    if image.dtype not in _GRID_TYPES:
        raise NotImplementedError(f"fastload.compat.dali: fn.grid_mask of {image.dtype} input is not supported "
                                  f"(uint8, int16, int32, float32, as DALI)")
    if int(tile) <= 0:
        raise ValueError(f"fastload.compat.dali: fn.grid_mask: tile must be positive, got {tile}")
    keep = grid_keep(image.shape[0], image.shape[1], int(tile), float(ratio), float(angle), float(shift_x),
                     float(shift_y))
    return image * torch.from_numpy(keep).to(image.device, image.dtype).unsqueeze(-1)


@operator("grid_mask", "GridMask")
def grid_mask(data, *, tile=100, ratio=0.5, angle=0.0, shift_x=0.0, shift_y=0.0, device=None, **args):
    """``fn.grid_mask``: GridMask (squares of ``ratio * tile`` zeroed every ``tile`` pixels, the grid
    rotated by ``angle`` radians and shifted by ``shift_x``/``shift_y``); every argument per sample allowed."""
    check_args("fn.grid_mask", args, set())
    settings = {"tile": tile, "ratio": ratio, "angle": angle, "shift_x": shift_x, "shift_y": shift_y}

    def run(ctx, op, image, **a):
        return grid_mask_image(image, **a)
    return _one(Op("grid_mask", run, [data], settings, device=_device([data], device), layouts=(data.layout(),),
                   fusable=False))
