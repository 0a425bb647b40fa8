"""rocAL's colour operators: RPP's point operations on uint8 pixels (brightness, contrast, colour
twist, hue, saturation, gamma, exposure, colour temperature, vignette) and blend, nop and copy.
"""

from __future__ import annotations

import torch

from ..dali.graph import DataNode, Op
from . import imageops
from .ops_common import PREFIX, Rocal, _image_op, _kind, _param, _source
from .types import RocalTensorLayout, RocalTensorOutputType


def _color_op(name: str, formula, defaults: dict):
    """An RPP point operation on uint8 pixels, rounded half to even and saturated; a parameter left None is
    drawn per sample from rocAL's default range (rocAL/include/augmentations/color_augmentations)."""
    def build(*inputs, device=None, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8,
              **params):
        unknown = set(params) - set(defaults)
        if unknown:
            raise TypeError(f"fn.{name}() got unexpected keyword argument(s) {', '.join(sorted(unknown))}")
        layout, dtype = _kind(output_layout, output_dtype)
        out = Rocal(_source(inputs).buffer, layout, dtype)

        def run(ctx, op, image, **values):
            rng = ctx.rng(op)
            drawn = {key: (rng.uniform(*defaults[key]) if value is None else float(value))
                     for key, value in values.items()}
            return imageops.as_output(formula(image.float(), **drawn), out.torch_dtype)
        values = {key: _param(params.get(key)) for key in defaults}
        return _image_op(name, run, inputs[0], values, out)
    build.__name__ = name
    return build


# rocAL/source/augmentations/color_augmentations: node_brightness.h (ALPHA_RANGE, BETA_RANGE) and
# node_contrast.h; RPP kernel/brightness.cpp (x * alpha + beta) and kernel/contrast.cpp
brightness = _color_op("brightness", lambda x, brightness, brightness_shift: x * brightness + brightness_shift,
                       {"brightness": (0.1, 1.95), "brightness_shift": (0.0, 25.0)})
contrast = _color_op("contrast", lambda x, contrast, contrast_center: (x - contrast_center) * contrast
                     + contrast_center, {"contrast": (0.1, 1.95), "contrast_center": (60.0, 90.0)})
brightness.__doc__ = ("``fn.brightness``: x * brightness + brightness_shift (each None: drawn per sample, "
                      "[0.1, 1.95] and [0, 25] -- so a brightness alone still adds a random shift, as in rocAL)")
contrast.__doc__ = ("``fn.contrast``: (x - contrast_center) * contrast + contrast_center (each None: drawn "
                    "per sample, [0.1, 1.95] and [60, 90])")
_brightness = brightness


