"""Fused batch augmentation: N decoded uint8 images of any sizes -> one (N, 3, H, W) batch, in one pass.

torchvision augments one sample and one operation at a time, each reading
and writing the whole image. ``augment_batch`` launches one Triton program
per tile of output pixels (rows by columns) of each image, and runs crop,
resize, flips, the color operations, grayscale, normalize, dtype and layout
in registers before the single write (one launch; one more first when a
plan has contrast, for the mean gray level; one more with a warp, for the
resized batch it resamples). The module is in three parts, as
Liger-Kernel's ops are: this launcher, with the parameters and the
operation ids; the Triton kernels (``augment_triton``); the same math in
plain torch (``augment_torch``), the tests' oracle and the CPU path's
implementation. The resize's taps tables in plain torch (``taps_torch``)
stay here: the launcher uses them in place of ``taps_kernel`` on CPU
tensors.

Semantics are torchvision.transforms.v2.functional on the uint8 image
tensor: ``resized_crop`` (bilinear, antialias=True, zero padding outside
the image), ``hflip``/``vflip``, ``adjust_brightness``,
``adjust_contrast``, ``adjust_saturation``, ``adjust_hue``,
``rgb_to_grayscale``, then the value steps of ``to_dtype(scale=True)`` (or
``to_tensor``) + ``normalize`` op by op (a ``normalize.Normalization``: on
uint8 levels a lookup in its exact table, on floats a true division); with
a ``warp``, ``affine_image`` / ``rotate_image``
(nearest or bilinear grid sampling, zeros outside, the fill blended in by
torchvision's mask) between the resize and the flips. With ``quantize=True`` the values are rounded and
truncated to uint8 levels wherever torchvision's uint8 pipeline does
(after the resize and after every color operation); with
``quantize=False`` they stay float in [0, 1], as when the image was
converted to float before the color operations. One-channel images are
read as RGB (the three channels equal), as torchvision's RGB read mode
does. ``antialias=False`` resamples with plain bilinear sampling instead
(RPP's LINEAR resize, for rocAL's JSON pipelines).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Sequence

import torch

try:
    import triton
except ImportError:  # a torch build without triton: augment_torch still works
    triton = None
else:
    from .augment_triton import augment_kernel, taps_kernel

from .normalize import Affine, Normalization, ValueMap

# Color operation ids in ``AugmentParams.ops``; NONE leaves a slot unused for this image.
NONE, BRIGHTNESS, CONTRAST, SATURATION, HUE, GRAYSCALE = -1, 0, 1, 2, 3, 4
OPERATIONS = {"brightness": BRIGHTNESS, "contrast": CONTRAST, "saturation": SATURATION,
              "hue": HUE, "grayscale": GRAYSCALE}
# The ids as augment_kernel's constexpr arguments: defined here once, read there.
OPERATION_IDS = {name.upper(): op for name, op in OPERATIONS.items()}


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



def check_inputs(images: Sequence[torch.Tensor], params: AugmentParams, warp: Warp | None = None) -> None:
    """Refuse what neither implementation takes, naming it."""
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


def output_map(dtype: torch.dtype, scale, shift, quantize: bool, values: ValueMap | None = None) -> ValueMap | None:
    """The map of the chain's values to the output: ``values``, or ``scale`` and ``shift`` as an ``Affine``;
    None for uint8 levels as they are. With ``quantize=False`` the chain holds the unit's floats, so the map
    must be a ``Normalization`` that fits that chain."""
    if values is None and scale is not None:
        values = Affine(tuple(torch.as_tensor(scale, dtype=torch.float64).reshape(3).tolist()),
                        tuple(torch.as_tensor(shift, dtype=torch.float64).reshape(3).tolist()), dtype)
    if values is None:
        if dtype != torch.uint8 or not quantize:
            raise ValueError("without values (or scale/shift) the output is the uint8 image: dtype=torch.uint8, "
                             "quantize=True")
        return None
    if values.dtype != dtype:
        raise ValueError(f"the values' dtype is {values.dtype}, the output's {dtype}")
    if not quantize and not (isinstance(values, Normalization) and values.fits_float_chain):
        raise ValueError("quantize=False takes a Normalization whose unit makes float32 values, then at most "
                         "one Normalize in float32 and a conversion")
    return values


@functools.lru_cache(maxsize=64)
def _device_values(values: ValueMap, quantize: bool, device: torch.device) -> torch.Tensor:
    """What the kernel reads for the map, on ``device``: on uint8 levels the (3, 256) table of each level's
    value; on floats the Normalize's mean and std (6 values; zeros and ones without one)."""
    if quantize:
        return values.table(device)
    (_, mean, std), = values.normalizes or (("normalize", (0.0,) * 3, (1.0,) * 3),)
    return torch.tensor(mean + std, dtype=torch.float32, device=device)



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


