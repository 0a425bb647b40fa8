"""The image operations DALI's automatic augmentations are built of, as graph builders: ``op(data, param, ...)``
adds one ``Op`` whose per-sample work is below, in torch, taking the parameter as an input (a per-sample
DataNode or a constant) and running frame by frame on FHWC videos.

DALI writes these augmentations as chains of its operators (``fn.warp_affine`` over ``fn.transforms``,
``fn.experimental.filter``, ``fn.experimental.equalize``, ``fn.reductions`` and arithmetic, which fastload's
``fn`` mostly lacks); each is one operator here, computing what that chain computes for a uint8 image, in the
same float32 steps (tests/compat/test_dali_auto_aug.py compares every one with real DALI, pixel by pixel).
rotate, brightness and color reuse ``warping.rotate``, ``colour.brightness_contrast`` and ``colour.hsv``,
which match DALI's.

- shear / translation: DALI's ``fn.warp_affine(matrix, inverse_map=False)`` of a shear about the origin or a
  translation, on ``geometry``'s warp (the matrix inverted in float32, each output pixel centre mapped back
  along the row as DALI walks it; bilinear or nearest, ``fill_value`` outside, or the nearest border pixel
  when None).
- contrast: PIL's contrast enhancement about the channel-weighted mean (0.299, 0.587, 0.114) of the
  per-channel means, ``center + (x - center) * factor``, rounded as ``fn.cast_like`` rounds.
- sharpness: a 3x3 correlation with the (float32) kernel the parameter is, border reflected without repeating
  the edge (DALI's filter default), accumulated row by row with fused multiply-adds in float32 and rounded to
  nearest with ties to even (both measured: plain float32 sums, or rounding ties away, miss a few pixels).
- equalize: OpenCV's histogram equalisation per channel (DALI follows it, not PIL).
- auto_contrast, posterize, solarize, solarize_add, invert: the arithmetic DALI's augmentations do.
"""

from __future__ import annotations

import numpy as np
import torch

from ...float32 import fmaf
from .. import colour, geometry, warping
from ...engine.graph import DataNode, Op, constant
from ...engine.conversions import convert_sat
from ..operators import _device, _layout, _one
from ..types import interp_name

_F32 = np.float32


def _param(param) -> DataNode:
    """A parameter as an operator input: a DataNode (per sample) as is, a constant array as a constant node."""
    return param if isinstance(param, DataNode) else constant(np.asarray(param))


def _image_op(name: str, data, param, impl, **settings):
    """One per-sample operator ``impl(image, param, **settings)`` on an HWC image, or on each frame of an FHWC
    sequence (DALI's augmentations take videos and treat each frame as an image), computed on the CPU."""
    layout = _layout(f"auto_aug {name}", data, ("HWC", "FHWC"))
    inputs = [data] if param is None else [data, _param(param)]

    def run(ctx, op, image, *rest, **a):
        value = rest[0].cpu() if rest and isinstance(rest[0], torch.Tensor) else (rest[0] if rest else None)
        if image.dtype != torch.uint8:
            raise NotImplementedError(f"fastload.compat.dali: auto_aug {name} of {image.dtype} images is not "
                                      f"supported (uint8, as DALI's augmentations expect)")
        image = image.cpu()
        if layout == "FHWC":
            return torch.stack([impl(frame, value, **a) for frame in image]) if len(image) else image.clone()
        return impl(image, value, **a)
    return _one(Op(f"auto_aug.{name}", run, inputs, settings, device=_device([data], None),
                   layouts=(data.layout() or "HWC",), fusable=False))


def _number(value) -> float:
    return float(torch.as_tensor(value).reshape(-1)[0])


def rotate(data, angle, fill_value=128, interp_type=None, keep_size=True):
    """``fn.rotate(data, angle=angle, fill_value=..., keep_size=...)`` (``warping.rotate``), per frame."""
    interp = interp_name(interp_type) if interp_type is not None else "linear"
    return _image_op("rotate", data, angle, lambda image, angle, **a: warping.rotate(image, _number(angle), **a),
                     fill_value=fill_value, keep_size=bool(keep_size), interp_type=interp)


