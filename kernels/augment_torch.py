"""The fused augmentation in plain torch: what ``augment.augment_batch``'s kernels compute.

Two uses: the tests' oracle for the kernels (``augment_torch`` computes all
of ``augment_batch``; ``warp_torch`` takes the kernel's float32 steps in its
order, so the two agree to the bit), and the CPU path's own implementation
(fastload/cpu_augment.py runs ``warp_torch`` and ``finish_torch`` after
Pillow has cropped and resized). ``color_torch`` is the color part alone,
batched. Semantics: kernels/augment.py's docstring.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from .augment import (BRIGHTNESS, CONTRAST, GRAYSCALE, HUE, SATURATION, AugmentParams, Warp, check_inputs,
                      output_map)
from .normalize import ValueMap


def _gray(image: torch.Tensor, quantize: bool) -> torch.Tensor:
    """torchvision's _rgb_to_grayscale_image (N, 3, H, W) -> (N, 1, H, W), floored like its uint8 path."""
    r, g, b = image.unbind(1)
    gray = r.mul(0.2989).add_(g, alpha=0.587).add_(b, alpha=0.114).unsqueeze(1)
    return gray.floor_() if quantize else gray


def _blend(image, other, factor, bound, quantize):
    """torchvision's _blend, ``image.mul(ratio).add_(other, alpha=1 - ratio)``, with a per-image factor
    (N, 1, 1, 1) float32. torch's add with alpha is one fused multiply-add where its vectorized CPU kernels
    and its CUDA kernels run, and rounding twice instead differs from torchvision by a level at a truncation
    (at ratio 0.0283781, 55 blended with its equal gray 55 is 55.0 in torchvision, 54.999996 rounded twice,
    so 54). On the CPU this makes torchvision's own calls, image by image, so it is torchvision's result
    whatever torch's kernels do; elsewhere it rounds once without a launch per image or a host sync:
    float64 holds the float32 product exactly, so only the conversion back rounds (but for a double-rounding
    tie, about one value in 2**29)."""
    if image.device.type == "cpu":
        out = torch.empty_like(image)
        for i, ratio in enumerate(factor.flatten().tolist()):
            torch.mul(image[i], ratio, out=out[i]).add_(other[i], alpha=1.0 - ratio)
    else:
        out = _blend_once(image, other, factor)
    out.clamp_(0, bound)
    return out.floor_() if quantize else out


def _blend_once(image, other, factor):
    """``image * factor + other * (1 - factor)`` rounded once to float32, batched (see ``_blend``)."""
    return (image * factor).double().addcmul_(other.double(), (1.0 - factor).double()).float()


def _hue(image: torch.Tensor, shift: torch.Tensor, quantize: bool) -> torch.Tensor:
    """torchvision's adjust_hue_image: RGB -> HSV, rotate hue, -> RGB."""
    x = image * (1.0 / 255.0) if quantize else image
    r, g, b = x.unbind(1)
    maxc, minc = torch.max(torch.max(r, g), b), torch.min(torch.min(r, g), b)
    eqc = maxc == minc
    span = maxc - minc
    ones = torch.ones_like(maxc)
    s = span / torch.where(eqc, ones, maxc)
    divisor = torch.where(eqc, ones, span)
    rc, gc, bc = (maxc - r) / divisor, (maxc - g) / divisor, (maxc - b) / divisor
    max_is_r, max_is_g = maxc == r, maxc == g
    h = torch.where(max_is_r, bc - gc, torch.where(max_is_g, (rc + 2.0) - bc, (gc + 4.0) - rc))
    h = torch.fmod(h * (1.0 / 6.0) + 1.0, 1.0)
    h = torch.remainder(h + shift.view(-1, 1, 1), 1.0)
    h6 = h * 6.0
    i = torch.floor(h6)
    f = h6 - i
    i = torch.remainder(i.to(torch.int32), 6)
    v = maxc
    sxf = s * f
    q = ((1.0 - sxf) * v).clamp_(0.0, 1.0)
    t = ((sxf + (1.0 - s)) * v).clamp_(0.0, 1.0)
    p = ((1.0 - s) * v).clamp_(0.0, 1.0)
    red = torch.where(i == 0, v, torch.where(i == 1, q, torch.where((i == 2) | (i == 3), p,
                                                                      torch.where(i == 4, t, v))))
    green = torch.where(i == 0, t, torch.where((i == 1) | (i == 2), v, torch.where(i == 3, q, p)))
    blue = torch.where((i == 0) | (i == 1), p, torch.where(i == 2, t, torch.where(i == 5, q, v)))
    out = torch.stack((red, green, blue), 1)
    return (out * (255.0 + 1.0 - 1e-3)).floor_() if quantize else out