def taps_torch(params: AugmentParams, resized: tuple[int, int], antialias: bool = True):
    """What ``taps_kernel`` writes, in plain torch (the same float32 steps, so the same bits): for each image's
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
    """Each image's filter taps for its output window (``taps_torch``), ``width`` a line, on the parameters'
    device: by ``taps_kernel``, one launch, on a GPU; interpreted on the CPU, by ``taps_torch``."""
    device = params.boxes.device
    if device.type == "cpu":
        return taps_torch(params, resized, antialias)
    n, lines = params.boxes.shape[0], resized[0] + resized[1]
    starts = torch.empty((n, lines), dtype=torch.int32, device=device)
    sizes = torch.empty_like(starts)
    weights = torch.empty((n, lines, width), dtype=torch.float32, device=device)
    taps_kernel[(n, 2)](params.boxes, params.windows, starts, sizes, weights, *resized, width, ANTIALIAS=antialias,
                        BLOCK=128)
    return starts, sizes, weights


def augment_batch(images: Sequence[torch.Tensor], params: AugmentParams, size: tuple[int, int],
                  dtype: torch.dtype = torch.float32, scale=None, shift=None, *, quantize: bool = True,
                  channels_last: bool = False, out: torch.Tensor | None = None,
                  block: int | tuple[int, int] | None = None, warp: Warp | None = None,
                  antialias: bool = True, values: ValueMap | None = None) -> torch.Tensor:
    """Augment a ragged batch with one fused kernel (two when a plan has contrast, one more with a warp).

    Args:
        images: N (C, H, W) uint8 tensors on one device, C 1 or 3, any
            strides (an HWC array is ``hwc.permute(2, 0, 1)``, no copy).
        params: the per-image crop boxes, windows, flips and color operations.
        size: output (height, width).
        dtype: float32, float16, bfloat16, or uint8 (then scale and values are None).
        scale, shift: an affine map ``x * scale + shift`` of uint8 levels x
            to output values in float32 (DALI's and rocAL's arithmetic), where
            ``values`` is not given.
        values: the map of levels to output values (``normalize.Normalization``:
            torchvision's ops, exactly; or an ``Affine``).
        quantize: round to uint8 levels where torchvision's uint8 path does;
            False: the chain holds floats in [0, 1] (``values``' unit of the levels).
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
        raise RuntimeError("fastload.kernels.augment needs triton; use augment_torch.augment_torch")
    check_inputs(images, params, warp)
    values = output_map(dtype, scale, shift, quantize, values)
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
    normalize = values is not None and (quantize or bool(values.normalizes))
    value_args = _device_values(values, quantize, device) if normalize else None
    divide = values is not None and not quantize and values.unit == "divide"
    resized = warp.size if warp is not None else size
    params = params.with_windows(resized)  # built on the host: checked above without a device sync
    taps_width = _taps_width(params, antialias)

    def shape(height: int, width: int) -> tuple[int, int]:
        return _tile_shape(height, width, block, device)

    def tiles(height: int, width: int) -> int:
        rows, cols = shape(height, width)
        return triton.cdiv(height, rows) * triton.cdiv(width, cols)

    def launch(grid, partials, value_args, target, out_h, out_w, n_tiles, mid, mid_h, mid_w, matrices, fill,
               **options):
        rows, cols = shape(out_h, out_w)
        augment_kernel[grid](src_ptrs, src_meta, params.boxes, starts, sizes, weights, weights.shape[-1],
                             params.flips, params.ops, params.factors, partials, value_args, target,
                             *target.stride(), out_h, out_w, n_tiles, mid, mid_h, mid_w, matrices, fill,
                             **OPERATION_IDS, ANTIALIAS=antialias, QUANTIZE=quantize, UNIT_DIVIDE=divide,
                             TH=rows, TW=cols,
                             num_warps=_warps(rows, cols), **options)

    n_tiles = tiles(height, width)
    slots = params.ops.shape[1]
    has_contrast = slots > 0 and bool((params.ops == CONTRAST).any())
    flips = bool(params.flips.any())
    params = params.to(device)
    starts, sizes, weights = _taps(params, resized, antialias, taps_width)
    partials = torch.empty((n, n_tiles), dtype=torch.float32, device=device) if has_contrast else None
    mid = matrices = fill = None
    if warp is not None:  # first the resized batch alone: uint8 levels, or values in [0, 1]
        mid = torch.empty((n, 3) + tuple(warp.size), dtype=torch.uint8 if quantize else torch.float32, device=device)
        mid_tiles = tiles(*warp.size)
        launch((mid_tiles, n), None, None, mid, *warp.size, mid_tiles, None, None, None, None, None,
               SLOTS=0, HAS_CONTRAST=False, MEAN_PASS=False, NORMALIZE=False, FLIPS=False, WARP=False,
               NEAREST=False, HAS_FILL=False, TILES=1)
        matrices = params.matrices
        if warp.fill is not None:  # on the chain's scale, as augment_torch converts it (in double, then to float32)
            fill = torch.tensor([v if quantize else v / 255.0 for v in warp.fill], dtype=torch.float32,
                                device=device)
    mid_size = tuple(warp.size) if warp is not None else (None, None)
    options = dict(SLOTS=slots, HAS_CONTRAST=has_contrast, NORMALIZE=normalize, FLIPS=flips,
                   WARP=warp is not None, NEAREST=warp is not None and warp.nearest, HAS_FILL=fill is not None,
                   TILES=triton.next_power_of_2(n_tiles))
    grid = (n_tiles, n)
    for mean_pass in (True, False) if has_contrast else (False,):
        launch(grid, partials, value_args, out, height, width, n_tiles, mid, *mid_size, matrices, fill,
               MEAN_PASS=mean_pass, **options)
    return out