def brightness(data, factor):
    """``fn.brightness(data, brightness=factor)``: ``x * factor``, rounded (``colour.brightness_contrast``)."""
    return _image_op("brightness", data, factor,
                     lambda image, f: colour.brightness_contrast(image, brightness=_number(f)))


def saturation(data, factor):
    """``fn.saturation(data, saturation=factor)``: DALI's YIQ chroma scaling (``colour.hsv``)."""
    return _image_op("color", data, factor, lambda image, f: colour.hsv(image, saturation=_number(f)))


# ------------------------------------------------------------------------------------------------ warp

def warp_forward(image: torch.Tensor, forward: np.ndarray, fill_value, interp: str) -> torch.Tensor:
    """``image`` warped by the 2x3 input-to-output ``forward`` map, output the input's size: DALI's
    ``warp_affine(inverse_map=False)``, which inverts the matrix in float32 (``geometry._inverse_2x3``)
    and samples as ``warping.warp`` does."""
    height, width = image.shape[:2]
    return warping.warp(image, geometry._inverse_2x3(np.asarray(forward, dtype=_F32)), height, width,
                         fill_value=fill_value, interp=interp)


def _interp(interp_type) -> str:
    interp = interp_name(interp_type) if interp_type is not None else "linear"
    if interp not in ("nn", "linear"):
        raise NotImplementedError(f"fastload.compat.dali: auto_aug warps with interp_type INTERP_NN or "
                                  f"INTERP_LINEAR only (DALI's documented choices), got {interp_type}")
    return interp


def shear(data, shear, fill_value=128, interp_type=None):
    """``fn.warp_affine(data, fn.transforms.shear(shear=shear), inverse_map=False)``: x' = x + s_x y,
    y' = y + s_y x, about the origin (the top-left corner)."""
    def impl(image, s, fill_value, interp):
        s = np.asarray(s, dtype=_F32).reshape(-1)
        forward = np.array([[1, s[0], 0], [s[1], 1, 0]], dtype=_F32)
        return warp_forward(image, forward, fill_value, interp)
    return _image_op("shear", data, shear, impl, fill_value=fill_value, interp=_interp(interp_type))


def translate(data, offset, fill_value=128, interp_type=None, scale_by=None):
    """``fn.warp_affine(data, fn.transforms.translation(offset=offset), inverse_map=False)``; with
    ``scale_by`` (the image shape's extent along the offset's axis: a number or a per-sample DataNode), the
    offset is ``offset * scale_by`` in float32, as DALI's ``rel_offset * shape[axis]``."""
    def impl(image, offset, fill_value, interp, extent=None):
        o = np.asarray(offset, dtype=_F32).reshape(-1)
        if extent is not None:
            o = (o * _F32(extent)).astype(_F32)
        forward = np.array([[1, 0, o[0]], [0, 1, o[1]]], dtype=_F32)
        return warp_forward(image, forward, fill_value, interp)
    settings = {"fill_value": fill_value, "interp": _interp(interp_type)}
    if scale_by is not None:
        settings["extent"] = scale_by  # a DataNode becomes a per-sample argument
    return _image_op("translate", data, offset, impl, **settings)


# ----------------------------------------------------------------------------------------------- colour

def _cast_like(values: torch.Tensor) -> torch.Tensor:
    return convert_sat(values, torch.uint8)


def contrast(data, factor):
    """PIL's contrast about the weighted mean of the per-channel means (DALI: reductions.mean, times the
    weights, reductions.sum, then ``center + (x - center) * factor`` cast like the input)."""
    def impl(image, factor):
        flat = image.reshape(-1, image.shape[-1]).to(torch.float64)
        means = (flat.sum(0) / flat.shape[0]).to(torch.float32)
        weighted = means * torch.tensor([0.299, 0.587, 0.114], dtype=torch.float32)[:means.numel()]
        center = weighted[0]
        for value in weighted[1:]:
            center = center + value
        f = torch.as_tensor(factor, dtype=torch.float32).reshape(())
        return _cast_like(center + (image.float() - center) * f)
    return _image_op("contrast", data, factor, impl)


