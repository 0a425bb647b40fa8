"""rocAL's colour operators: RPP's point operations on uint8 pixels (brightness, contrast, colour
twist, hue, saturation, gamma, exposure, colour temperature, vignette) and blend, nop and copy. Each
point operation is one declaration (``colour_operator``): its formula, rocAL's arguments and defaults, the
ranges a parameter left None is drawn from and its docstring, from which its function and spec are made.
"""

from __future__ import annotations

import inspect

import torch

from ..engine.graph import DataNode
from . import imageops
from .meta import meta
from .ops_common import PREFIX, Rocal, _image_op, _kind, _param, _source
from .spec import KEEP, operator
from .types import RocalTensorLayout, RocalTensorOutputType


def _colour_op(name: str, formula, ranges: dict, inputs, output_layout, output_dtype, params: dict) -> DataNode:
    """``formula`` as an RPP point operation on uint8 pixels, rounded half to even and saturated; a
    parameter left None is drawn per sample from its range in ``ranges``."""
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, image, **values):
        rng = ctx.rng(op)
        drawn = {key: (rng.uniform(*ranges[key]) if value is None else float(value))
                 for key, value in values.items()}
        return imageops.as_output(formula(image.float(), **drawn), out.torch_dtype)
    return _image_op(name, run, inputs[0], {key: _param(params[key]) for key in ranges}, out)


_KEYWORD = inspect.Parameter.KEYWORD_ONLY
_TAIL = {"device": None, "output_layout": RocalTensorLayout.NHWC, "output_dtype": RocalTensorOutputType.UINT8}


def colour_operator(name: str, formula, args: dict, ranges: dict, doc: str, fixed: bool = False, node: str = ""):
    """Declare colour operator ``fn.<name>``: ``formula`` (float pixels and the parameters named in
    ``ranges``) with rocAL's arguments and defaults ``args`` (then device, output_layout and output_dtype, as
    every one has), each parameter left None drawn per sample from ``ranges``. ``fixed``: the values are
    numbers, never drawn (fn.brightness_fixed). ``node``: the operator whose node it makes, where that is
    another's (fn.brightness_fixed makes fn.brightness's)."""
    def build(*inputs, device=None, output_layout=RocalTensorLayout.NHWC, output_dtype=RocalTensorOutputType.UINT8,
              **given):
        unknown = [key for key in given if key not in args]
        if unknown:
            raise TypeError(f"{name}() got an unexpected keyword argument {unknown[0]!r}")
        values = {**args, **given}
        params = {key: float(values[key]) if fixed else values[key] for key in ranges}
        return _colour_op(node or name, formula, ranges, inputs, output_layout, output_dtype, params)
    build.__name__ = build.__qualname__ = name
    build.__doc__ = doc
    build.__signature__ = inspect.Signature(
        [inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL)] +
        [inspect.Parameter(key, _KEYWORD, default=value) for key, value in {**args, **_TAIL}.items()])
    return operator(name, ranges=ranges, boxes=KEEP)(build)


def _u8(x: torch.Tensor) -> torch.Tensor:
    return x.round().clamp(0, 255).to(torch.uint8)


# RPP's formulas on float pixels and the ranges a parameter left None is drawn from
# (rocAL/include/augmentations/color_augmentations: node_brightness.h (ALPHA_RANGE, BETA_RANGE),
# node_contrast.h, node_color_twist.h, node_hue.h, node_saturation.h, node_gamma.h, node_exposure.h,
# node_color_temperature.h, node_vignette.h (SDEV_RANGE); RPP kernel/brightness.cpp (x * alpha + beta),
# kernel/contrast.cpp), with rocAL's signatures and defaults.
_BRIGHTNESS_RANGES = {"brightness": (0.1, 1.95), "brightness_shift": (0.0, 25.0)}


def _brightness(x, brightness, brightness_shift):
    return x * brightness + brightness_shift


brightness = colour_operator(
    "brightness", _brightness, {"brightness": None, "brightness_shift": None}, _BRIGHTNESS_RANGES,
    """``fn.brightness``: x * brightness + brightness_shift (each None: drawn per sample, [0.1, 1.95] and
    [0, 25] -- so a brightness alone still adds a random shift, as in rocAL).""")
brightness_fixed = colour_operator(
    "brightness_fixed", _brightness, {"brightness": 1.0, "brightness_shift": 0.0}, _BRIGHTNESS_RANGES,
    """``fn.brightness_fixed``: fn.brightness with fixed values (defaults 1.0 and 0.0).""", fixed=True,
    node="brightness")
contrast = colour_operator(
    "contrast", lambda x, contrast, contrast_center: (x - contrast_center) * contrast + contrast_center,
    {"contrast": None, "contrast_center": None}, {"contrast": (0.1, 1.95), "contrast_center": (60.0, 90.0)},
    """``fn.contrast``: (x - contrast_center) * contrast + contrast_center (each None: drawn per sample,
    [0.1, 1.95] and [60, 90]).""")
