"""DALI's point-wise image operators: ``fn.brightness``, ``fn.contrast``, ``fn.hue`` and ``fn.saturation``.

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_pointwise.py); the rules below are
the ones measured there:

- ``brightness`` / ``contrast``: DALI's BrightnessContrast kernel with the other pair at its identity
  (``colour.brightness_contrast``): ``out = brightness_shift * range + brightness * in`` (``range`` the output
  type's maximum, 1 for floats; no rescaling between input and output types: uint8 200 to float is 200.0) and
  ``out = center + contrast * (in - center)`` (``contrast_center`` unset: half the input type's positive range,
  0.5 for floats). float32; integer outputs round half away from zero and saturate. Exact.
- ``hue`` / ``saturation``: DALI's ColorTwist matrices (``colour.color_twist``: YIQ rotation / chroma scale,
  DALI's own float32 products), the output in the input's type unless ``dtype``; ``image_type`` changes nothing
  (measured: BGR, GRAY and YCbCr give RGB's pixels). Three channels only. Exact.
"""

from __future__ import annotations

import numpy as np
import torch

from ..engine.graph import Op
from .colour import brightness_contrast, color_twist
from .operators import _device, _layout, _one, check_args
from .spec import operator
from .types import torch_dtype

_F32 = np.float32

# the input (and dtype) types DALI's colour operators take, measured: float16 only for the ColorTwist ones
_LINEAR_TYPES = (torch.uint8, torch.int16, torch.int32, torch.float32)
_TWIST_TYPES = (*_LINEAR_TYPES, torch.float16)


def _number(operator: str, name: str, value) -> float:
    """A per-sample argument's one value; a per-frame one (several values) is refused."""
    if isinstance(value, tuple):
        if len(value) != 1:
            raise NotImplementedError(f"fastload.compat.dali: {operator}: {name} with {len(value)} values per "
                                      f"sample (per-frame arguments) is not supported; give one per sample")
        value = value[0]
    return float(value)


def _type_names(types) -> str:
    return ", ".join(str(t).replace("torch.", "") for t in types)


def _point(name: str, ops: str, defaults: dict, impl, types: tuple, doc: str):
    """A colour operator of per-sample float arguments ``defaults`` (DataNodes allowed; None: unset),
    ``impl(image, dtype=..., **arguments)`` on one sample, of HWC, FHWC or DHWC images (DALI's layouts)."""
    operator_name = f"fn.{name}"

    def build(images, *, device=None, dtype=None, image_type=None, **args):
        check_args(operator_name, args, set(defaults))
        layout = _layout(operator_name, images, ("HWC", "FHWC", "DHWC"))
        settings = {**defaults, **args}
        out_dtype = torch_dtype(dtype) if dtype is not None else None
        if out_dtype is not None and out_dtype not in types:
            raise TypeError(f"fastload.compat.dali: {operator_name}: dtype {out_dtype} is not one DALI gives "
                            f"({_type_names(types)})")

        def run(ctx, op, image, **values):
            if image.dtype not in types:
                raise TypeError(f"fastload.compat.dali: {operator_name} does not take {image.dtype} input "
                                f"({_type_names(types)}, as DALI)")
            values = {k: None if v is None else _number(operator_name, k, v) for k, v in values.items()}
            return impl(image, dtype=out_dtype, **values)
        return _one(Op(name, run, [images], settings, device=_device([images], device),
                       layouts=(images.layout() or layout,), fusable=False))
    build.__name__ = name
    build.__doc__ = doc
    return operator(name, ops)(build)


def _brightness(image, *, dtype, brightness, brightness_shift):
    return brightness_contrast(image, brightness=brightness, brightness_shift=brightness_shift, dtype=dtype)


def _contrast(image, *, dtype, contrast, contrast_center=None):
    return brightness_contrast(image, contrast=contrast, contrast_center=contrast_center, dtype=dtype)


def _twist(operator: str):
    def run(image, *, dtype, **values):
        if image.shape[-1] != 3 or image.dim() < 3:
            raise NotImplementedError(f"fastload.compat.dali: {operator} takes images of 3 channels, got shape "
                                      f"{tuple(image.shape)}")
        flat = image.reshape(-1, image.shape[-2], 3)  # a sequence's (or volume's) frames are one tall image
        return color_twist(flat, dtype=dtype, **values).reshape(image.shape)
    return run


brightness = _point("brightness", "Brightness", {"brightness": 1.0, "brightness_shift": 0.0}, _brightness,
                    _LINEAR_TYPES,
                    "``fn.brightness``: ``brightness_shift * range + brightness * in`` (per-sample arguments allowed).")
contrast = _point("contrast", "Contrast", {"contrast": 1.0, "contrast_center": None}, _contrast, _LINEAR_TYPES,
                  "``fn.contrast``: ``center + contrast * (in - center)``, ``contrast_center`` half the input "
                  "type's range unless given (per-sample arguments allowed).")
hue = _point("hue", "Hue", {"hue": 0.0}, _twist("fn.hue"), _TWIST_TYPES,
             "``fn.hue``: the hue turned by ``hue`` degrees, as DALI's ColorTwist (per-sample allowed).")
saturation = _point("saturation", "Saturation", {"saturation": 1.0}, _twist("fn.saturation"), _TWIST_TYPES,
                    "``fn.saturation``: the chroma scaled by ``saturation``, as DALI's ColorTwist (per-sample "
                    "allowed).")
