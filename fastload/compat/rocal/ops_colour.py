"""rocAL's colour operators: RPP's point operations on uint8 pixels (brightness, contrast, colour
twist, hue, saturation, gamma, exposure, colour temperature, vignette) and blend, nop and copy. Each
operator keeps rocAL's signature; the formulas and the ranges a parameter left None is drawn from are
one table (``COLOUR``).
"""

from __future__ import annotations

import torch

from ..dali.graph import DataNode
from . import imageops
from .ops_common import PREFIX, Rocal, _image_op, _kind, _param, _source
from .types import RocalTensorLayout, RocalTensorOutputType


# Each colour operator's RPP formula on float pixels and the range each of its parameters is drawn from
# when left None (rocAL/include/augmentations/color_augmentations: node_brightness.h (ALPHA_RANGE,
# BETA_RANGE), node_contrast.h, node_color_twist.h, node_hue.h, node_saturation.h, node_gamma.h,
# node_exposure.h, node_color_temperature.h, node_vignette.h (SDEV_RANGE); RPP kernel/brightness.cpp
# (x * alpha + beta), kernel/contrast.cpp). The operators below give rocAL's signatures and defaults.
COLOUR = {
    "brightness": (lambda x, brightness, brightness_shift: x * brightness + brightness_shift,
                   {"brightness": (0.1, 1.95), "brightness_shift": (0.0, 25.0)}),
    "contrast": (lambda x, contrast, contrast_center: (x - contrast_center) * contrast + contrast_center,
                 {"contrast": (0.1, 1.95), "contrast_center": (60.0, 90.0)}),
    "color_twist": (lambda x, **p: imageops.color_twist(x.round().to(torch.uint8), **p).float(),
                    {"brightness": (0.1, 1.95), "contrast": (0.1, 25.0), "hue": (5.0, 170.0),
                     "saturation": (0.1, 0.4)}),
    "hue": (lambda x, hue: imageops.hue_saturation(x.round().clamp(0, 255).to(torch.uint8), hue=hue).float(),
            {"hue": (-359.0, 359.0)}),
    "saturation": (lambda x, saturation: imageops.hue_saturation(x.round().clamp(0, 255).to(torch.uint8),
                                                                 saturation=saturation).float(),
                   {"saturation": (-0.5, 0.5)}),
    "gamma_correction": (lambda x, gamma: imageops.gamma_lut(gamma)[x.round().clamp(0, 255).long()].float(),
                         {"gamma": (0.3, 7.0)}),
    "exposure": (lambda x, exposure: imageops.exposure(x, exposure), {"exposure": (0.15, 0.95)}),
    "color_temp": (lambda x, adjustment_value: imageops.color_temperature(x, int(round(adjustment_value))),
                   {"adjustment_value": (-99.0, 99.0)}),
    "vignette": (lambda x, vignette: imageops.vignette(x, vignette), {"vignette": (40.0, 60.0)}),
}


def _colour_op(name: str, inputs, output_layout, output_dtype, **params) -> DataNode:
    """``COLOUR[name]`` as an RPP point operation on uint8 pixels, rounded half to even and saturated; a
    parameter left None is drawn per sample from its range there."""
    formula, ranges = COLOUR[name]
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, image, **values):
        rng = ctx.rng(op)
        drawn = {key: (rng.uniform(*ranges[key]) if value is None else float(value))
                 for key, value in values.items()}
        return imageops.as_output(formula(image.float(), **drawn), out.torch_dtype)
    return _image_op(name, run, inputs[0], {key: _param(params[key]) for key in ranges}, out)


def brightness(*inputs, brightness=None, brightness_shift=None, device=None, output_layout=RocalTensorLayout.NHWC,
               output_dtype=RocalTensorOutputType.UINT8):
    """``fn.brightness``: x * brightness + brightness_shift (each None: drawn per sample, [0.1, 1.95] and
    [0, 25] -- so a brightness alone still adds a random shift, as in rocAL)."""
    return _colour_op("brightness", inputs, output_layout, output_dtype, brightness=brightness,
                      brightness_shift=brightness_shift)


