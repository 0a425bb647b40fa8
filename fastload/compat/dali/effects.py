"""DALI's image effects: ``fn.erase``, ``fn.water``, ``fn.sphere`` and ``fn.jpeg_compression_distortion``.

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_effects.py), and the rules
below are the ones measured there, not guessed:

- ``erase``: a region's start along an axis is ``floor(anchor)`` and its end ``floor(anchor + shape)``
  (float32; ``normalized_*`` first scale by the extent, ``centered_anchor`` subtracts ``shape / 2``), cut
  to the image. The fill value is converted as C++'s ``static_cast`` does (truncated, wrapped into the
  type: -3 -> 253 for uint8), not saturated -- DALI's kernel assigns the float to the element type.
- ``water`` / ``sphere``: DALI's displacement filter. The source point of output pixel (y, x) is, for
  water, ``(x + ampl_x sinf(freq_x y + phase_x), y + ampl_y cosf(freq_y x + phase_y))`` with integer x, y;
  for sphere, the pixel centre pushed out radially (``mid + r / d * t``, ``t`` from the centre at
  W/2, H/2, ``d`` the larger half-extent truncated). Nearest reads the pixel the point falls in; linear
  interpolates at pixel centres; points outside read ``fill_value`` (truncated into the type, as the
  filter stores it). ``sinf``/``cosf`` are the C library's, as DALI calls them.
- ``jpeg_compression_distortion``: DALI's CPU operator encodes with OpenCV (libjpeg-turbo, 4:2:0,
  baseline quantisation tables scaled by ``quality`` clamped to 1..100) and decodes; Pillow's
  libjpeg-turbo does the same encode and decode, which gave identical pixels for every quality tried.
  On the GPU it is refused: DALI's GPU operator is its own CUDA codec, whose pixels are not these.

Where the extension is built, water and sphere (and the sampler under them) run in native code on uint8 and
float32 images (``_native_effects.c``), the torch version their fallback and their tests' reference
(tests/compat/test_dali_native_effects.py).
"""

from __future__ import annotations

import io
import math

import numpy as np
import torch

from ..float32 import libm_float
from ..engine.graph import Op
from ..engine.conversions import convert_sat, static_cast
from .operators import _device, _layout, _one, check_args
from .spec import operator
from .types import interp_name

try:  # the samplers in native code where the extension was built (fastload.compat.dali._native_effects)
    from . import _native_effects as _native
except ImportError:  # pragma: no cover - the torch versions below are the fallback (and the tests' reference)
    _native = None

_F32 = np.float32
_NATIVE_TYPES = {torch.uint8: "B", torch.float32: "f"}


def _floats(value) -> list[float]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [float(v) for v in value]
    if isinstance(value, torch.Tensor):
        return [float(v) for v in value.flatten().tolist()]
    return [float(value)]


# ----------------------------------------------------------------------------------------------- erase

def _erase_axes(layout: str, ndim: int, axis_names, axes) -> list[int]:
    if axis_names is not None:
        if not layout:
            raise ValueError("fastload.compat.dali: fn.erase with axis_names needs an input with a layout")
        missing = [name for name in axis_names if name not in layout]
        if missing:
            raise ValueError(f"fastload.compat.dali: fn.erase: axis_names {axis_names!r} names axes not in the "
                             f"layout {layout!r}")
        return [layout.index(name) for name in axis_names]
    if axes is not None:
        return [int(a) + ndim if int(a) < 0 else int(a) for a in axes]
    return [d for d in range(ndim) if not layout or layout[d] != "C"]