def color_torch(images: torch.Tensor, ops: torch.Tensor, factors: torch.Tensor,
                    quantize: bool = True) -> torch.Tensor:
    """Apply each image's color operations, slot by slot, to a float (N, 3, H, W) batch.

    Values are uint8 levels held in float (``quantize=True``) or floats in
    [0, 1]. Each slot runs each operation once, on the images that have it
    there, so the work is batched however the per-image orders differ.
    """
    bound = 255.0 if quantize else 1.0
    out = images.clone()
    for slot in range(ops.shape[1]):
        for op in (BRIGHTNESS, CONTRAST, SATURATION, HUE, GRAYSCALE):
            rows = (ops[:, slot] == op).nonzero().flatten()
            if rows.numel() == 0:
                continue
            x, factor = out[rows], factors[rows, slot].view(-1, 1, 1, 1)
            if op == BRIGHTNESS:
                x = (x * factor).clamp_(0, bound)
                x = x.floor_() if quantize else x
            elif op == CONTRAST:
                x = _blend(x, _gray(x, quantize).mean(dim=(1, 2, 3), keepdim=True), factor, bound, quantize)
            elif op == SATURATION:
                x = _blend(x, _gray(x, quantize), factor, bound, quantize)
            elif op == HUE:
                x = _hue(x, factor.view(-1), quantize)
            else:
                x = _gray(x, quantize).expand_as(x)
            out[rows] = x
    return out


def _window(image: torch.Tensor, top: int, left: int, size: tuple[int, int]) -> torch.Tensor:
    """The (C, h, w) window of ``image`` at (top, left), zeros where it reaches outside (a padded crop)."""
    height, width = size
    out = image.new_zeros(image.shape[0], height, width)
    y0, y1 = max(top, 0), min(top + height, image.shape[1])
    x0, x1 = max(left, 0), min(left + width, image.shape[2])
    if y0 < y1 and x0 < x1:
        out[:, y0 - top:y1 - top, x0 - left:x1 - left] = image[:, y0:y1, x0:x1]
    return out


def _interpolate(image: torch.Tensor, size: tuple[int, int], antialias: bool) -> torch.Tensor:
    return F.interpolate(image[None], size=size, mode="bilinear", align_corners=False, antialias=antialias)[0]


def resized_crop_torch(image: torch.Tensor, box: Sequence[int], size: tuple[int, int],
                           antialias: bool = True) -> torch.Tensor:
    """torchvision's resized_crop (bilinear, antialiased unless ``antialias`` is False) of a (C, H, W) image,
    in float32, as RGB (3, h, w)."""
    top, left, height, width = (int(v) for v in box)
    crop = _window(image.float(), top, left, (height, width))  # torchvision pads outside the image with zeros
    if antialias and size[1] == 1 and size[0] != 1:
        # torch's antialiased float interpolate (CPU, 2.11-2.15) is wrong for an output one column wide: with
        # 11 x 7 -> 9 x 1, every row repeats the first one. The transposed resize (width 9, height 1) is right,
        # and it is the same separable filter.
        resized = _interpolate(crop.transpose(1, 2), (size[1], size[0]), antialias).transpose(1, 2)
    else:
        resized = _interpolate(crop, size, antialias)
    return resized.expand(3, -1, -1) if image.shape[0] == 1 else resized