def brightness_fixed(*inputs, brightness=1.0, brightness_shift=0.0, device=None,
                     output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.brightness_fixed``: fn.brightness with fixed values (defaults 1.0 and 0.0)."""
    return _colour_op("brightness", inputs, output_layout, output_dtype, brightness=float(brightness),
                      brightness_shift=float(brightness_shift))


def contrast(*inputs, contrast=None, contrast_center=None, device=None, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.contrast``: (x - contrast_center) * contrast + contrast_center (each None: drawn per sample,
    [0.1, 1.95] and [60, 90])."""
    return _colour_op("contrast", inputs, output_layout, output_dtype, contrast=contrast,
                      contrast_center=contrast_center)


def color_twist(*inputs, brightness=1.0, contrast=1.0, hue=0.0, saturation=1.0, device=None,
                output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.color_twist``: RPP's fused twist (imageops.color_twist): ``brightness`` multiplies, ``contrast``
    is added in pixel units, ``hue`` in degrees, ``saturation`` a factor; one left None is drawn per sample
    from rocAL's range (node_color_twist.h: [0.1, 1.95], [0.1, 25], [5, 170], [0.1, 0.4])."""
    return _colour_op("color_twist", inputs, output_layout, output_dtype, brightness=brightness, contrast=contrast,
                      hue=hue, saturation=saturation)


def hue(*inputs, hue=None, device=None, seed=0, output_layout=RocalTensorLayout.NHWC,
        output_dtype=RocalTensorOutputType.UINT8):
    """``fn.hue``: the hue turned by ``hue`` degrees (imageops.hue_saturation); None: drawn per sample in
    [-359, 359]."""
    return _colour_op("hue", inputs, output_layout, output_dtype, hue=hue)


def saturation(*inputs, saturation=1.0, device=None, output_layout=RocalTensorLayout.NHWC,
               output_dtype=RocalTensorOutputType.UINT8):
    """``fn.saturation``: the HSV saturation times ``saturation``, clamped to [0, 1] (0: grey, 1: as it
    is); None: drawn per sample in [-0.5, 0.5]."""
    return _colour_op("saturation", inputs, output_layout, output_dtype, saturation=saturation)


def gamma_correction(*inputs, gamma=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
                     output_dtype=RocalTensorOutputType.UINT8):
    """``fn.gamma_correction``: RPP's table 255 * (x / 255) ** gamma, truncated (imageops.gamma_lut); None:
    drawn per sample in [0.3, 7]."""
    return _colour_op("gamma_correction", inputs, output_layout, output_dtype, gamma=gamma)


def exposure(*inputs, exposure=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.exposure``: x * 2 ** exposure, rounded half to even and saturated; None: drawn per sample in
    [0.15, 0.95]."""
    return _colour_op("exposure", inputs, output_layout, output_dtype, exposure=exposure)


def color_temp(*inputs, adjustment_value=50, device=None, output_layout=RocalTensorLayout.NHWC,
               output_dtype=RocalTensorOutputType.UINT8):
    """``fn.color_temp``: red + adjustment_value, blue - adjustment_value (an integer); None: drawn per
    sample in [-99, 99]."""
    return _colour_op("color_temp", inputs, output_layout, output_dtype, adjustment_value=adjustment_value)


def vignette(*inputs, vignette=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.vignette``: RPP's vignette at intensity ``vignette`` (imageops.vignette; rocAL's default 0.5;
    None: drawn per sample from node_vignette.h's SDEV_RANGE, [40, 60])."""
    return _colour_op("vignette", inputs, output_layout, output_dtype, vignette=vignette)


def blend(*inputs, ratio=None, device=None, output_layout=RocalTensorLayout.NHWC,
          output_dtype=RocalTensorOutputType.UINT8):
    """``fn.blend(a, b, ratio=)``: a * ratio + b * (1 - ratio) over a's region (imageops.blend), in a's
    buffer; None: drawn per sample in [0.1, 0.9] (node_blend.h)."""
    if len(inputs) != 2 or not all(isinstance(i, DataNode) and hasattr(i, "rocal") for i in inputs):
        raise TypeError(f"{PREFIX}: fn.blend takes two image outputs of decoders or image operators")
    if any(hasattr(i, "rocal_frames") for i in inputs):
        raise NotImplementedError(f"{PREFIX}: fn.blend of fn.readers.video's sequences is not supported")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, first, second, ratio):
        if ratio is None:
            ratio = ctx.rng(op).uniform(0.1, 0.9)
        return imageops.as_output(imageops.blend(first, second, float(ratio)), out.torch_dtype)
    return _image_op("blend", run, inputs[0], {"ratio": _param(ratio)}, out, others=inputs[1:])


def nop(*inputs, device=None):
    """``fn.nop``: the input, as it is (rocAL's signature: no layout or type arguments)."""
    return _image_op("nop", lambda ctx, op, image: image, inputs[0], {}, _source(inputs))


def copy(*inputs, device=None):
    """``fn.copy``: a copy of the input."""
    return _image_op("copy", lambda ctx, op, image: image.clone(), inputs[0], {}, _source(inputs))
