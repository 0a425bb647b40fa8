"""Batch value conversion: (N, H, W, 3) uint8 -> (N, 3, H, W) in any dtype, scaled and normalized.

``ToDtype(scale=True)`` followed by ``Normalize(mean, std)`` is one
per-channel affine map of the uint8 pixel: ``x * scale[c] + shift[c]`` with
``scale = 1 / (255 * std)`` and ``shift = -mean / std``. Applying it once per
batch, straight from the uint8 staging buffer into the output, reads each
byte once and writes each output element once, instead of torchvision's
three full passes per sample. ``normalize_torch`` is it in plain torch: what
the CPU path runs (there is no Triton kernel for it: torch's copy and
in-place affine are already one pass each).
"""

from __future__ import annotations

import torch


def normalize_torch(images: torch.Tensor, scale, shift, dtype: torch.dtype,
                        out: torch.Tensor | None = None) -> torch.Tensor:
    """Convert a batch of channels-last uint8 images to NCHW ``dtype``.

    Args:
        images: (N, H, W, C) uint8.
        scale, shift: per-channel floats (length C; a sequence or a float32
            tensor, which is used without a copy), or None for a plain uint8
            layout change.
        dtype: output dtype; the affine map is computed in float32 and
            rounded once to ``dtype``.
        out: optional (N, C, H, W) output tensor to write into.
    """
    nchw = images.permute(0, 3, 1, 2)
    if out is None:
        out = torch.empty(nchw.shape, dtype=dtype if scale is not None else torch.uint8,
                          device=images.device)
    if scale is None:
        return out.copy_(nchw)
    channels = nchw.shape[1]
    scale_t = torch.as_tensor(scale, dtype=torch.float32, device=images.device).view(1, channels, 1, 1)
    shift_t = torch.as_tensor(shift, dtype=torch.float32, device=images.device).view(1, channels, 1, 1)
    if out.dtype == torch.float32:
        # Converting copy first (one strided read of the uint8 bytes), then the
        # affine in place: 4x faster on CPU than a type-promoting mul from the
        # permuted uint8 view.
        out.copy_(nchw)
        return out.mul_(scale_t).add_(shift_t)
    wide = torch.empty(nchw.shape, dtype=torch.float32, device=images.device).copy_(nchw)
    return out.copy_(wide.mul_(scale_t).add_(shift_t))