def sharpen(data, kernel):
    """``fn.experimental.filter(data, kernel)`` with a 3x3 kernel: correlation, borders reflected (101)."""
    def impl(image, kernel):
        k = torch.as_tensor(kernel, dtype=torch.float32).reshape(3, 3)
        height, width = image.shape[:2]
        rows = _reflect101(torch.arange(-1, height + 1), height)
        cols = _reflect101(torch.arange(-1, width + 1), width)
        padded = image.numpy().astype(_F32)[rows.numpy()][:, cols.numpy()]
        out = np.zeros(image.shape, dtype=_F32)
        for dy in range(3):
            for dx in range(3):  # a fused multiply-add per tap into a float32 sum, row by row (measured)
                out = fmaf(padded[dy:dy + height, dx:dx + width], k[dy, dx].item(), out)
        return torch.round(torch.from_numpy(out)).clamp(0, 255).to(torch.uint8)  # ties to even (measured)
    return _image_op("sharpness", data, kernel, impl)


def _reflect101(index: torch.Tensor, size: int) -> torch.Tensor:
    if size == 1:
        return torch.zeros_like(index)
    period = 2 * size - 2
    index = index.remainder(period)
    return torch.where(index >= size, period - index, index)


def equalize(data):
    """OpenCV's equalizeHist per channel: the cumulative histogram past the first occupied level, scaled
    by 255 / (pixels not at that level) and rounded; a one-level channel stays as it is."""
    def impl(image, _):
        channels = []
        for c in range(image.shape[-1]):
            values = image[..., c].reshape(-1).long()
            hist = torch.bincount(values, minlength=256)
            total = values.numel()
            first = int(torch.nonzero(hist)[0]) if total else 0
            if total == 0 or int(hist[first]) == total:
                channels.append(image[..., c])
                continue
            scale = _F32(255) / _F32(total - int(hist[first]))
            cumulative = torch.cumsum(hist, 0) - hist[first]
            lut = np.rint(cumulative.numpy().astype(_F32) * scale).clip(0, 255).astype(np.uint8)
            lut[:first + 1] = 0
            channels.append(torch.from_numpy(lut)[values].reshape(image.shape[:-1]))
        return torch.stack(channels, -1)
    return _image_op("equalize", data, None, impl)


def auto_contrast(data):
    """Each channel stretched to 0..255: ``(x - lo) * (255 / (hi - lo))`` in float32, rounded; a flat
    channel (hi == lo) is left as it is."""
    def impl(image, _):
        flat = image.reshape(-1, image.shape[-1])
        lo, hi = flat.min(0).values, flat.max(0).values
        diff = hi - lo
        stretch = diff > 0
        div = torch.where(stretch, diff, torch.tensor(255, dtype=torch.uint8)).float()
        scale = torch.tensor(255.0, dtype=torch.float32) / div
        shifted = image - torch.where(stretch, lo, torch.tensor(0, dtype=torch.uint8))
        return _cast_like(shifted.float() * scale)
    return _image_op("auto_contrast", data, None, impl)


def posterize(data, mask):
    """``data & mask`` (the mask keeps the top bits)."""
    return _image_op("posterize", data, mask,
                     lambda image, mask: image & torch.as_tensor(mask).to(torch.uint8).reshape(()))


def solarize(data, threshold):
    """Values at or above ``threshold`` inverted (255 - x), the rest kept."""
    def impl(image, threshold):
        t = torch.as_tensor(threshold, dtype=torch.float32).reshape(())
        return torch.where(image.float() < t, image, 255 - image)
    return _image_op("solarize", data, threshold, impl)


def solarize_add(data, shift):
    """Values below 128 raised by ``shift`` (uint8 arithmetic; shifts stay below 128), the rest kept."""
    def impl(image, shift):
        s = torch.as_tensor(shift).to(torch.uint8).reshape(())
        return torch.where(image < 128, image + s, image)
    return _image_op("solarize_add", data, shift, impl)


def invert(data):
    """``255 - data``."""
    return _image_op("invert", data, None, lambda image, _: 255 - image)
