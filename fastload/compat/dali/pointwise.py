"""DALI's point-wise image operators: ``fn.brightness``, ``fn.contrast``, ``fn.hue``, ``fn.saturation``,
``fn.lookup_table``, ``fn.equalize``, ``fn.normalize`` and ``fn.clahe``.

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_pointwise.py); the rules below are
the ones measured there:

- ``brightness`` / ``contrast``: DALI's BrightnessContrast kernel with the other pair at its identity
  (``colour.brightness_contrast``): ``out = brightness_shift * range + brightness * in`` (``range`` the output
  type's maximum, 1 for floats; no rescaling between input and output types: uint8 200 to float is 200.0) and
  ``out = center + contrast * (in - center)`` (``contrast_center`` unset: half the input type's positive range,
  0.5 for floats). float32; integer outputs round half away from zero and saturate. Exact. ``image_type``
  is refused (KeyError), as DALI, whose schemas for these two have no such argument.
- ``hue`` / ``saturation``: DALI's ColorTwist matrices (``colour.color_twist``: YIQ rotation / chroma scale,
  DALI's own float32 products), the output in the input's type unless ``dtype``; ``image_type`` changes nothing
  (measured: BGR, GRAY and YCbCr give RGB's pixels). Three channels only. Exact.
- ``lookup_table``: a table of ``max(keys) + 1`` entries (the last of repeated keys wins), ``default_value``
  elsewhere and for inputs outside it (negative ones too); the values are float32, converted to ``dtype``
  (float32 by default) as DALI's ConvertSat does (round half away from zero, saturate; bool is ``round != 0``).
  Integer inputs only. Exact.
- ``equalize``: DALI's CPU operator is OpenCV's ``equalizeHist`` per channel (uint8): the first non-empty bin
  maps to 0, bin ``i`` to ``saturate(round_even(cumsum_after_first(i) * (255 / (total - first_count))))`` in
  float32; a one-valued channel stays as it is. Exact. CHW inputs are refused: DALI's CPU operator reads any
  three-dimensional sample as HWC (equalizing each column of a CHW image over its channels and rows). So is
  the GPU: DALI's GPU operator is its own kernel, with its own LUT rounding.
- ``normalize``: ``out = (in - mean) * inv + shift`` in float32, converted to ``dtype`` (float32 by default).
  Where not given, mean and variance are taken per sample over ``axes`` / ``axis_names`` (all axes by default;
  with a tensor mean or stddev, the axes it has an extent of 1 in); the mean is the sum (float32 for float
  inputs) times the float32 ``1 / N``, not a division (a rounding that shows where the values vary little
  about a large mean, e.g. over three channels); the variance is about the mean used
  (a given one too), divided by ``N - ddof``; ``inv = scale * rsqrt(variance + epsilon)``, 0 for a zero
  variance without ``epsilon``, and ``scale`` 0 where ``N <= ddof`` without ``epsilon``. A given stddev gives
  ``inv = scale / stddev`` (a tensor's zeros give 0), or ``scale * rsqrt(stddev**2 + epsilon)``. DALI takes
  the reciprocal square root of a computed variance with SSE's approximation and a Newton step and sums in its
  own order, so float outputs agree to a relative 1e-6 (measured: 5e-7) and integer outputs to 1; with scalar
  ``mean`` and ``stddev`` given, exactly. ``batch=True`` (statistics over the whole batch) is refused.
- ``clahe``: DALI's CPU operator is OpenCV's CLAHE (``bins`` unused there): where the tiles do not divide the
  image, it is padded (reflect-101) by ``tiles - size % tiles`` on both axes (a whole tile on the one that
  divides); each tile's histogram is clipped at ``max(int(clip_limit * area / 256), 1)`` (no clipping for
  ``clip_limit <= 0``), the excess spread evenly and its remainder one each from bin 0 every ``256 // rest``
  bins; LUT ``round_even(cumsum * (255 / area))``; each pixel blends its four nearest tiles' LUTs bilinearly
  (float32, centres at ``(i + 0.5) * tile``). Exact, for 1-channel images and 3-channel ones with
  ``luma_only=False``; ``luma_only=True`` of RGB (DALI's default) is refused, as is the GPU: see ``clahe``.
"""

