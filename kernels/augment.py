"""Fused batch augmentation: N decoded uint8 images of any sizes -> one (N, 3, H, W) batch, in one pass.

torchvision augments one sample and one operation at a time, each reading
and writing the whole image. ``augment_batch`` launches one Triton program
per tile of output pixels (rows by columns) of each image, and runs crop,
resize, flips, the color operations, grayscale, normalize, dtype and layout
in registers before the single write. The antialiased bilinear resize is
separable: a small first launch (``_taps_kernel``) writes each image's
filter taps once, per output row and per output column (first source
row or column, count, weights); a tile then filters each source row its
rows reach once horizontally and adds it into each of its output rows with
that row's vertical weight, so a pixel costs about (source rows per output
row) x (horizontal taps) gathers, not (vertical taps) x (horizontal taps),
and no weight is computed twice. Contrast
needs the mean gray level of the whole image at its point in the chain, so
a plan with contrast runs the same kernel once more first, in a mode that
only writes per-tile partial sums (summed in a fixed order: deterministic).
A rotation or affine map (``warp``) resamples the resized image again, so
then the kernel first writes the resized batch alone, and runs again in a
mode that samples it through each image's inverse map; without a warp that
mode is not compiled in. ``antialias=False`` compiles in plain bilinear
sampling instead of the antialiased filter (RPP's LINEAR resize, for
rocAL's JSON pipelines).

Semantics are torchvision.transforms.v2.functional on the uint8 image
tensor: ``resized_crop`` (bilinear, antialias=True, zero padding outside
the image), ``hflip``/``vflip``, ``adjust_brightness``,
``adjust_contrast``, ``adjust_saturation``, ``adjust_hue``,
``rgb_to_grayscale``, then ``to_dtype(scale=True)`` + ``normalize`` as one
per-channel affine map; with a ``warp``, ``affine_image`` / ``rotate_image``
(nearest or bilinear grid sampling, zeros outside, the fill blended in by
torchvision's mask) between the resize and the flips. With ``quantize=True`` the values are rounded and
truncated to uint8 levels wherever torchvision's uint8 pipeline does
(after the resize and after every color operation); with
``quantize=False`` they stay float in [0, 1], as when the image was
converted to float before the color operations. One-channel images are
read as RGB (the three channels equal), as torchvision's RGB read mode
does.

``augment_reference`` is the same math in plain torch: the oracle for the
tests, and what the CPU path runs. ``color_reference`` is its color part
alone, batched.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:  # a torch build without triton: the references still work
    triton = None

# Color operation ids in ``AugmentParams.ops``; NONE leaves a slot unused for this image.
NONE, BRIGHTNESS, CONTRAST, SATURATION, HUE, GRAYSCALE = -1, 0, 1, 2, 3, 4
OPERATIONS = {"brightness": BRIGHTNESS, "contrast": CONTRAST, "saturation": SATURATION,
              "hue": HUE, "grayscale": GRAYSCALE}


@dataclass
class AugmentParams:
    """Per-image parameters of one batch, as small tensors on the images' device.

    Args:
        boxes: (N, 4) int32 crop boxes (top, left, height, width) in source
            pixels; parts outside the image read as zeros.
        flips: (N, 2) int32 (horizontal, vertical) flags, applied after the resize.
        ops: (N, S) int32 color operation ids, applied in slot order per image
            (NONE skips a slot); S may be 0.
        factors: (N, S) float32: the brightness, contrast or saturation factor,
            or the hue shift, of each slot.
        windows: (N, 4) int32 (resize height, resize width, top, left), or
            None: the box is resized to (resize height, resize width) and the
            output is the window of that at (top, left), zeros outside it --
            a Resize then CenterCrop, whose filter sees the whole image. None
            means the box is resized to the output size (crop, then resize).
        matrices: (N, 6) float32 inverse affine maps (a, b, c, d, e, f), or
            None: with a ``Warp``, output point (x, y) (pixel centres at
            i + 0.5, before the flips) samples the resized image at
            (a x + b y + c, d x + e y + f).
    """

    boxes: torch.Tensor
    flips: torch.Tensor
    ops: torch.Tensor
    factors: torch.Tensor
    windows: torch.Tensor | None = None
    matrices: torch.Tensor | None = None

    def to(self, device) -> "AugmentParams":
        """These parameters on ``device`` (copied asynchronously)."""
        if self.boxes.device == torch.device(device):
            return self
        return AugmentParams(*(None if t is None else t.to(device, non_blocking=True) for t in
                               (self.boxes, self.flips, self.ops, self.factors, self.windows, self.matrices)))

    def with_windows(self, size: tuple[int, int]) -> "AugmentParams":
        """These parameters with explicit windows: the default one (resize to ``size``) where there are none."""
        if self.windows is not None:
            return self
        windows = torch.tensor([size[0], size[1], 0, 0], dtype=torch.int32, device=self.boxes.device)
        return dataclasses.replace(self, windows=windows.expand(self.boxes.shape[0], 4).contiguous())

    @classmethod
    def make(cls, boxes, flips=None, ops=None, factors=None, device=None, windows=None,
             matrices=None) -> "AugmentParams":
        """Build from Python lists or tensors; missing flips/ops/windows/matrices mean none."""
        boxes = torch.as_tensor(boxes, dtype=torch.int32, device=device).reshape(-1, 4)
        n = boxes.shape[0]
        flips = (torch.zeros(n, 2, dtype=torch.int32, device=device) if flips is None
                 else torch.as_tensor(flips, dtype=torch.int32, device=device).reshape(n, 2))
        ops = (torch.zeros(n, 0, dtype=torch.int32, device=device) if ops is None
               else torch.as_tensor(ops, dtype=torch.int32, device=device).reshape(n, -1))
        factors = (torch.zeros(ops.shape, dtype=torch.float32, device=device) if factors is None
                   else torch.as_tensor(factors, dtype=torch.float32, device=device).reshape(ops.shape))
        if windows is not None:
            windows = torch.as_tensor(windows, dtype=torch.int32, device=device).reshape(n, 4)
        if matrices is not None:
            matrices = torch.as_tensor(matrices, dtype=torch.float32, device=device).reshape(n, 6)
        return cls(boxes, flips, ops, factors, windows, matrices)


@dataclass(frozen=True)
class Warp:
    """A rotation or affine map after the resize (torchvision's ``affine_image`` / ``rotate_image`` on the
    resized image), through each image's ``AugmentParams.matrices``.

    Args:
        size: (height, width) of the resized image the maps read.
        nearest: nearest instead of bilinear sampling.
        fill: per-channel value outside the resized image, in uint8 levels,
            blended in by torchvision's mask; None is torchvision's
            ``fill=None``: zeros, no mask.
    """

    size: tuple[int, int]
    nearest: bool = False
    fill: tuple[float, float, float] | None = None


def _check(images: Sequence[torch.Tensor], params: AugmentParams, warp: Warp | None = None) -> None:
    if len(images) != params.boxes.shape[0]:
        raise ValueError(f"{len(images)} images but {params.boxes.shape[0]} crop boxes")
    for i, image in enumerate(images):
        if image.dtype != torch.uint8 or image.dim() != 3 or image.shape[0] not in (1, 3):
            raise ValueError(f"image {i}: expected a (C, H, W) uint8 tensor with C 1 or 3, got "
                             f"{tuple(image.shape)} {image.dtype} (pass HWC data as image.permute(2, 0, 1))")
    if bool((params.boxes[:, 2:] <= 0).any()):
        raise ValueError("crop boxes need a positive height and width")
    if params.windows is not None and bool((params.windows[:, :2] <= 0).any()):
        raise ValueError("windows need a positive resize height and width")
    if warp is not None and params.matrices is None:
        raise ValueError("a warp needs the images' matrices (AugmentParams.matrices)")


def _out_values(dtype: torch.dtype, scale, shift, quantize: bool):
    """The affine map from the chain's values to the output, or None for uint8 levels as they are."""
    if scale is None:
        if dtype != torch.uint8 or not quantize:
            raise ValueError("without scale/shift the output is the uint8 image: dtype=torch.uint8, "
                             "quantize=True")
        return None
    scale = torch.as_tensor(scale, dtype=torch.float64).reshape(3)
    shift = torch.as_tensor(shift, dtype=torch.float64).reshape(3)
    if not quantize:  # the chain holds x / 255, the map is defined on uint8 levels x
        scale = scale * 255.0
    return scale.float(), shift.float()