def warp_torch(levels: torch.Tensor, matrices: torch.Tensor, size: tuple[int, int], nearest: bool = False,
                   fill=None) -> torch.Tensor:
    """torchvision's affine_image / rotate_image on a float (N, C, H, W) batch, each image through its own
    inverse map (``AugmentParams.matrices``) to ``size`` (height, width): its grid_sample (zeros outside,
    align_corners=False), then the fill blended in by the mask torchvision samples beside the image. Not
    rounded.

    The sampling is written out in plain float32 torch, operation for operation as the kernel's ``_warp``
    computes it (the point through the map, its neighbours and weights, the sum over them in the same order),
    so the two agree to the bit where the kernel is not compiled with fused multiply-adds (the interpreter).
    ``F.grid_sample`` gives the same values up to float32 rounding, but reaches the sampling point through
    normalized coordinates: its point differs by a few ulp, which on a noisy image moves a value by up to a
    thousandth of a level (and one more level, rarely, after rounding) -- then grown by the colors after it."""
    n, channels, height, width = levels.shape
    out_h, out_w = size
    m = matrices.to(device=levels.device, dtype=torch.float32).view(n, 6, 1, 1).unbind(1)
    py = (torch.arange(out_h, dtype=torch.float32, device=levels.device) + 0.5).view(1, out_h, 1)
    px = (torch.arange(out_w, dtype=torch.float32, device=levels.device) + 0.5).view(1, 1, out_w)
    x = m[0] * px + m[1] * py + m[2] - 0.5  # (N, h, w): pixel coordinates to indices
    y = m[3] * px + m[4] * py + m[5] - 0.5
    flat = levels.float().reshape(n, channels, height * width)

    def tap(tx, ty, weight):  # one neighbour, weighted; zero outside the image
        ok = (tx >= 0) & (tx < width) & (ty >= 0) & (ty < height)
        at = (torch.where(ok, ty, 0.0).long() * width + torch.where(ok, tx, 0.0).long()).view(n, 1, -1)
        weight = torch.where(ok, weight, 0.0).unsqueeze(1)
        values = flat.gather(2, at.expand(n, channels, -1)).view(n, channels, out_h, out_w)
        return weight * values, weight

    if nearest:  # round half to even, as grid_sample's nearbyint
        out, cover = tap(torch.round(x), torch.round(y), torch.ones_like(x))
    else:
        x0, y0 = torch.floor(x), torch.floor(y)
        x1, y1 = x0 + 1.0, y0 + 1.0
        out, cover = tap(x0, y0, (x1 - x) * (y1 - y))
        for tx, ty, weight in ((x1, y0, (x - x0) * (y1 - y)), (x0, y1, (x1 - x) * (y - y0)),
                               (x1, y1, (x - x0) * (y - y0))):
            values, w = tap(tx, ty, weight)
            out, cover = out + values, cover + w
    if fill is None:
        return out
    fill = torch.as_tensor(fill, dtype=torch.float32, device=out.device).view(1, -1, 1, 1)
    return torch.where(cover < 0.5, fill, out) if nearest else (out - fill) * cover + fill


def augment_torch(images: Sequence[torch.Tensor], params: AugmentParams, size: tuple[int, int],
                      dtype: torch.dtype = torch.float32, scale=None, shift=None, *, quantize: bool = True,
                      channels_last: bool = False, warp: Warp | None = None, antialias: bool = True,
                      values: ValueMap | None = None) -> torch.Tensor:
    """What ``augment_batch`` computes, in plain torch (per image for the ragged geometry, batched after)."""
    check_inputs(images, params, warp)
    values = output_map(dtype, scale, shift, quantize, values)
    resized = warp.size if warp is not None else size
    windows = params.with_windows(resized).windows.tolist()
    rows = []
    for image, box, (resize_h, resize_w, top, left) in zip(images, params.boxes.tolist(), windows):
        x = resized_crop_torch(image, box, (resize_h, resize_w), antialias)
        x = x.round() if quantize else values.to_unit(x)  # torchvision's first floats (float32: output_map)
        rows.append(_window(x, top, left, resized))
    batch = torch.stack(rows) if rows else torch.empty((0, 3) + tuple(size))
    if warp is not None and rows:
        fill = None if warp.fill is None else [v if quantize else v / 255.0 for v in warp.fill]
        batch = warp_torch(batch, params.matrices, size, warp.nearest, fill)
        batch = batch.round() if quantize else batch
    batch = torch.stack([x.flip([d for d, on in ((-1, h), (-2, v)) if on])
                         for x, (h, v) in zip(batch, params.flips.tolist())]) if rows else batch
    return finish_torch(batch, params.ops, params.factors, dtype, values=values, quantize=quantize,
                        channels_last=channels_last)


def finish_torch(levels: torch.Tensor, ops: torch.Tensor, factors: torch.Tensor, dtype: torch.dtype,
                     scale=None, shift=None, *, quantize: bool = True, channels_last: bool = False,
                     out: torch.Tensor | None = None, values: ValueMap | None = None) -> torch.Tensor:
    """The color operations and the output map on a resized, flipped float (N, 3, H, W) batch.

    ``levels`` holds uint8 levels (``quantize=True``) or the floats in [0, 1]
    of ``values``' unit (ToTensor's or ToDtype's). The map is ``values``
    (torchvision's ops, op by op) or ``scale``/``shift`` as an ``Affine``.
    This is all the CPU path needs once Pillow has cropped and resized.
    """
    values = output_map(dtype, scale, shift, quantize, values)
    if ops.shape[1]:
        levels = color_torch(levels, ops.to(levels.device), factors.to(levels.device), quantize)
    if values is not None:
        levels = values(levels) if quantize else values.finish(levels.clone())
    if out is not None:
        return out.copy_(levels)
    result = levels.to(dtype)
    return result.contiguous(memory_format=torch.channels_last) if channels_last else result