from __future__ import annotations

import numpy as np
import torch

from ..engine.conversions import convert_sat
from ..engine.graph import DataNode, Op
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


def _point(name: str, ops: str, defaults: dict, impl, types: tuple, doc: str, image_type: bool = False):
    """A colour operator of per-sample float arguments ``defaults`` (DataNodes allowed; None: unset),
    ``impl(image, dtype=..., **arguments)`` on one sample, of HWC, FHWC or DHWC images (DALI's layouts);
    ``image_type``: whether DALI's schema has that argument (accepted, changing nothing) or not (refused)."""
    operator_name = f"fn.{name}"

    def build(images, *, device=None, dtype=None, **args):
        if "image_type" in args:
            if not image_type:  # as DALI, whose schema for the operator has no image_type
                raise KeyError(f"fastload.compat.dali: argument 'image_type' is not defined for operator "
                               f"{operator_name} (DALI's schema for it has no such argument)")
            del args["image_type"]
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
            return impl(image.cpu(), dtype=out_dtype, **values)  # a "gpu" operator's output goes back to the GPU
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
             "``fn.hue``: the hue turned by ``hue`` degrees, as DALI's ColorTwist (per-sample allowed).",
             image_type=True)
saturation = _point("saturation", "Saturation", {"saturation": 1.0}, _twist("fn.saturation"), _TWIST_TYPES,
                    "``fn.saturation``: the chroma scaled by ``saturation``, as DALI's ColorTwist (per-sample "
                    "allowed).", image_type=True)


# -------------------------------------------------------------------------------------------- lookup_table

_INTEGER_TYPES = (torch.uint8, torch.int8, torch.uint16, torch.int16, torch.uint32, torch.int32, torch.uint64,
                  torch.int64)


