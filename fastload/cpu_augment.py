"""Augmentation on the CPU: geometry per sample in Pillow, values per sample in C or per batch in torch.

Crop, antialiased resize, rotation or affine map, and flips run per sample
in the worker thread on uint8 pixels (Pillow releases the GIL, and
pillow-simd vectorizes the resampling). A rotation torchvision would apply
to a PIL image is Pillow's, as there; one it would apply to a tensor is its
grid sampling, through the kernel's plain-torch twin (``warp_torch``). The value part
of the plan -- dtype, scale, normalize, NCHW -- is torchvision's ops in
their order (``fastload.kernels.normalize``). For float32 output it runs per
sample in ``fastload._normalize`` (one pass, flip folded in, no GIL, no
OpenMP: a lookup of each level's value, computed by those ops), straight into
the sample's row of the batch; otherwise, or without the extension, once per
batch on a staged uint8 batch with torch's ops. Color
operations (ColorJitter, grayscale) run per batch on the staged batch with
``fastload.kernels.augment_torch``, the fused kernel's plain-torch twin and
its tests' oracle, so the CPU and GPU paths compute the same values.
"""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from fastload.kernels.augment_torch import finish_torch, warp_torch
from fastload.kernels.normalize import normalize_torch, table_bytes

try:
    from . import _normalize
except ImportError:  # built without a C compiler: batches are normalized in torch
    _normalize = None

from .decode import Decoded
from .transforms import AffineGeometry, Draw, Plan


def transform_image(decoded: Decoded, draw: Draw, resample: int, flip: bool = True,
                    affine: AffineGeometry | None = None) -> Image.Image:
    """Crop, resize, rotate or map (``affine``: the plan's), flip vertically and (unless ``flip`` is False)
    horizontally; returns RGB."""
    image, scale = decoded.image, decoded.scale
    x0, y0 = decoded.origin
    if scale != 1 or draw.box_resize:
        left, top, right, bottom = draw.source_box
        box = (left / scale - x0, top / scale - y0, right / scale - x0, bottom / scale - y0)
        image = image.resize(draw.resampled_size[::-1], resample, box=box)
    else:
        if draw.crop is not None:
            left, top, right, bottom = draw.crop
            crop = (left - x0, top - y0, right - x0, bottom - y0)
            if crop != (0, 0, image.width, image.height):
                image = image.crop(crop)
        if draw.resize is not None and image.size != draw.resize:
            image = image.resize(draw.resize, resample)
        if draw.post_crop is not None:
            image = image.crop(draw.post_crop)
    if draw.affine is not None:
        image = warp_image(image, draw, affine)
    if flip and draw.hflip:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if draw.vflip:
        image = image.transpose(Image.Transpose.FLIP_TOP_BOTTOM)
    if image.mode != "RGB":
        image = image.convert("RGB")
    return image


def warp_image(image: Image.Image, draw: Draw, affine: AffineGeometry) -> Image.Image:
    """The flips before the rotation or affine map, then the map itself, as torchvision applies them: on
    a PIL image, Pillow's ``transform`` with the matrix torchvision gives it; on a tensor, grid sampling
    with torchvision's fill mask, rounded back to uint8. Returns RGB."""
    image = image.convert("RGB") if image.mode != "RGB" else image
    if draw.pre_flips[0]:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if draw.pre_flips[1]:
        image = image.transpose(Image.Transpose.FLIP_TOP_BOTTOM)
    height, width = affine.output_size
    if affine.pil:
        resample = Image.Resampling.NEAREST if affine.nearest else Image.Resampling.BILINEAR
        return image.transform((width, height), Image.Transform.AFFINE, draw.affine, resample,
                               fillcolor=tuple(int(v) for v in affine.fill))
    levels = torch.from_numpy(np.array(image)).permute(2, 0, 1)[None].float()
    warped = warp_torch(levels, torch.tensor([draw.affine]), affine.output_size, affine.nearest, affine.fill)
    return Image.fromarray(warped[0].round_().permute(1, 2, 0).to(torch.uint8).contiguous().numpy())


def normalizes_per_sample(plan: Plan) -> bool:
    """Whether ``write_normalized`` can produce this plan's output (float32, extension built)."""
    return (_normalize is not None and plan.values is not None and plan.dtype == torch.float32
            and not plan.color)


def write_normalized(image: Image.Image, hflip: bool, plan: Plan, out: torch.Tensor) -> None:
    """Write an RGB image, flipped if ``hflip``, into ``out`` (3, H, W) float32 with the plan's values."""
    width, height = image.size
    _normalize.normalize(image.tobytes(), out.numpy(), height, width, table_bytes(plan.values), hflip)


def _lookup_batch(staged: torch.Tensor, plan: Plan, out: torch.Tensor | None) -> torch.Tensor:
    """``fastload._normalize``'s lookup, image by image, over a staged batch: the same values as torch's
    ops (``normalize_torch``), in 3 to 4 times less time on one core. Into ``out`` where it is float32 and
    NCHW-contiguous, else through a float32 batch (float16 and bfloat16 values convert exactly)."""
    n, height, width, _ = staged.shape
    out = torch.empty((n, 3, height, width), dtype=plan.dtype) if out is None else out
    target = out if out.dtype == torch.float32 and out.is_contiguous() else torch.empty(out.shape)
    table = table_bytes(plan.values)
    for image, row in zip(staged.contiguous().numpy(), target.numpy()):
        _normalize.normalize(image, row, height, width, table, False)
    return out if target is out else out.copy_(target)


def finish_batch(staged: torch.Tensor, plan: Plan, out: torch.Tensor | None = None,
                 color: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> (N, 3, H, W) in the plan's dtype and values.

    ``color`` is the batch's (ops, factors), (N, S) each, when the plan has
    color operations.
    """
    if not plan.color:
        if _normalize is not None and plan.values is not None and staged.device.type == "cpu":
            return _lookup_batch(staged, plan, out)
        return normalize_torch(staged, plan.values, out=out)
    levels = staged.permute(0, 3, 1, 2)
    # the color operations act on uint8 levels, or on torchvision's first floats (ToTensor's or ToDtype's)
    levels = levels.float() if plan.color_quantized else plan.normalization.to_unit(levels)
    ops, factors = color
    return finish_torch(levels, ops, factors, plan.output_dtype, values=plan.values,
                        quantize=plan.color_quantized, out=out)