# ---------------------------------------------------------------- reference

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


def color_reference(images: torch.Tensor, ops: torch.Tensor, factors: torch.Tensor,
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


def resized_crop_reference(image: torch.Tensor, box: Sequence[int], size: tuple[int, int],
                           antialias: bool = True) -> torch.Tensor:
    """torchvision's resized_crop (bilinear, antialiased unless ``antialias`` is False) of a (C, H, W) image,
    in float32, as RGB (3, h, w)."""
    top, left, height, width = (int(v) for v in box)
    crop = _window(image.float(), top, left, (height, width))  # torchvision pads outside the image with zeros
    resized = F.interpolate(crop[None], size=size, mode="bilinear", align_corners=False, antialias=antialias)[0]
    return resized.expand(3, -1, -1) if image.shape[0] == 1 else resized


def warp_reference(levels: torch.Tensor, matrices: torch.Tensor, size: tuple[int, int], nearest: bool = False,
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


def augment_reference(images: Sequence[torch.Tensor], params: AugmentParams, size: tuple[int, int],
                      dtype: torch.dtype = torch.float32, scale=None, shift=None, *, quantize: bool = True,
                      channels_last: bool = False, warp: Warp | None = None, antialias: bool = True) -> torch.Tensor:
    """What ``augment_batch`` computes, in plain torch (per image for the ragged geometry, batched after)."""
    _check(images, params, warp)
    resized = warp.size if warp is not None else size
    windows = params.with_windows(resized).windows.tolist()
    rows = []
    for image, box, (resize_h, resize_w, top, left) in zip(images, params.boxes.tolist(), windows):
        x = resized_crop_reference(image, box, (resize_h, resize_w), antialias)
        rows.append(_window(x.round() if quantize else x * (1.0 / 255.0), top, left, resized))
    batch = torch.stack(rows) if rows else torch.empty((0, 3) + tuple(size))
    if warp is not None and rows:
        fill = None if warp.fill is None else [v if quantize else v / 255.0 for v in warp.fill]
        batch = warp_reference(batch, params.matrices, size, warp.nearest, fill)
        batch = batch.round() if quantize else batch
    batch = torch.stack([x.flip([d for d, on in ((-1, h), (-2, v)) if on])
                         for x, (h, v) in zip(batch, params.flips.tolist())]) if rows else batch
    return finish_reference(batch, params.ops, params.factors, dtype, scale, shift, quantize=quantize,
                            channels_last=channels_last)


def finish_reference(levels: torch.Tensor, ops: torch.Tensor, factors: torch.Tensor, dtype: torch.dtype,
                     scale=None, shift=None, *, quantize: bool = True, channels_last: bool = False,
                     out: torch.Tensor | None = None) -> torch.Tensor:
    """The color operations and the output map on a resized, flipped float (N, 3, H, W) batch.

    ``levels`` holds uint8 levels (``quantize=True``) or floats in [0, 1].
    This is all the CPU path needs once Pillow has cropped and resized.
    """
    affine = _out_values(dtype, scale, shift, quantize)
    if ops.shape[1]:
        levels = color_reference(levels, ops.to(levels.device), factors.to(levels.device), quantize)
    if affine is not None:
        scale_t, shift_t = (v.to(levels.device).view(1, 3, 1, 1) for v in affine)
        levels = levels * scale_t + shift_t
    if out is not None:
        return out.copy_(levels)
    result = levels.to(dtype)
    return result.contiguous(memory_format=torch.channels_last) if channels_last else result


# ------------------------------------------------------------------- kernel

if triton is not None:

    # The color operation ids as the kernel reads them: a jit function sees only constexpr globals.
    OP_BRIGHTNESS, OP_CONTRAST, OP_SATURATION, OP_HUE, OP_GRAYSCALE = (
        tl.constexpr(op) for op in (BRIGHTNESS, CONTRAST, SATURATION, HUE, GRAYSCALE))

    @triton.jit
    def _round_half_even(x):
        down = tl.floor(x)
        frac = x - down
        odd = down - 2.0 * tl.floor(down * 0.5)
        return tl.where(frac > 0.5, down + 1.0, tl.where(frac < 0.5, down, down + odd))

    @triton.jit
    def _gray_level(r, g, b, QUANTIZE: tl.constexpr):
        # torchvision's r.mul(0.2989).add_(g, alpha=0.587).add_(b, alpha=0.114): fused multiply-adds
        gray = tl.fma(b, 0.114, tl.fma(g, 0.587, r * 0.2989))
        if QUANTIZE:
            gray = tl.floor(gray)
        return gray

    @triton.jit
    def _blend_values(x, other, factor, BOUND: tl.constexpr, QUANTIZE: tl.constexpr):
        # torchvision's x.mul(factor).add_(other, alpha=1 - factor), one fused multiply-add as torch's (_blend)
        out = tl.minimum(tl.maximum(tl.fma(other, 1.0 - factor, x * factor), 0.0), BOUND)
        if QUANTIZE:
            out = tl.floor(out)
        return out

    @triton.jit
    def _hue_values(r, g, b, shift, QUANTIZE: tl.constexpr):
        if QUANTIZE:
            r = r * (1.0 / 255.0)
            g = g * (1.0 / 255.0)
            b = b * (1.0 / 255.0)
        maxc = tl.maximum(tl.maximum(r, g), b)
        minc = tl.minimum(tl.minimum(r, g), b)
        eqc = maxc == minc
        span = maxc - minc
        s = span / tl.where(eqc, 1.0, maxc)
        divisor = tl.where(eqc, 1.0, span)
        rc = (maxc - r) / divisor
        gc = (maxc - g) / divisor
        bc = (maxc - b) / divisor
        h = tl.where(maxc == r, bc - gc, tl.where(maxc == g, (rc + 2.0) - bc, (gc + 4.0) - rc))
        h = h * (1.0 / 6.0) + 1.0
        h = h - tl.floor(h)  # fmod(h, 1) for the positive h here
        h = h + shift
        h = h - tl.floor(h)  # torch.remainder(h, 1)
        h6 = h * 6.0
        i = tl.floor(h6)
        f = h6 - i
        i = i - 6.0 * tl.floor(i / 6.0)
        v = maxc
        sxf = s * f
        q = tl.minimum(tl.maximum((1.0 - sxf) * v, 0.0), 1.0)
        t = tl.minimum(tl.maximum((sxf + (1.0 - s)) * v, 0.0), 1.0)
        p = tl.minimum(tl.maximum((1.0 - s) * v, 0.0), 1.0)
        red = tl.where(i == 0, v, tl.where(i == 1, q, tl.where((i == 2) | (i == 3), p, tl.where(i == 4, t, v))))
        green = tl.where(i == 0, t, tl.where((i == 1) | (i == 2), v, tl.where(i == 3, q, p)))
        blue = tl.where((i == 0) | (i == 1), p, tl.where(i == 2, t, tl.where(i == 5, q, v)))
        if QUANTIZE:
            red = tl.floor(red * (255.0 + 1.0 - 1e-3))
            green = tl.floor(green * (255.0 + 1.0 - 1e-3))
            blue = tl.floor(blue * (255.0 + 1.0 - 1e-3))
        return red, green, blue

    @triton.jit
    def _taps_kernel(boxes, windows, starts, sizes, weights, out_h, out_w, width, ANTIALIAS: tl.constexpr,
                     BLOCK: tl.constexpr):
        """The resize's filter taps, once per image and axis (program (n, 0): the output rows; (n, 1): the
        columns): for each output row or column of the window, its first crop row or column (``starts``), how
        many it reads (``sizes``, 0 outside the resized image) and their weights (``weights``, ``width`` a
        line, zeros past ``sizes``). torch's antialiased bilinear weights (_compute_indices_min_size_weights_aa)
        in its float32 steps; without antialiasing the filter keeps its one-pixel support when shrinking:
        torch's plain bilinear (two taps, edges clamped -- the renormalized weights at an edge are the clamp's)."""
        n = tl.program_id(0).to(tl.int64)
        axis = tl.program_id(1)  # 0: rows (y), 1: columns (x)
        crop = tl.load(boxes + n * 4 + 2 + axis)
        resize = tl.load(windows + n * 4 + axis)
        offset = tl.load(windows + n * 4 + 2 + axis)
        length = tl.where(axis == 0, out_h, out_w)
        line0 = n * (out_h + out_w) + tl.where(axis == 0, 0, out_h)
        # Divisions rounded to nearest (Triton's default on a GPU is approximate): once per image and line,
        # and then the GPU's taps are the CPU's (``taps_reference``) to the bit.
        scale = tl.math.div_rn(crop.to(tl.float32), resize.to(tl.float32))
        if ANTIALIAS:
            support = tl.where(scale >= 1.0, scale, 1.0)
            inv = tl.where(scale >= 1.0, tl.math.div_rn(tl.full([], 1.0, tl.float32), scale), 1.0)
        else:  # scalars of the same type as in the antialiased branch
            support = scale * 0.0 + 1.0
            inv = support
        taps = (2.0 * support).to(tl.int32) + 2
        for first in range(0, length, BLOCK):
            o = first + tl.arange(0, BLOCK)
            valid = o < length
            i = o + offset  # the position in the resized image
            inside = valid & (i >= 0) & (i < resize)
            center = scale * (i.to(tl.float32) + 0.5)
            lo = tl.maximum((center - support + 0.5).to(tl.int32), 0)
            size = tl.minimum((center + support + 0.5).to(tl.int32), crop) - lo
            total = tl.zeros([BLOCK], tl.float32)
            for k in range(0, taps):
                w = tl.maximum(1.0 - tl.abs((k + lo - center + 0.5) * inv), 0.0)
                total += tl.where(k < size, w, 0.0)
            total = tl.where(total != 0.0, total, 1.0)
            line = line0 + o
            for k in range(0, width):
                w = tl.math.div_rn(tl.maximum(1.0 - tl.abs((k + lo - center + 0.5) * inv), 0.0), total)
                tl.store(weights + line * width + k, tl.where(inside & (k < size), w, 0.0), mask=valid)
            tl.store(starts + line, tl.where(inside, lo, 0), mask=valid)
            tl.store(sizes + line, tl.where(inside, size, 0), mask=valid)

    @triton.jit
    def _resample(src_ptrs, src_meta, boxes, starts, sizes, weights, width, n, oy, ox, rows_ok, cols_ok,
                  out_h, out_w, ANTIALIAS: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr):
        """torchvision's resized_crop of image n at a tile of output pixels, rows ``oy`` (TH) by columns ``ox``
        (TW), in float, through the taps ``_taps_kernel`` wrote. Separable: each crop row the tile's filters
        reach is filtered horizontally once, into registers, and added into every output row of the tile with
        that row's vertical weight (zero for the rows it does not reach). The sums run in torch's order --
        the horizontal sum of each row over its taps, then those over the rows -- and adding a zero-weighted
        row adds an exact zero, so each pixel is the per-pixel filter's value to the bit."""
        # This image: where it is, its size, channels and strides (in elements).
        src = tl.load(src_ptrs + n).to(tl.pointer_type(tl.uint8))
        image_h = tl.load(src_meta + n * 6 + 0)
        image_w = tl.load(src_meta + n * 6 + 1)
        channels = tl.load(src_meta + n * 6 + 2)
        stride_c = tl.load(src_meta + n * 6 + 3)
        stride_y = tl.load(src_meta + n * 6 + 4)
        stride_x = tl.load(src_meta + n * 6 + 5)
        green_at = tl.where(channels == 3, stride_c, 0)  # a gray image reads as RGB with equal channels
        top = tl.load(boxes + n * 4 + 0).to(tl.int64)
        left = tl.load(boxes + n * 4 + 1).to(tl.int64)

        row_line = n * (out_h + out_w) + oy
        col_line = n * (out_h + out_w) + out_h + ox
        y0 = tl.load(starts + row_line, mask=rows_ok, other=0)
        ny = tl.load(sizes + row_line, mask=rows_ok, other=0)
        x0 = tl.load(starts + col_line, mask=cols_ok, other=0)
        nx = tl.load(sizes + col_line, mask=cols_ok, other=0)
        # The crop rows the tile reads (none where it is all outside the resized image), and its widest filter.
        first = tl.min(tl.where(ny > 0, y0, 2147483647), axis=0)
        last = tl.max(tl.where(ny > 0, y0 + ny, 0), axis=0)
        taps_x = tl.max(nx, axis=0)
        # Per column, the taps inside the image, [k_lo, k_hi): the crop's columns outside it read zeros.
        sx0 = left + x0
        k_lo = tl.maximum(-sx0, 0)
        k_hi = tl.minimum(image_w - sx0, nx)
        col_at = sx0 * stride_x
        col_w = weights + col_line * width
        row_w = weights + row_line * width
        blue_at = 2 * green_at

        r = tl.zeros([TH, TW], tl.float32)
        g = r
        b = r
        zero_row = tl.zeros([TW], tl.float32)  # made once: each tl.zeros call is slow in the interpreter
        for y in range(first, last):
            ky = y - y0
            reached = (ky >= 0) & (ky < ny)
            # Antialiased filters overlap (every row between first and last is read); plain bilinear ones
            # shrinking skip rows, which are not filtered.
            readers = 1 if ANTIALIAS else tl.max(reached.to(tl.int32), axis=0)
            if readers > 0:
                sy = top + y
                hi = tl.where((sy >= 0) & (sy < image_h), k_hi, 0)  # a row outside the image reads zeros
                at = src + sy * stride_y + col_at
                row_r = zero_row
                row_g = zero_row
                row_b = zero_row
                for kx in range(0, taps_x):
                    wx = tl.load(col_w + kx, mask=cols_ok, other=0.0)
                    ok = (kx >= k_lo) & (kx < hi)
                    row_r += wx * tl.load(at, mask=ok, other=0).to(tl.float32)
                    row_g += wx * tl.load(at + green_at, mask=ok, other=0).to(tl.float32)
                    row_b += wx * tl.load(at + blue_at, mask=ok, other=0).to(tl.float32)
                    at += stride_x
                wy = tl.load(row_w + ky, mask=reached, other=0.0)[:, None]
                r += wy * row_r[None, :]
                g += wy * row_g[None, :]
                b += wy * row_b[None, :]
        return r, g, b

    @triton.jit
    def _tap(image, plane, mid_h, mid_w, x, y, weight, valid):
        """One neighbour (x, y) of a contiguous (3, mid_h, mid_w) image, weighted; zero outside it."""
        ok = valid & (x >= 0.0) & (x < mid_w) & (y >= 0.0) & (y < mid_h)
        at = image + tl.where(ok, y, 0.0).to(tl.int64) * mid_w + tl.where(ok, x, 0.0).to(tl.int64)
        weight = tl.where(ok, weight, 0.0)
        r = weight * tl.load(at, mask=ok, other=0).to(tl.float32)
        g = weight * tl.load(at + plane, mask=ok, other=0).to(tl.float32)
        b = weight * tl.load(at + 2 * plane, mask=ok, other=0).to(tl.float32)
        return r, g, b, weight

    @triton.jit
    def _warp(mid, mid_h, mid_w, matrices, fill, n, oy, ox, valid, NEAREST: tl.constexpr,
              HAS_FILL: tl.constexpr):
        """torchvision's affine_image of resized image n (contiguous in ``mid``) at output pixels (oy, ox): its
        grid_sample (zeros outside) and, with a fill, the fill blended in by the sampled mask. ``warp_reference``
        repeats these float32 steps in this order, to agree to the bit: change both together."""
        plane = mid_h.to(tl.int64) * mid_w
        image = mid + n * 3 * plane
        px = ox.to(tl.float32) + 0.5
        py = oy.to(tl.float32) + 0.5
        x = tl.load(matrices + n * 6 + 0) * px + tl.load(matrices + n * 6 + 1) * py + tl.load(matrices + n * 6 + 2)
        y = tl.load(matrices + n * 6 + 3) * px + tl.load(matrices + n * 6 + 4) * py + tl.load(matrices + n * 6 + 5)
        x = x - 0.5  # pixel coordinates to indices
        y = y - 0.5
        if NEAREST:
            r, g, b, cover = _tap(image, plane, mid_h, mid_w, _round_half_even(x), _round_half_even(y), 1.0, valid)
        else:  # grid_sample's bilinear weights, neighbours outside the image read as zeros
            x0 = tl.floor(x)
            y0 = tl.floor(y)
            x1 = x0 + 1.0
            y1 = y0 + 1.0
            r, g, b, cover = _tap(image, plane, mid_h, mid_w, x0, y0, (x1 - x) * (y1 - y), valid)
            r1, g1, b1, w1 = _tap(image, plane, mid_h, mid_w, x1, y0, (x - x0) * (y1 - y), valid)
            r2, g2, b2, w2 = _tap(image, plane, mid_h, mid_w, x0, y1, (x1 - x) * (y - y0), valid)
            r3, g3, b3, w3 = _tap(image, plane, mid_h, mid_w, x1, y1, (x - x0) * (y - y0), valid)
            r = r + r1 + r2 + r3
            g = g + g1 + g2 + g3
            b = b + b1 + b2 + b3
            cover = cover + w1 + w2 + w3
        if HAS_FILL:
            fill_r = tl.load(fill + 0)
            fill_g = tl.load(fill + 1)
            fill_b = tl.load(fill + 2)
            if NEAREST:
                r = tl.where(cover < 0.5, fill_r, r)
                g = tl.where(cover < 0.5, fill_g, g)
                b = tl.where(cover < 0.5, fill_b, b)
            else:
                r = (r - fill_r) * cover + fill_r
                g = (g - fill_g) * cover + fill_g
                b = (b - fill_b) * cover + fill_b
        return r, g, b

    @triton.jit
    def _augment_kernel(
        src_ptrs, src_meta, boxes, starts, sizes, weights, taps_width, flips, ops, factors, partials, scale_ptr,
        shift_ptr, out_ptr, out_stride_n, out_stride_c, out_stride_y, out_stride_x, out_h, out_w, n_tiles,
        mid, mid_h, mid_w, matrices, fill,
        SLOTS: tl.constexpr, HAS_CONTRAST: tl.constexpr, MEAN_PASS: tl.constexpr,
        QUANTIZE: tl.constexpr, NORMALIZE: tl.constexpr, FLIPS: tl.constexpr,
        WARP: tl.constexpr, NEAREST: tl.constexpr, HAS_FILL: tl.constexpr, ANTIALIAS: tl.constexpr,
        TILES: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr,
    ):
        tile = tl.program_id(0).to(tl.int64)
        n = tl.program_id(1).to(tl.int64)
        BOUND: tl.constexpr = 255.0 if QUANTIZE else 1.0

        # A tile of TH rows by TW columns of the resized (or warped) image, before the flips.
        tiles_x = tl.cdiv(out_w, TW)
        oy = (tile // tiles_x) * TH + tl.arange(0, TH)
        ox = (tile % tiles_x) * TW + tl.arange(0, TW)
        rows_ok = oy < out_h
        cols_ok = ox < out_w
        valid = rows_ok[:, None] & cols_ok[None, :]

        if WARP:  # the resized batch was written to ``mid`` by a first launch; sample it through the map
            r, g, b = _warp(mid, mid_h, mid_w, matrices, fill, n, oy[:, None], ox[None, :], valid, NEAREST,
                            HAS_FILL)
        else:
            r, g, b = _resample(src_ptrs, src_meta, boxes, starts, sizes, weights, taps_width, n, oy, ox, rows_ok,
                                cols_ok, out_h, out_w, ANTIALIAS, TH, TW)
        if QUANTIZE:  # torchvision rounds a resized (or warped) uint8 image back to uint8
            r = _round_half_even(r)
            g = _round_half_even(g)
            b = _round_half_even(b)
        elif not WARP:  # ``mid`` holds values in [0, 1] already
            r = r * (1.0 / 255.0)
            g = g * (1.0 / 255.0)
            b = b * (1.0 / 255.0)

        partial = tl.sum(tl.sum(tl.zeros([TH, TW], tl.float32), axis=1), axis=0)
        if HAS_CONTRAST and not MEAN_PASS:
            sums = tl.load(partials + n * n_tiles + tl.arange(0, TILES), mask=tl.arange(0, TILES) < n_tiles,
                           other=0.0)
            mean = tl.sum(sums, axis=0) / (out_h * out_w).to(tl.float32)
        else:
            mean = 0.0
        for slot in tl.static_range(SLOTS):
            op = tl.load(ops + n * SLOTS + slot)
            factor = tl.load(factors + n * SLOTS + slot)
            if op == OP_BRIGHTNESS:
                r = tl.minimum(tl.maximum(r * factor, 0.0), BOUND)
                g = tl.minimum(tl.maximum(g * factor, 0.0), BOUND)
                b = tl.minimum(tl.maximum(b * factor, 0.0), BOUND)
                if QUANTIZE:
                    r = tl.floor(r)
                    g = tl.floor(g)
                    b = tl.floor(b)
            elif op == OP_CONTRAST:  # around the mean gray level of the whole image
                if MEAN_PASS:
                    partial = tl.sum(tl.sum(tl.where(valid, _gray_level(r, g, b, QUANTIZE), 0.0), axis=1), axis=0)
                r = _blend_values(r, mean, factor, BOUND, QUANTIZE)
                g = _blend_values(g, mean, factor, BOUND, QUANTIZE)
                b = _blend_values(b, mean, factor, BOUND, QUANTIZE)
            elif op == OP_SATURATION:
                gray = _gray_level(r, g, b, QUANTIZE)
                r = _blend_values(r, gray, factor, BOUND, QUANTIZE)
                g = _blend_values(g, gray, factor, BOUND, QUANTIZE)
                b = _blend_values(b, gray, factor, BOUND, QUANTIZE)
            elif op == OP_HUE:
                r, g, b = _hue_values(r, g, b, factor, QUANTIZE)
            elif op == OP_GRAYSCALE:
                gray = _gray_level(r, g, b, QUANTIZE)
                r = gray
                g = gray
                b = gray

        if MEAN_PASS:
            tl.store(partials + n * n_tiles + tile, partial)
        else:
            if NORMALIZE:
                r = r * tl.load(scale_ptr + 0) + tl.load(shift_ptr + 0)
                g = g * tl.load(scale_ptr + 1) + tl.load(shift_ptr + 1)
                b = b * tl.load(scale_ptr + 2) + tl.load(shift_ptr + 2)
            if FLIPS:  # flips act on the resized (or warped) image: written at the mirrored position
                hflip = tl.load(flips + n * 2 + 0)
                vflip = tl.load(flips + n * 2 + 1)
                oy = tl.where(vflip != 0, out_h - 1 - oy, oy)
                ox = tl.where(hflip != 0, out_w - 1 - ox, ox)
            at = out_ptr + n * out_stride_n + oy.to(tl.int64)[:, None] * out_stride_y + ox[None, :] * out_stride_x
            kind = out_ptr.dtype.element_ty
            tl.store(at, r.to(kind), mask=valid)
            tl.store(at + out_stride_c, g.to(kind), mask=valid)
            tl.store(at + 2 * out_stride_c, b.to(kind), mask=valid)


GPU_TILE = (8, 64)  # output rows and columns a program computes on a GPU (``augment_batch``'s ``block``)


def _tile_shape(height: int, width: int, block, device: torch.device) -> tuple[int, int]:
    """(rows, columns) of output a program computes, powers of two: ``block`` as given, a pixel count (spent
    on whole rows first), or the default -- on a GPU ``GPU_TILE``; interpreted on the CPU, where fewer and
    larger programs run faster, the whole image up to 4096 pixels."""
    if isinstance(block, (tuple, list)):
        return int(block[0]), int(block[1])
    if block is None and device.type != "cpu":
        return GPU_TILE
    pixels = block or 4096
    cols = min(triton.next_power_of_2(width), triton.next_power_of_2(pixels))
    return max(1, min(triton.next_power_of_2(height), pixels // cols)), cols


def _warps(rows: int, cols: int) -> int:
    """Warps a program runs: one per 256 pixels of its tile, 1 to 4 (the horizontal pass works on one row of
    ``cols`` values; more warps than that row has lanes for would repeat it)."""
    return max(1, min(4, rows * cols // 256, max(1, cols // 32)))


def _taps_width(params: AugmentParams, antialias: bool) -> int:
    """The taps tables' line width: a few more than the most taps any image of the batch needs (2 x its largest
    shrink factor + 2, the kernels' count from their float32 scale)."""
    support = (params.boxes[:, 2:].double() / params.windows[:, :2].double()).clamp(min=1.0) if antialias else 1.0
    return int(2 * float(torch.as_tensor(support).max())) + 3


def taps_reference(params: AugmentParams, resized: tuple[int, int], antialias: bool = True):
    """What ``_taps_kernel`` writes, in plain torch (the same float32 steps, so the same bits): for each image's
    output window rows, then columns, the first crop row or column each reads (``starts``), how many
    (``sizes``, 0 outside the resized image), and their weights, zeros past ``sizes``. Returns (starts, sizes)
    (N, rows + columns) int32 and weights (N, rows + columns, K) float32 on the parameters' device. The
    interpreter (CPU tensors) runs this instead of the kernel: a dozen batched operations, not a loop of
    interpreted ones."""
    params = params.with_windows(resized)
    width = _taps_width(params, antialias)
    device = params.boxes.device
    starts, sizes, weights = [], [], []
    for axis, length in enumerate(resized):
        crop = params.boxes[:, 2 + axis].view(-1, 1)
        resize = params.windows[:, axis].view(-1, 1)
        i = torch.arange(length, dtype=torch.int32, device=device).view(1, -1) + params.windows[:, 2 + axis].view(-1, 1)
        inside = (i >= 0) & (i < resize)
        scale = crop.float() / resize.float()
        if antialias:
            support = torch.where(scale >= 1.0, scale, 1.0)
            inv = torch.where(scale >= 1.0, 1.0 / scale, 1.0)
        else:
            support = inv = torch.ones_like(scale)
        taps = (2.0 * support).int() + 2
        center = scale * (i.float() + 0.5)
        lo = (center - support + 0.5).int().clamp(min=0)
        size = torch.minimum((center + support + 0.5).int(), crop) - lo
        k = torch.arange(width, dtype=torch.int32, device=device).view(1, 1, -1)
        w = (1.0 - (((k + lo[..., None]).float() - center[..., None] + 0.5) * inv[..., None]).abs()).clamp(min=0.0)
        total = torch.zeros_like(center)
        for j in range(int(taps.max())):  # in order, as the kernel (and torch) sum them
            total += torch.where(j < size, w[..., j], 0.0)
        total = torch.where(total != 0.0, total, 1.0)
        w = torch.where(inside[..., None] & (k < size[..., None]), w / total[..., None], 0.0)
        starts.append(torch.where(inside, lo, 0))
        sizes.append(torch.where(inside, size, 0))
        weights.append(w)
    return (torch.cat(starts, 1).int(), torch.cat(sizes, 1).int(), torch.cat(weights, 1).contiguous())


def _taps(params: AugmentParams, resized: tuple[int, int], antialias: bool, width: int):
    """Each image's filter taps for its output window (``taps_reference``), ``width`` a line, on the parameters'
    device: by ``_taps_kernel``, one launch, on a GPU; interpreted on the CPU, by ``taps_reference``."""
    device = params.boxes.device
    if device.type == "cpu":
        return taps_reference(params, resized, antialias)
    n, lines = params.boxes.shape[0], resized[0] + resized[1]
    starts = torch.empty((n, lines), dtype=torch.int32, device=device)
    sizes = torch.empty_like(starts)
    weights = torch.empty((n, lines, width), dtype=torch.float32, device=device)
    _taps_kernel[(n, 2)](params.boxes, params.windows, starts, sizes, weights, *resized, width, ANTIALIAS=antialias,
                         BLOCK=128)
    return starts, sizes, weights


def augment_batch(images: Sequence[torch.Tensor], params: AugmentParams, size: tuple[int, int],
                  dtype: torch.dtype = torch.float32, scale=None, shift=None, *, quantize: bool = True,
                  channels_last: bool = False, out: torch.Tensor | None = None,
                  block: int | tuple[int, int] | None = None, warp: Warp | None = None,
                  antialias: bool = True) -> torch.Tensor:
    """Augment a ragged batch with one fused kernel (two when a plan has contrast, one more with a warp).

    Args:
        images: N (C, H, W) uint8 tensors on one device, C 1 or 3, any
            strides (an HWC array is ``hwc.permute(2, 0, 1)``, no copy).
        params: the per-image crop boxes, windows, flips and color operations.
        size: output (height, width).
        dtype: float32, float16, bfloat16, or uint8 (then scale is None).
        scale, shift: the per-channel map ``x * scale + shift`` of uint8
            levels x to output values (``ToDtype(scale=True)`` then
            ``Normalize``: ``1 / (255 std)`` and ``-mean / std``).
        quantize: round to uint8 levels where torchvision's uint8 path does.
        channels_last: the output's memory format, when ``out`` is not given.
        out: an (N, 3, H, W) tensor to write into, of any strides.
        warp: a rotation or affine map of the resized images (of
            ``warp.size``) to ``size``, through ``params.matrices``.
        antialias: False resizes with plain bilinear sampling (two taps per
            axis however much it shrinks), as ``interpolate(antialias=False)``
            and RPP's LINEAR resize (fastload.compat.rocal's JSON pipelines).
        block: the output tile a program computes: (rows, columns), powers
            of two, or a pixel count; None picks ``GPU_TILE`` on a GPU.
    """
    if triton is None:
        raise RuntimeError("fastload.kernels.augment needs triton; use augment_reference")
    _check(images, params, warp)
    affine = _out_values(dtype, scale, shift, quantize)
    n = len(images)
    height, width = size
    device = images[0].device if n else params.boxes.device
    if out is None:
        out = torch.empty((n, 3, height, width), dtype=dtype, device=device,
                          memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    if out.shape != (n, 3, height, width) or out.dtype != dtype:
        raise ValueError(f"out is {tuple(out.shape)} {out.dtype}, expected {(n, 3, height, width)} {dtype}")
    if n == 0:
        return out
    src_ptrs = torch.tensor([image.data_ptr() for image in images], dtype=torch.int64)
    src_meta = torch.tensor([[image.shape[1], image.shape[2], image.shape[0]] + list(image.stride())
                             for image in images], dtype=torch.int64)
    src_ptrs, src_meta = src_ptrs.to(device, non_blocking=True), src_meta.to(device, non_blocking=True)
    if affine is None:
        scale_t = shift_t = torch.zeros(3, dtype=torch.float32, device=device)
    else:
        scale_t, shift_t = (v.to(device) for v in affine)
    resized = warp.size if warp is not None else size
    params = params.with_windows(resized)  # built on the host: checked above without a device sync
    taps_width = _taps_width(params, antialias)

    def shape(height: int, width: int) -> tuple[int, int]:
        return _tile_shape(height, width, block, device)

    def tiles(height: int, width: int) -> int:
        rows, cols = shape(height, width)
        return triton.cdiv(height, rows) * triton.cdiv(width, cols)

    n_tiles = tiles(height, width)
    slots = params.ops.shape[1]
    has_contrast = slots > 0 and bool((params.ops == CONTRAST).any())
    flips = bool(params.flips.any())
    params = params.to(device)
    starts, sizes, weights = _taps(params, resized, antialias, taps_width)
    partials = torch.empty((n, n_tiles) if has_contrast else (1,), dtype=torch.float32, device=device)
    inputs = (src_ptrs, src_meta, params.boxes, starts, sizes, weights, weights.shape[-1], params.flips, params.ops,
              params.factors, partials, scale_t, shift_t)
    warp_args = (out, 1, 1, scale_t, scale_t)  # read only with WARP
    if warp is not None:  # first the resized batch alone: uint8 levels, or values in [0, 1]
        mid = torch.empty((n, 3) + tuple(warp.size), dtype=torch.uint8 if quantize else torch.float32, device=device)
        mid_tiles = tiles(*warp.size)
        rows, cols = shape(*warp.size)
        _augment_kernel[(mid_tiles, n)](*inputs, mid, *mid.stride(), *warp.size, mid_tiles, *warp_args, SLOTS=0,
                                        HAS_CONTRAST=False, MEAN_PASS=False, QUANTIZE=quantize, NORMALIZE=False,
                                        FLIPS=False, WARP=False, NEAREST=False, HAS_FILL=False,
                                        ANTIALIAS=antialias, TILES=1,
                                        TH=rows, TW=cols, num_warps=_warps(rows, cols))
        # the fill on the chain's scale, as augment_reference converts it (in double, then to float32)
        fill = scale_t if warp.fill is None else torch.tensor([v if quantize else v / 255.0 for v in warp.fill],
                                                              dtype=torch.float32, device=device)
        warp_args = (mid, *warp.size, params.matrices, fill)
    arguments = inputs + (out, *out.stride(), height, width, n_tiles) + warp_args
    rows, cols = shape(height, width)
    options = dict(SLOTS=slots, HAS_CONTRAST=has_contrast, QUANTIZE=quantize, NORMALIZE=affine is not None,
                   FLIPS=flips, WARP=warp is not None, NEAREST=warp is not None and warp.nearest,
                   HAS_FILL=warp is not None and warp.fill is not None, ANTIALIAS=antialias,
                   TILES=triton.next_power_of_2(n_tiles),
                   TH=rows, TW=cols, num_warps=_warps(rows, cols))
    grid = (n_tiles, n)
    if has_contrast:
        _augment_kernel[grid](*arguments, MEAN_PASS=True, **options)
    _augment_kernel[grid](*arguments, MEAN_PASS=False, **options)
    return out