def lookup_table_of(keys, values, default_value: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """DALI's table: ``max(keys) + 1`` float32 entries, ``default_value`` where no key names one, the last of
    repeated keys winning; it and the default converted to ``dtype`` as DALI's ConvertSat does."""
    size = max(keys) + 1 if keys else 0
    table = np.full(size, default_value, dtype=_F32)
    for key, value in zip(keys, values):  # in order: the last occurrence of a key is the one kept
        table[key] = value
    converted = convert_sat(torch.from_numpy(table), dtype)
    default = convert_sat(torch.tensor([default_value], dtype=torch.float32), dtype)
    return converted, default


def lookup(data: torch.Tensor, table: torch.Tensor, default: torch.Tensor) -> torch.Tensor:
    """``table[x]`` for each integer ``x`` of ``data`` inside the table, ``default`` elsewhere."""
    values = data.cpu().numpy()
    inside = (values >= 0) & (values < len(table)) if values.dtype.kind == "i" else values < len(table)
    fill = default.numpy()[0]
    if not len(table):
        return torch.from_numpy(np.full(values.shape, fill))
    out = table.numpy()[np.where(inside, values, 0).astype(np.int64)]  # numpy: torch lacks uint16 masking
    out[~inside] = fill
    return torch.from_numpy(out)


@operator("lookup_table", "LookupTable")
def lookup_table(data, *, keys=(), values=(), default_value=0.0, dtype=None, output_dtype=None, device=None,
                 **args):
    """``fn.lookup_table``: each integer of the input mapped through ``keys`` -> ``values`` (float32),
    ``default_value`` for any other; float32 output unless ``dtype`` (``output_dtype``, DALI's deprecated name)."""
    check_args("fn.lookup_table", args, set())
    if dtype is not None and output_dtype is not None:
        raise ValueError("fastload.compat.dali: fn.lookup_table: give dtype or its deprecated name output_dtype, "
                         "not both")
    chosen = dtype if dtype is not None else output_dtype
    target = torch_dtype(chosen) if chosen is not None else torch.float32
    keys = [int(k) for k in (keys if isinstance(keys, (list, tuple)) else [keys])]
    values = [float(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    if len(keys) != len(values):
        raise ValueError(f"fastload.compat.dali: fn.lookup_table: keys has {len(keys)} values and values "
                         f"{len(values)}; they must match")
    outside = [k for k in keys if not 0 <= k <= 65535]
    if outside:
        raise ValueError(f"fastload.compat.dali: fn.lookup_table: keys must be in [0, 65535], got {outside}")
    table, default = lookup_table_of(keys, values, float(default_value), target)

    def run(ctx, op, x):
        if x.dtype not in _INTEGER_TYPES:
            raise TypeError(f"fastload.compat.dali: fn.lookup_table takes integer inputs (as DALI), got {x.dtype}")
        return lookup(x, table, default)
    return _one(Op("lookup_table", run, [data], {}, device=_device([data], device), layouts=(data.layout(),),
                   fusable=False))


# ------------------------------------------------------------------------------------------------ equalize

def equalize_channel(channel: np.ndarray) -> np.ndarray:
    """OpenCV's ``equalizeHist`` of one uint8 plane (what DALI's CPU operator calls)."""
    if channel.size == 0:
        return channel.copy()
    hist = np.bincount(channel.ravel(), minlength=256)
    first = int(np.flatnonzero(hist)[0])
    total = channel.size
    if hist[first] == total:
        return np.full_like(channel, first)
    scale = _F32(255.0) / _F32(total - hist[first])
    sums = np.cumsum(hist[first + 1:]).astype(_F32)  # exact below 2**24 pixels
    lut = np.zeros(256, dtype=np.uint8)
    lut[first + 1:] = np.clip(np.rint(sums * scale), 0, 255).astype(np.uint8)  # cvRound: half to even
    return lut[channel]


def equalize_image(image: torch.Tensor) -> torch.Tensor:
    """One HW or HWC uint8 image equalized per channel."""
    pixels = image.cpu().numpy()
    if pixels.ndim == 2:
        return torch.from_numpy(equalize_channel(pixels))
    return torch.from_numpy(np.stack([equalize_channel(np.ascontiguousarray(pixels[..., c]))
                                      for c in range(pixels.shape[-1])], -1).reshape(pixels.shape))


@operator("equalize", "Equalize", aliases={"experimental.equalize": "experimental.Equalize"})
def equalize(images, *, device=None, **args):
    """``fn.equalize``: histogram equalization of each channel of uint8 images (HW, HWC) or sequences of them
    (FHW, FHWC)."""
    check_args("fn.equalize", args, set())
    if _device([images], device) != "cpu":
        raise NotImplementedError("fastload.compat.dali: fn.equalize on the GPU is not supported (DALI's GPU operator "
                                  "is its own kernel, rounding its LUT in double, half away from zero, where its CPU "
                                  "operator's OpenCV, which fastload follows, rounds in float32, half to even): run "
                                  "it before .gpu()")
    layout = images.layout()
    if layout not in ("", "HW", "HWC", "FHW", "FHWC"):
        raise NotImplementedError(f"fastload.compat.dali: fn.equalize of {layout} input is not supported (HW, HWC, "
                                  f"FHW or FHWC): DALI's CPU operator reads a CHW sample as HWC, unlike its GPU one")
    frames = layout.startswith("F")

    def run(ctx, op, image):
        if image.dtype != torch.uint8:
            raise TypeError(f"fastload.compat.dali: fn.equalize takes uint8 images (as DALI), got {image.dtype}")
        if image.dim() - frames not in (2, 3):
            raise ValueError(f"fastload.compat.dali: fn.equalize takes HW or HWC images, got shape "
                             f"{tuple(image.shape)} ({layout or 'no layout'})")
        if frames:
            return torch.stack([equalize_image(f) for f in image]) if len(image) else image.cpu().clone()
        return equalize_image(image)
    return _one(Op("equalize", run, [images], {}, device="cpu", layouts=(layout,), fusable=False))


# ----------------------------------------------------------------------------------------------- normalize

def _rsqrt(x: np.ndarray) -> np.ndarray:
    return (_F32(1) / np.sqrt(x.astype(_F32))).astype(_F32)


def _reduced_axes(ndim: int, axes, params: list[np.ndarray]) -> tuple[int, ...]:
    """The axes the statistics are taken over: ``axes`` where given, else those a tensor mean or stddev has
    an extent of 1 in (DALI infers them so), else all."""
    if axes is not None:
        outside = [a for a in axes if not 0 <= a < ndim]
        if outside:  # DALI takes no negative axes either
            raise ValueError(f"fastload.compat.dali: fn.normalize: axes {outside} are outside 0..{ndim - 1}")
        return tuple(sorted(set(axes)))
    tensors = [p for p in params if p is not None and p.ndim]
    if tensors:
        return tuple(d for d in range(ndim) if tensors[0].shape[d] == 1)
    return tuple(range(ndim))


def _param(name: str, value, shape: tuple) -> np.ndarray:
    """A mean or stddev: a number, or a per-sample tensor checked against the input's shape (as many dimensions,
    each extent 1 or the input's; DALI refuses a tensor of none)."""
    if isinstance(value, (int, float)):
        return np.asarray(value, dtype=_F32)
    array = np.asarray(value, dtype=_F32)
    if array.ndim != len(shape) or any(p not in (1, s) for p, s in zip(array.shape, shape)):
        raise ValueError(f"fastload.compat.dali: fn.normalize: {name} of shape {array.shape} does not broadcast "
                         f"to the input's {shape} (each extent 1 or the input's)")
    return array


def normalize_sample(data: torch.Tensor, *, mean=None, stddev=None, axes=None, scale: float = 1.0,
                     shift: float = 0.0, epsilon: float = 0.0, ddof: int = 0,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """fn.normalize of one sample (the rules in the module docstring); ``mean``/``stddev``: None (computed),
    a number or an array broadcasting to the input."""
    x = data.cpu().numpy()
    shape = x.shape
    mean = None if mean is None else _param("mean", mean, shape)
    stddev = None if stddev is None else _param("stddev", stddev, shape)
    reduced = _reduced_axes(x.ndim, axes, [mean, stddev])
    wide = x.astype(np.float64)
    if mean is None:
        if x.size:  # DALI: the sum (float32 of float inputs) times float32 1 / N, not a division
            n_mean = int(np.prod([shape[a] for a in reduced], dtype=np.int64))
            total = x.sum(axis=reduced, keepdims=True, dtype=_F32) if x.dtype.kind == "f" else \
                wide.sum(axis=reduced, keepdims=True).astype(_F32)
            mean = (total * _F32(1.0 / n_mean)).astype(_F32)
        else:
            mean = np.zeros((), _F32)
    scale, epsilon = _F32(scale), _F32(epsilon)
    if stddev is not None:
        if epsilon:
            inv = scale * _rsqrt(stddev * stddev + epsilon)
        elif stddev.ndim:
            inv = np.where(stddev != 0, scale / np.where(stddev != 0, stddev, 1), _F32(0)).astype(_F32)
        else:
            inv = np.divide(scale, stddev, dtype=_F32)
    else:
        count = int(np.prod([shape[a] for a in reduced], dtype=np.int64))
        squares = ((wide - mean.astype(np.float64)) ** 2).sum(axis=reduced, keepdims=True).astype(_F32)
        if count > ddof:
            rdiv = _F32(1.0 / (count - ddof))
        elif not epsilon:
            rdiv, scale = _F32(1), _F32(0)
        else:
            rdiv = _F32(0)
        variance = (squares * rdiv).astype(_F32)
        if epsilon:
            inv = _rsqrt(variance + epsilon) * scale
        else:
            inv = np.where(variance != 0, _rsqrt(np.where(variance != 0, variance, 1)) * scale, _F32(0))
    out = (x.astype(_F32) - mean) * inv.astype(_F32) + _F32(shift)
    return convert_sat(torch.from_numpy(np.ascontiguousarray(out, dtype=_F32)), dtype)


@operator("normalize", "Normalize")
def normalize(data, *, mean=None, stddev=None, axes=None, axis_names=None, batch=False, scale=1.0, shift=0.0,
              epsilon=0.0, ddof=0, dtype=None, device=None, **args):
    """``fn.normalize``: ``(in - mean) / stddev * scale + shift``, mean and stddev given (numbers or per-sample
    tensors) or computed per sample over ``axes`` / ``axis_names`` (all by default); float32 unless ``dtype``."""
    check_args("fn.normalize", args, set())
    if batch:
        raise NotImplementedError("fastload.compat.dali: fn.normalize(batch=True) is not supported: its mean and "
                                  "stddev are taken over the whole batch, and fastload runs a graph per sample")
    if axes is not None and axis_names is not None:
        raise ValueError("fastload.compat.dali: fn.normalize: give axes or axis_names, not both")
    layout = data.layout()
    if axis_names is not None:
        missing = [name for name in str(axis_names) if name not in layout]
        if missing:
            raise ValueError(f"fastload.compat.dali: fn.normalize: axis_names {axis_names!r} names axes not in the "
                             f"input's layout {layout!r}")
        axes = [layout.index(name) for name in str(axis_names)]
    elif axes is not None:
        axes = [int(a) for a in (axes if isinstance(axes, (list, tuple)) else [axes])]
    tensors = {}
    for name, value in (("mean", mean), ("stddev", stddev)):
        if isinstance(value, DataNode):
            tensors[name] = value
        elif value is not None and not isinstance(value, (int, float)):
            raise TypeError(f"fastload.compat.dali: fn.normalize: {name} is a number or a DataNode (per-sample "
                            f"tensors), got {type(value).__name__}")
    settings = {"axes": axes, "scale": float(scale), "shift": float(shift), "epsilon": float(epsilon),
                "ddof": int(ddof), "dtype": torch_dtype(dtype) if dtype is not None else torch.float32,
                "mean": None if mean is None or "mean" in tensors else float(mean),
                "stddev": None if stddev is None or "stddev" in tensors else float(stddev)}
    names = list(tensors)

    def run(ctx, op, x, *params):
        given = {name: value.cpu().numpy() for name, value in zip(names, params)}
        return normalize_sample(x, **{**settings, **given})
    return _one(Op("normalize", run, [data, *tensors.values()], {}, device=_device([data], device),
                   layouts=(layout,), fusable=False))


# --------------------------------------------------------------------------------------------------- clahe

def clahe_plane(plane: np.ndarray, tiles_x: int, tiles_y: int, clip_limit: float) -> np.ndarray:
    """OpenCV's CLAHE of one uint8 plane (``createCLAHE(clip_limit, (tiles_x, tiles_y)).apply``, which DALI's
    CPU operator calls): the rules in the module docstring."""
    height, width = plane.shape
    source = plane
    if width % tiles_x or height % tiles_y:  # both pads when either does not divide (OpenCV: a whole tile)
        source = np.pad(plane, ((0, tiles_y - height % tiles_y), (0, tiles_x - width % tiles_x)), mode="reflect")
    tile_h, tile_w = source.shape[0] // tiles_y, source.shape[1] // tiles_x
    area = tile_h * tile_w
    count = tiles_x * tiles_y
    tiles = source[:tiles_y * tile_h, :tiles_x * tile_w].reshape(tiles_y, tile_h, tiles_x, tile_w)
    tiles = tiles.transpose(0, 2, 1, 3).reshape(count, area).astype(np.int64)
    hist = np.bincount((tiles + np.arange(count)[:, None] * 256).ravel(), minlength=count * 256).reshape(count, 256)
    if clip_limit > 0:
        limit = max(int(float(_F32(clip_limit)) * area / 256), 1)
        clipped = np.maximum(hist - limit, 0).sum(axis=1)
        hist = np.minimum(hist, limit) + (clipped // 256)[:, None]
        for k, residual in enumerate(clipped % 256):
            if residual:
                hist[k, np.arange(0, 256, max(256 // residual, 1))[:residual]] += 1
    lut = np.clip(np.rint(np.cumsum(hist, axis=1).astype(_F32) * (_F32(255) / _F32(area))), 0, 255)
    lut = lut.astype(_F32).reshape(tiles_y, tiles_x, 256)

    def weights(n: int, tile: int, tiles_n: int):
        f = np.arange(n, dtype=_F32) * (_F32(1) / _F32(tile)) - _F32(0.5)
        first = np.floor(f).astype(np.int64)
        a = (f - first.astype(_F32)).astype(_F32)
        return np.maximum(first, 0), np.minimum(first + 1, tiles_n - 1), a, (_F32(1) - a).astype(_F32)

    x1, x2, xa, xa1 = weights(width, tile_w, tiles_x)
    y1, y2, ya, ya1 = weights(height, tile_h, tiles_y)
    v = plane.astype(np.int64)
    rows1, rows2 = y1[:, None], y2[:, None]
    top = lut[rows1, x1[None, :], v] * xa1 + lut[rows1, x2[None, :], v] * xa
    bottom = lut[rows2, x1[None, :], v] * xa1 + lut[rows2, x2[None, :], v] * xa
    result = top * ya1[:, None] + bottom * ya[:, None]
    return np.clip(np.rint(result.astype(_F32)), 0, 255).astype(np.uint8)


@operator("clahe", "Clahe")
def clahe(images, *, tiles_x, tiles_y, clip_limit, luma_only=True, bins=256, device=None, **args):
    """``fn.clahe``: contrast-limited adaptive histogram equalization of uint8 HWC images of 1 channel, or of
    3 with ``luma_only=False`` (each channel), as DALI's CPU operator (OpenCV's CLAHE)."""
    check_args("fn.clahe", args, set())
    _layout("fn.clahe", images)
    if _device([images], device) != "cpu":
        raise NotImplementedError("fastload.compat.dali: fn.clahe on the GPU is not supported (DALI's GPU operator "
                                  "is its own kernel, always on the luminance; fastload gives its CPU operator's "
                                  "OpenCV results): run it before .gpu()")
    tiles_x, tiles_y = int(tiles_x), int(tiles_y)
    if tiles_x < 1 or tiles_y < 1:
        raise ValueError(f"fastload.compat.dali: fn.clahe: tiles_x and tiles_y must be positive, got {tiles_x}, "
                         f"{tiles_y}")
    luma_only, clip_limit = bool(luma_only), float(clip_limit)

    def run(ctx, op, image):
        if image.dtype != torch.uint8 or image.dim() != 3 or image.shape[-1] not in (1, 3):
            raise TypeError(f"fastload.compat.dali: fn.clahe takes uint8 HWC images of 1 or 3 channels (as DALI), "
                            f"got {image.dtype} of shape {tuple(image.shape)}")
        if image.shape[-1] == 3 and luma_only:
            raise NotImplementedError("fastload.compat.dali: fn.clahe of 3-channel images with luma_only=True (the "
                                      "default) is not supported: DALI's CPU operator goes through OpenCV's 8-bit "
                                      "RGB <-> Lab conversions, whose fixed-point tables fastload does not "
                                      "reproduce; use luma_only=False (each channel) or a 1-channel image")
        pixels = image.numpy()
        return torch.from_numpy(np.stack([clahe_plane(np.ascontiguousarray(pixels[..., c]), tiles_x, tiles_y,
                                                      clip_limit) for c in range(pixels.shape[-1])], -1))
    return _one(Op("clahe", run, [images], {}, device="cpu", layouts=("HWC",), fusable=False))  # DALI's, always