def erase_image(image: torch.Tensor, *, anchor=(), shape=(), axes_order=(), fill_value=(0.0,),
                normalized_anchor=False, normalized_shape=False, centered_anchor=False,
                channel_axis: int | None = None) -> torch.Tensor:
    """One sample erased (the rules in the module docstring). ``axes_order``: the dimension each
    coordinate of ``anchor``/``shape`` refers to, repeated per region."""
    anchor, shape = _floats(anchor), _floats(shape)
    if not anchor:
        anchor = [0.0] * len(shape)
    if len(anchor) != len(shape):
        raise ValueError(f"fastload.compat.dali: fn.erase: anchor has {len(anchor)} values and shape {len(shape)}")
    naxes = len(axes_order)
    if naxes == 0 or len(shape) % naxes:
        raise ValueError(f"fastload.compat.dali: fn.erase: {len(shape)} shape values do not divide among "
                         f"{naxes} axes")
    out = image.clone()
    fill = _floats(fill_value) or [0.0]
    if len(fill) > 1:
        if channel_axis is None or image.shape[channel_axis] != len(fill):
            raise ValueError(f"fastload.compat.dali: fn.erase: {len(fill)} fill values need an input with "
                             f"that many channels (a 'C' in its layout)")
        fill_tensor = torch.tensor([static_cast(v, image.dtype) for v in fill], dtype=image.dtype)
        view = [1] * image.dim()
        view[channel_axis] = len(fill)
        fill_tensor = fill_tensor.reshape(view).to(image.device)
    else:
        fill_tensor = torch.tensor(static_cast(fill[0], image.dtype), dtype=image.dtype)
    for region in range(len(shape) // naxes):
        window = [slice(None)] * image.dim()
        empty = False
        for j, axis in enumerate(axes_order):
            extent = _F32(image.shape[axis])
            a, s = _F32(anchor[region * naxes + j]), _F32(shape[region * naxes + j])
            if normalized_anchor:
                a = _F32(a * extent)
            if normalized_shape:
                s = _F32(s * extent)
            if centered_anchor:
                a = _F32(a - s * _F32(0.5))
            start = max(int(math.floor(a)), 0)
            end = min(int(math.floor(_F32(a + s))), image.shape[axis])
            if end <= start:
                empty = True
                break
            window[axis] = slice(start, end)
        if empty:
            continue
        window = tuple(window)
        out[window] = fill_tensor.expand_as(out[window]) if fill_tensor.dim() else fill_tensor
    return out


@operator("erase", "Erase")
def erase(data, *, anchor=None, shape=None, axis_names=None, axes=None, fill_value=0.0, normalized=None,
          normalized_anchor=None, normalized_shape=None, centered_anchor=False, device=None, **args):
    """``fn.erase``: regions given by ``anchor`` and ``shape`` (per sample allowed) along ``axis_names``
    (DALI's default "HW") or ``axes``, filled with ``fill_value`` (one value, or one per channel)."""
    check_args("fn.erase", args, set())
    if normalized is not None and (normalized_anchor is not None or normalized_shape is not None):
        raise ValueError("fastload.compat.dali: fn.erase: normalized excludes normalized_anchor and "
                         "normalized_shape")
    if shape is None:
        raise ValueError("fastload.compat.dali: fn.erase needs shape")
    layout = data.layout()
    if axis_names is None and axes is None:
        axis_names = "HW"  # DALI's default, which takes priority over axes'
    settings = {"anchor": anchor if anchor is not None else (), "shape": shape, "fill_value": fill_value,
                "normalized_anchor": bool(normalized if normalized is not None else normalized_anchor),
                "normalized_shape": bool(normalized if normalized is not None else normalized_shape),
                "centered_anchor": bool(centered_anchor)}
    for key in ("anchor", "shape", "fill_value"):
        if isinstance(settings[key], (list, tuple)):
            settings[key] = tuple(float(v) for v in settings[key])

    def run(ctx, op, image, **a):
        order = _erase_axes(layout, image.dim(), axis_names, axes)
        channel_axis = layout.index("C") if "C" in layout else None
        return erase_image(image, axes_order=order, channel_axis=channel_axis, **a)
    return _one(Op("erase", run, [data], settings, device=_device([data], device), layouts=(layout,),
                   fusable=False))


# ------------------------------------------------------------------------------------- water and sphere

def _fill_of(fill_value: float, dtype: torch.dtype) -> float:
    return float(static_cast(fill_value, dtype))


def sample_at(image: torch.Tensor, src_x: np.ndarray, src_y: np.ndarray, fill: float, interp: str) -> torch.Tensor:
    """DALI's 2-D sampler at float32 source points (pixel i covers [i, i + 1)): "nn" reads the pixel
    the point is in, "linear" interpolates between pixel centres; taps outside the image read ``fill``.
    The result is converted to the image's type as DALI does (rounded, saturated)."""
    height, width = image.shape[:2]
    if _native is not None and image.dtype in _NATIVE_TYPES and image.dim() == 3 and not image.is_cuda:
        return _native_sample(image, src_x, src_y, fill, interp)
    pixels = image.float()
    sx, sy = torch.from_numpy(np.asarray(src_x, dtype=_F32)), torch.from_numpy(np.asarray(src_y, dtype=_F32))
    outside = torch.tensor(fill, dtype=torch.float32)

    def tap(iy: torch.Tensor, ix: torch.Tensor) -> torch.Tensor:
        inside = (iy >= 0) & (iy < height) & (ix >= 0) & (ix < width)
        values = pixels[iy.clamp(0, height - 1), ix.clamp(0, width - 1)]
        return torch.where(inside.unsqueeze(-1), values, outside)

    if interp == "nn":
        return convert_sat(tap(torch.floor(sy).long(), torch.floor(sx).long()), image.dtype)
    fx, fy = sx - 0.5, sy - 0.5
    x0, y0 = torch.floor(fx), torch.floor(fy)
    qx, qy = (fx - x0).unsqueeze(-1), (fy - y0).unsqueeze(-1)
    x0, y0 = x0.long(), y0.long()
    top = tap(y0, x0) * (1 - qx) + tap(y0, x0 + 1) * qx
    bottom = tap(y0 + 1, x0) * (1 - qx) + tap(y0 + 1, x0 + 1) * qx
    return convert_sat(top + (bottom - top) * qy, image.dtype)


def _native_sample(image: torch.Tensor, src_x: np.ndarray, src_y: np.ndarray, fill: float, interp: str):
    """``sample_at`` in native code (``_native_effects.c`` sample): the same taps and float32 blend per
    output pixel in one pass, the GIL released, instead of four gathers and a dozen full-image temporaries."""
    xs = np.ascontiguousarray(src_x, dtype=_F32)
    ys = np.ascontiguousarray(np.broadcast_to(np.asarray(src_y, dtype=_F32), xs.shape))
    src = image.contiguous()
    out = torch.empty((*xs.shape, src.shape[2]), dtype=src.dtype)
    _native.sample(src.numpy(), out.numpy(), src.shape[0], src.shape[1], src.shape[2], _NATIVE_TYPES[src.dtype],
                   xs, ys, float(_F32(fill)), interp != "nn")
    return out


_WATER_DEFAULTS = {"ampl_x": 10.0, "ampl_y": 10.0, "freq_x": 2 * math.pi / 128, "freq_y": 2 * math.pi / 128,
                   "phase_x": 0.0, "phase_y": 0.0}  # DALI's schema defaults (it prints the frequency as 0.049087)


def water_waves(height: int, width: int, ampl_x, ampl_y, freq_x, freq_y, phase_x, phase_y):
    """fn.water's two waves (float32): the x shift of each row and the y shift of each column."""
    rows, cols = np.arange(height, dtype=_F32), np.arange(width, dtype=_F32)
    wave_x = _F32(ampl_x) * libm_float("sin", _F32(freq_x) * rows + _F32(phase_x))
    wave_y = _F32(ampl_y) * libm_float("cos", _F32(freq_y) * cols + _F32(phase_y))
    return wave_x.astype(_F32), wave_y.astype(_F32)


def water_points(height: int, width: int, ampl_x, ampl_y, freq_x, freq_y, phase_x, phase_y):
    """The source point of each output pixel in fn.water (float32, integer pixel coordinates); the x wave
    depends on the row only and the y wave on the column only, so libm is called once per row and column."""
    rows, cols = np.arange(height, dtype=_F32), np.arange(width, dtype=_F32)
    wave_x, wave_y = water_waves(height, width, ampl_x, ampl_y, freq_x, freq_y, phase_x, phase_y)
    src_x = cols[None, :] + wave_x[:, None]
    src_y = rows[:, None] + wave_y[None, :]
    return src_x.astype(_F32), src_y.astype(_F32)


def sphere_points(height: int, width: int):
    """The source point of each output pixel in fn.sphere (float32): pixel centres pushed out from the
    image centre by their distance over the larger half-extent (truncated to an integer, as DALI does)."""
    mid_x, mid_y = _F32(width * 0.5), _F32(height * 0.5)
    d = _F32(int(max(mid_x, mid_y)))
    ys, xs = np.meshgrid(np.arange(height, dtype=_F32), np.arange(width, dtype=_F32), indexing="ij")
    tx, ty = xs + _F32(0.5) - mid_x, ys + _F32(0.5) - mid_y
    rad = np.sqrt(tx * tx + ty * ty).astype(_F32) / d
    return (mid_x + rad * tx).astype(_F32), (mid_y + rad * ty).astype(_F32)


def _native_ready(image: torch.Tensor) -> bool:
    return _native is not None and image.dtype in _NATIVE_TYPES and image.dim() == 3 and not image.is_cuda


def water_image(image: torch.Tensor, fill: float, interp: str, **params) -> torch.Tensor:
    """One HWC sample through fn.water (``params``: its ampl/freq/phase arguments, DALI's defaults for the
    others). In native code where built (``_native_effects.c`` water: the waves from the C library's sinf/cosf,
    which ``libm_float`` calls, the points made row by row); else ``water_points`` and ``sample_at``."""
    params = {**_WATER_DEFAULTS, **params}
    height, width = image.shape[:2]
    if not _native_ready(image):
        return sample_at(image, *water_points(height, width, **params), fill, interp)
    waves = tuple(float(_F32(params[k])) for k in ("ampl_x", "ampl_y", "freq_x", "freq_y", "phase_x", "phase_y"))
    src = image.contiguous()
    out = torch.empty(src.shape, dtype=src.dtype)
    _native.water(src.numpy(), out.numpy(), height, width, src.shape[2], _NATIVE_TYPES[src.dtype], waves,
                  float(_F32(fill)), interp != "nn")
    return out


def sphere_image(image: torch.Tensor, fill: float, interp: str) -> torch.Tensor:
    """One HWC sample through fn.sphere; in native code where built (``_native_effects.c`` sphere), else
    ``sphere_points`` and ``sample_at``."""
    height, width = image.shape[:2]
    if not _native_ready(image):
        return sample_at(image, *sphere_points(height, width), fill, interp)
    src = image.contiguous()
    out = torch.empty(src.shape, dtype=src.dtype)
    _native.sphere(src.numpy(), out.numpy(), height, width, src.shape[2], _NATIVE_TYPES[src.dtype],
                   float(_F32(fill)), interp != "nn")
    return out


def _displacement(operator: str, displace, names: set):
    def build(images, *, device=None, interp_type=None, fill_value=0.0, mask=1, **args):
        check_args(f"fn.{operator}", args, names)
        _layout(f"fn.{operator}", images)
        interp = interp_name(interp_type) if interp_type is not None else "nn"
        if interp not in ("nn", "linear"):
            raise NotImplementedError(f"fastload.compat.dali: fn.{operator} supports interp_type INTERP_NN and "
                                      f"INTERP_LINEAR only (as DALI)")
        settings = {**{k: v for k, v in args.items()}, "mask": mask}

        def run(ctx, op, image, mask, **a):
            if image.dtype not in (torch.uint8, torch.float32):
                raise NotImplementedError(f"fastload.compat.dali: fn.{operator} of {image.dtype} input is not "
                                          f"supported (uint8 or float32, as DALI)")
            if not int(mask):
                return image.clone()
            image = image.cpu()  # computed on the CPU (a "gpu" operator's output goes back to the GPU)
            return displace(image, _fill_of(fill_value, image.dtype), interp, **a)
        return _one(Op(operator, run, [images], settings, device=_device([images], device),
                       layouts=(images.layout(),), fusable=False))
    build.__name__ = operator
    return build



water = operator("water", "Water")(_displacement("water", water_image, set(_WATER_DEFAULTS)))
water.__doc__ = ("``fn.water``: the image displaced by two sine waves (ampl_x/y, freq_x/y, phase_x/y), "
                 "nearest (DALI's default) or linear, ``fill_value`` outside; ``mask`` 0 leaves a sample as is.")
sphere = operator("sphere", "Sphere")(
    _displacement("sphere", sphere_image, set()))
sphere.__doc__ = ("``fn.sphere``: the image seen through a sphere (pixels pushed out radially), nearest "
                  "(DALI's default) or linear, ``fill_value`` outside; ``mask`` 0 leaves a sample as is.")


# ----------------------------------------------------------------------------------- JPEG distortion

def jpeg_distort(image: torch.Tensor, quality: int) -> torch.Tensor:
    """One RGB uint8 HWC image encoded as a baseline 4:2:0 JPEG at ``quality`` (clamped to 1..100) and
    decoded, as DALI's CPU operator does through OpenCV (the same libjpeg-turbo steps, here Pillow's)."""
    from PIL import Image
    quality = min(max(int(quality), 1), 100)
    buffer = io.BytesIO()
    Image.fromarray(image.contiguous().numpy(), "RGB").save(buffer, format="JPEG", quality=quality, subsampling=2)
    decoded = Image.open(io.BytesIO(buffer.getvalue()))
    decoded.draft(None, None)
    return torch.from_numpy(np.asarray(decoded.convert("RGB")).copy())


@operator("jpeg_compression_distortion", "JpegCompressionDistortion")
def jpeg_compression_distortion(images, *, quality=50, device=None, **args):
    """``fn.jpeg_compression_distortion``: JPEG artifacts at ``quality`` (per sample allowed), for RGB
    uint8 images (HWC) or sequences of them (FHWC)."""
    check_args("fn.jpeg_compression_distortion", args, set())
    layout = _layout("fn.jpeg_compression_distortion", images, ("HWC", "FHWC"))
    if _device([images], device) != "cpu":  # DALI's GPU operator is its own CUDA codec: other pixels
        raise NotImplementedError("fastload.compat.dali: fn.jpeg_compression_distortion on the GPU is not "
                                  "supported (DALI's GPU operator is its own CUDA encoder, whose pixels differ "
                                  "from its CPU operator's libjpeg-turbo ones, which fastload gives): run it "
                                  "before .gpu()")

    def run(ctx, op, image, quality):
        if image.dtype != torch.uint8 or image.shape[-1] != 3:
            raise NotImplementedError("fastload.compat.dali: fn.jpeg_compression_distortion takes RGB uint8 "
                                      f"images (3 channels), got {image.dtype} with shape {tuple(image.shape)}")
        image = image.cpu()
        if layout == "FHWC":
            return torch.stack([jpeg_distort(frame, quality) for frame in image]) if len(image) else image.clone()
        return jpeg_distort(image, quality)
    return _one(Op("jpeg_compression_distortion", run, [images], {"quality": quality},
                   device=_device([images], device), layouts=(images.layout() or "HWC",), fusable=False))