color_twist = colour_operator(
    "color_twist", lambda x, **p: imageops.color_twist(x.round().to(torch.uint8), **p).float(),
    {"brightness": 1.0, "contrast": 1.0, "hue": 0.0, "saturation": 1.0},
    {"brightness": (0.1, 1.95), "contrast": (0.1, 25.0), "hue": (5.0, 170.0), "saturation": (0.1, 0.4)},
    """``fn.color_twist``: RPP's fused twist (imageops.color_twist): ``brightness`` multiplies, ``contrast``
    is added in pixel units, ``hue`` in degrees, ``saturation`` a factor; one left None is drawn per sample
    from rocAL's range (node_color_twist.h: [0.1, 1.95], [0.1, 25], [5, 170], [0.1, 0.4]).""")
hue = colour_operator(
    "hue", lambda x, hue: imageops.hue_saturation(_u8(x), hue=hue).float(), {"hue": None, "seed": 0},
    {"hue": (-359.0, 359.0)},
    """``fn.hue``: the hue turned by ``hue`` degrees (imageops.hue_saturation); None: drawn per sample in
    [-359, 359]. ``seed`` is not read.""")
saturation = colour_operator(
    "saturation", lambda x, saturation: imageops.hue_saturation(_u8(x), saturation=saturation).float(),
    {"saturation": 1.0}, {"saturation": (-0.5, 0.5)},
    """``fn.saturation``: the HSV saturation times ``saturation``, clamped to [0, 1] (0: grey, 1: as it
    is); None: drawn per sample in [-0.5, 0.5].""")
gamma_correction = colour_operator(
    "gamma_correction", lambda x, gamma: imageops.gamma_lut(gamma)[x.round().clamp(0, 255).long()].float(),
    {"gamma": 0.5}, {"gamma": (0.3, 7.0)},
    """``fn.gamma_correction``: RPP's table 255 * (x / 255) ** gamma, truncated (imageops.gamma_lut); None:
    drawn per sample in [0.3, 7].""")
exposure = colour_operator(
    "exposure", lambda x, exposure: imageops.exposure(x, exposure), {"exposure": 0.5}, {"exposure": (0.15, 0.95)},
    """``fn.exposure``: x * 2 ** exposure, rounded half to even and saturated; None: drawn per sample in
    [0.15, 0.95].""")
color_temp = colour_operator(
    "color_temp", lambda x, adjustment_value: imageops.color_temperature(x, int(round(adjustment_value))),
    {"adjustment_value": 50}, {"adjustment_value": (-99.0, 99.0)},
    """``fn.color_temp``: red + adjustment_value, blue - adjustment_value (an integer); None: drawn per
    sample in [-99, 99].""")
vignette = colour_operator(
    "vignette", lambda x, vignette: imageops.vignette(x, vignette), {"vignette": 0.5}, {"vignette": (40.0, 60.0)},
    """``fn.vignette``: RPP's vignette at intensity ``vignette`` (imageops.vignette; rocAL's default 0.5;
    None: drawn per sample from node_vignette.h's SDEV_RANGE, [40, 60]).""")


@operator(ranges={"ratio": (0.1, 0.9)}, boxes=KEEP)
def blend(*inputs, ratio=None, device=None, output_layout=RocalTensorLayout.NHWC,
          output_dtype=RocalTensorOutputType.UINT8):
    """``fn.blend(a, b, ratio=)``: a * ratio + b * (1 - ratio) over a's region (imageops.blend), in a's
    buffer; None: drawn per sample in [0.1, 0.9] (node_blend.h)."""
    if len(inputs) != 2 or not all(meta(i).image is not None for i in inputs):
        raise TypeError(f"{PREFIX}: fn.blend takes two image outputs of decoders or image operators")
    if any(meta(i).frames is not None for i in inputs):
        raise NotImplementedError(f"{PREFIX}: fn.blend of fn.readers.video's sequences is not supported")
    layout, dtype = _kind(output_layout, output_dtype)
    out = Rocal(_source(inputs).buffer, layout, dtype)

    def run(ctx, op, first, second, ratio):
        if ratio is None:
            ratio = ctx.rng(op).uniform(*blend.spec.ranges["ratio"])
        return imageops.as_output(imageops.blend(first, second, float(ratio)), out.torch_dtype)
    return _image_op("blend", run, inputs[0], {"ratio": _param(ratio)}, out, others=inputs[1:])


@operator(boxes=KEEP)
def nop(*inputs, device=None):
    """``fn.nop``: the input, as it is (rocAL's signature: no layout or type arguments)."""
    return _image_op("nop", lambda ctx, op, image: image, inputs[0], {}, _source(inputs))


@operator(boxes=KEEP)
def copy(*inputs, device=None):
    """``fn.copy``: a copy of the input."""
    return _image_op("copy", lambda ctx, op, image: image.clone(), inputs[0], {}, _source(inputs))