def color_twist(*inputs, brightness=1.0, contrast=1.0, hue=0.0, saturation=1.0, device=None,
                output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.color_twist``: RPP's fused twist (imageops.color_twist): ``brightness`` multiplies, ``contrast``
    is added in pixel units, ``hue`` in degrees, ``saturation`` a factor; one left None is drawn per sample
    from rocAL's range (node_color_twist.h: [0.1, 1.95], [0.1, 25], [5, 170], [0.1, 0.4])."""
    return _color_twist(*inputs, brightness=brightness, contrast=contrast, hue=hue, saturation=saturation,
                        output_layout=output_layout, output_dtype=output_dtype)


_color_twist = _color_op("color_twist", lambda x, **p: imageops.color_twist(x.round().to(torch.uint8), **p).float(),
                         {"brightness": (0.1, 1.95), "contrast": (0.1, 25.0), "hue": (5.0, 170.0),
                          "saturation": (0.1, 0.4)})


def brightness_fixed(*inputs, brightness=1.0, brightness_shift=0.0, device=None,
                     output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8):
    """``fn.brightness_fixed``: fn.brightness with fixed values (defaults 1.0 and 0.0)."""
    return _brightness(*inputs, brightness=float(brightness), brightness_shift=float(brightness_shift),
                       output_layout=output_layout, output_dtype=output_dtype)


# rocAL/include/augmentations/color_augmentations: node_hue.h, node_saturation.h, node_gamma.h,
# node_exposure.h, node_color_temperature.h, node_blend.h (the ranges a parameter left None is drawn from)
_hue = _color_op("hue", lambda x, hue: imageops.hue_saturation(x.round().clamp(0, 255).to(torch.uint8),
                                                               hue=hue).float(), {"hue": (-359.0, 359.0)})
_saturation = _color_op("saturation", lambda x, saturation: imageops.hue_saturation(
    x.round().clamp(0, 255).to(torch.uint8), saturation=saturation).float(), {"saturation": (-0.5, 0.5)})
_gamma = _color_op("gamma_correction", lambda x, gamma: imageops.gamma_lut(gamma)[
    x.round().clamp(0, 255).long()].float(), {"gamma": (0.3, 7.0)})
_exposure = _color_op("exposure", imageops.exposure, {"exposure": (0.15, 0.95)})
_color_temp = _color_op("color_temp", lambda x, adjustment_value: imageops.color_temperature(
    x, int(round(adjustment_value))), {"adjustment_value": (-99.0, 99.0)})


def hue(*inputs, hue=None, device=None, seed=0, output_layout=RocalTensorLayout.NHWC,
        output_dtype=RocalTensorOutputType.UINT8):
    """``fn.hue``: the hue turned by ``hue`` degrees (imageops.hue_saturation); None: drawn per sample in
    [-359, 359]."""
    return _hue(*inputs, hue=hue, output_layout=output_layout, output_dtype=output_dtype)


def saturation(*inputs, saturation=1.0, device=None, output_layout=RocalTensorLayout.NHWC,
               output_dtype=RocalTensorOutputType.UINT8):
    """``fn.saturation``: the HSV saturation times ``saturation``, clamped to [0, 1] (0: grey, 1: as it
    is); None: drawn per sample in [-0.5, 0.5]."""
    return _saturation(*inputs, saturation=saturation, output_layout=output_layout, output_dtype=output_dtype)


def gamma_correction(*inputs, gamma=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
                     output_dtype=RocalTensorOutputType.UINT8):
    """``fn.gamma_correction``: RPP's table 255 * (x / 255) ** gamma, truncated (imageops.gamma_lut); None:
    drawn per sample in [0.3, 7]."""
    return _gamma(*inputs, gamma=gamma, output_layout=output_layout, output_dtype=output_dtype)


def exposure(*inputs, exposure=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.exposure``: x * 2 ** exposure, rounded half to even and saturated; None: drawn per sample in
    [0.15, 0.95]."""
    return _exposure(*inputs, exposure=exposure, output_layout=output_layout, output_dtype=output_dtype)


def color_temp(*inputs, adjustment_value=50, device=None, output_layout=RocalTensorLayout.NHWC,
               output_dtype=RocalTensorOutputType.UINT8):
    """``fn.color_temp``: red + adjustment_value, blue - adjustment_value (an integer); None: drawn per
    sample in [-99, 99]."""
    return _color_temp(*inputs, adjustment_value=adjustment_value, output_layout=output_layout,
                       output_dtype=output_dtype)


def blend(*inputs, ratio=None, device=None, output_layout=RocalTensorLayout.NHWC,
          output_dtype=RocalTensorOutputType.UINT8):
    """``fn.blend(a, b, ratio=)``: a * ratio + b * (1 - ratio) over a's region (imageops.blend), in a's
    buffer; None: drawn per sample in [0.1, 0.9]."""
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
    node = Op("rocal.blend", run, list(inputs), {"ratio": _param(ratio)}, layouts=("HWC",)).outputs[0]
    node.rocal = out
    if getattr(inputs[0], "rocal_boxes", None) is not None:  # fn.readers.coco's boxes: a colour operator's
        node.rocal_boxes = inputs[0].rocal_boxes
    return node


def nop(*inputs, device=None):
    """``fn.nop``: the input, as it is (rocAL's signature: no layout or type arguments)."""
    return _image_op("nop", lambda ctx, op, image: image, inputs[0], {}, _source(inputs))


def copy(*inputs, device=None):
    """``fn.copy``: a copy of the input."""
    return _image_op("copy", lambda ctx, op, image: image.clone(), inputs[0], {}, _source(inputs))


_vignette = _color_op("vignette", lambda x, vignette: imageops.vignette(x, vignette), {"vignette": (40.0, 60.0)})


def vignette(*inputs, vignette=0.5, device=None, output_layout=RocalTensorLayout.NHWC,
             output_dtype=RocalTensorOutputType.UINT8):
    """``fn.vignette``: RPP's vignette at intensity ``vignette`` (imageops.vignette; rocAL's default 0.5;
    None: drawn per sample from node_vignette.h's SDEV_RANGE, [40, 60])."""
    return _vignette(*inputs, vignette=vignette, output_layout=output_layout, output_dtype=output_dtype)
