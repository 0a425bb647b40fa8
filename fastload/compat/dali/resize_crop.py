"""DALI's decoder crops, resize-crop-mirror and tensor resizes: ``fn.decoders.image_crop``,
``fn.resize_crop_mirror`` (and its deprecated twin ``fn.fast_resize_crop_mirror``) and ``fn.tensor_resize``.
``fn.experimental.resize`` is not here: DALI 2.4 has it on the GPU only (CV-CUDA's resize, no CPU
operator to check it against), so it stays refused by name.

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_resize_crop.py); the rules
measured there (and read in DALI's sources) are:

- ``decoders.image_crop``: fn.decoders.image, then fn.crop's window (``crop_pos * (in - crop)``, rounded
  half away from zero or truncated with ``rounding``); a window past the image's edges is an error, as
  DALI's. ``dtype=FLOAT`` gives ``value * (1 / 255)`` in float32 (bit for bit); other output types are
  refused (DALI scales them to the type's range).
- ``tensor_resize``: every axis of the tensor is a spatial one (DALI's TensorResize); an axis that
  ``axes``/``axis_names`` leave out is asked for its own extent, and so takes part in the modes ("default"
  fills a missing extent with the geometric mean of the given scales, counting those axes' 1).
  ``scales`` ask for ``scale * extent`` (float32, of the whole axis even with a ROI); the size is rounded by
  ``size_rounding`` ("round": half away from zero, the default; "truncate"; "ceil"), and with
  ``subpixel_scale`` the region shrinks or grows about ``(1 - alignment) * lo + alignment * hi`` to keep
  the scale. The resampling is fn.resize's; fastload runs it where at most two axes change and they are
  the first two of a 3-D tensor (HWC) or any of a 1-D or 2-D one; other tensors are refused.
  ``fn.experimental.tensor_resize`` is DALI's deprecated name for it.
- ``resize_crop_mirror``: fn.resize's output size and source region (``resampling``), then fn.crop's
  window (``crops``) placed in that output and back-projected onto the source: ``lo + anchor * ratio``,
  ``ratio = (hi - lo) / out`` in double, stored as float32; one resampling of that region to the window's
  size (so a window past the resized image's edges reads clamped border pixels, not fill values).
  ``mirror`` is a bit mask over the spatial axes, lowest bit last: 1 flips the width, 2 the height, 3 both
  (it reverses the region). With INTERP_NN, DALI reads outside the image for a window past the
  resized image's edges (other rows' pixels): refused. ``fast_resize_crop_mirror`` (DALI's deprecated
  schema, declared on its own since its default differs) is the same with ``antialias=False`` by default.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..engine.graph import DataNode, Op
from ..float32 import round_c
from . import crops, resampling
from .operators import _RESIZE_ARGS, _decode, _device, _fast_idct, _layout, _one, _pair, check_args
from .spec import operator
from .types import image_type_name, interp_name, torch_dtype

_F32 = np.float32
_CROP_ARGS = {"crop", "crop_h", "crop_w", "crop_pos_x", "crop_pos_y", "rounding"}
_VOLUMETRIC = ("crop_d", "crop_pos_z", "resize_z")


def _refuse_volumetric(operator: str, args: dict) -> None:
    given = [name for name in _VOLUMETRIC if name in args]
    if given:
        raise NotImplementedError(f"fastload.compat.dali: {operator}: {', '.join(given)} (volumetric "
                                  f"input) is not supported; 2-D HWC images are")


def _filters(operator: str, interp_type, min_filter, mag_filter) -> str:
    """One filter name, as fn.resize takes it (different minification and magnification filters refused)."""
    if min_filter is not None or mag_filter is not None:
        if interp_type is None and min_filter == mag_filter:
            interp_type = min_filter
        else:
            raise NotImplementedError(f"fastload.compat.dali: {operator}: different min_filter and mag_filter "
                                      f"are not supported; use interp_type")
    return interp_name(interp_type) if interp_type is not None else "linear"


# ------------------------------------------------------------------------------------- resize_crop_mirror

def _crop_size(args: dict, operator: str) -> dict:
    """The window's size settings: crop_h and crop_w, or ``crop`` where it is a per-sample input (read by
    ``_window`` for each sample)."""
    crop = args.pop("crop", None)
    if crop is None:
        return {"crop_h": args.pop("crop_h", 0), "crop_w": args.pop("crop_w", 0)}
    if "crop_h" in args or "crop_w" in args:
        raise ValueError(f"{operator}: crop and crop_h/crop_w are mutually exclusive")
    if isinstance(crop, DataNode):
        return {"crop": crop}
    crop_h, crop_w = _pair(crop)
    return {"crop_h": crop_h, "crop_w": crop_w}


def _window(settings: dict) -> dict:
    if "crop" in settings:
        settings["crop_h"], settings["crop_w"] = _pair(settings.pop("crop"))
    return settings


def resize_crop_mirror_image(image, *, crop_h=0, crop_w=0, crop_pos_x=0.5, crop_pos_y=0.5, rounding="round",
                             mirror=0, interp_type="linear", antialias=True, dtype=None, **size):
    """One HWC image resized (fn.resize's ``size`` arguments), cropped and mirrored as DALI's
    ResizeCropMirror does: the crop window back-projected onto the source region and resampled once."""
    height, width = int(image.shape[0]), int(image.shape[1])
    (out_h, out_w), roi_y, roi_x = resampling._resize_plan(height, width, **size)
    window = crops._crop_window(out_h, out_w, crop_h, crop_w, crop_pos_x, crop_pos_y, rounding)
    mirror = int(mirror)
    if resampling._interp(interp_type) == "nearest" and any(a < 0 or a + e > n for (a, e), n in
                                                             zip(window, (out_h, out_w))):
        raise NotImplementedError("fastload.compat.dali: resize_crop_mirror: interp_type INTERP_NN with a crop "
                                  "window past the resized image's edges is not supported (DALI's nearest-"
                                  "neighbour resampler then reads outside the image)")
    starts, ends, sizes = [], [], []
    for d, ((lo, hi), (anchor, extent), out) in enumerate(zip((roi_y, roi_x), window, (out_h, out_w))):
        ratio = float(_F32(hi - lo)) / out
        start, end = _F32(anchor * ratio + float(lo)), _F32((anchor + extent) * ratio + float(lo))
        if mirror & (1 << (1 - d)):  # bit 0: the last spatial axis (width), bit 1: height
            start, end = end, start
        starts.append(float(start))
        ends.append(float(end))
        sizes.append(extent)
    return resampling.resize(image, resize_y=sizes[0], resize_x=sizes[1], roi_start=starts, roi_end=ends,
                             subpixel_scale=False, interp_type=interp_type, antialias=antialias, dtype=dtype)


def _resize_crop_mirror(name: str, default_antialias: bool):
    def build(images, *, device=None, interp_type=None, min_filter=None, mag_filter=None,
              antialias=default_antialias, dtype=None, mirror=0, **args):
        check_args(f"fn.{name}", args, _RESIZE_ARGS | _CROP_ARGS | set(_VOLUMETRIC))
        _refuse_volumetric(f"fn.{name}", args)
        _layout(f"fn.{name}", images)
        args = dict(args)
        window = _crop_size(args, f"fn.{name}")
        args = {k: _pair(v) if k in ("size", "roi_start", "roi_end", "max_size") and isinstance(v, (list, tuple))
                else v for k, v in args.items()}
        settings = {**window, "mirror": mirror, **args,
                    "interp_type": _filters(f"fn.{name}", interp_type, min_filter, mag_filter),
                    "antialias": bool(antialias), "dtype": torch_dtype(dtype) if dtype is not None else None}

        def run(ctx, op, image, **a):
            return resize_crop_mirror_image(image, **_window(a))
        return _one(Op(name, run, [images], settings, device=_device([images], device),
                       layouts=(images.layout(),), fusable=False))
    build.__name__ = name
    build.__doc__ = (f"``fn.{name}``: fn.resize, then fn.crop's window, then a mirror (``mirror`` bits: 1 width, "
                     f"2 height), as one resampling of the window's source region"
                     f"{'' if default_antialias else '; antialias off unless asked'}.")
    return build


resize_crop_mirror = operator("resize_crop_mirror", "ResizeCropMirror")(
    _resize_crop_mirror("resize_crop_mirror", True))
fast_resize_crop_mirror = operator("fast_resize_crop_mirror", "FastResizeCropMirror")(
    _resize_crop_mirror("fast_resize_crop_mirror", False))


# ---------------------------------------------------------------------------------------- decoders.image_crop

@operator("decoders.image_crop", "decoders.ImageCrop", legacy=("nvJPEGDecoderCrop",),
          aliases={"image_decoder_crop": "ImageDecoderCrop",
                   "experimental.decoders.image_crop": "experimental.decoders.ImageCrop"})
def decoders_image_crop(data, *, device="cpu", output_type=None, use_fast_idct=False, adjust_orientation=True,
                        dtype=None, **args):
    """``fn.decoders.image_crop``: the decoded image's (crop_h, crop_w) window at relative (crop_pos_x,
    crop_pos_y); uint8, or float32 in [0, 1] with ``dtype=FLOAT``. A window past the edges is an error."""
    check_args("fn.decoders.image_crop", args, _CROP_ARGS | {"crop_d", "crop_pos_z"})
    _refuse_volumetric("fn.decoders.image_crop", args)
    _fast_idct("fn.decoders.image_crop", use_fast_idct)
    if not adjust_orientation:
        raise NotImplementedError("fastload.compat.dali: fn.decoders.image_crop(adjust_orientation=False) is not "
                                  "supported (the EXIF orientation is always applied)")
    target = torch_dtype(dtype) if dtype is not None else torch.uint8
    if target not in (torch.uint8, torch.float32):
        raise NotImplementedError(f"fastload.compat.dali: fn.decoders.image_crop(dtype={dtype}) is not supported "
                                  f"(UINT8 and FLOAT are)")
    if ("crop_h" in args) != ("crop_w" in args):
        raise ValueError("fn.decoders.image_crop: crop_h and crop_w must be given together")
    args = dict(args)
    settings = {**_crop_size(args, "fn.decoders.image_crop"), **args}
    kind = image_type_name(output_type) if output_type is not None else "RGB"

    def run(ctx, op, encoded, **window):
        image = crops.crop(_decode(ctx, op, encoded, kind), out_of_bounds_policy="error", **_window(window))
        if target == torch.float32:  # DALI's normalising conversion: a multiply by 1/255 in float32
            return image.float() * torch.tensor(1 / 255, dtype=torch.float32)
        return image
    return _one(Op("decoders.image_crop", run, [data], settings, device=device, layouts=("HWC",), fusable=False))


# ---------------------------------------------------------------------------------------------- tensor_resize

_ROUNDING = {"round": lambda v: int(round_c(v)), "truncate": math.trunc, "ceil": math.ceil}


def _per_axis(value, count: int, name: str) -> list:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(values) == 1:
        values = values * count
    if len(values) != count:
        raise ValueError(f"tensor_resize: {name} has {len(values)} values for {count} axes")
    return [float(v) for v in values]


def _adjust_sizes(out: list, in_size: list, mode: str, limit: list | None) -> list:
    """DALI's AdjustOutputSize for any number of axes: missing (0) extents and the modes, in double, the
    sizes stored back as float32."""
    ndim = len(out)
    mask = [out[d] != 0 and in_size[d] != 0 for d in range(ndim)]
    scale = [float(_F32(out[d]) / _F32(in_size[d])) if in_size[d] else 1.0 for d in range(ndim)]  # float32
    provided = sum(mask)
    if provided == 0:
        return list(in_size)
    out = list(out)
    if mode in ("default", "stretch"):
        if provided < ndim:
            fill = 1.0
            if mode == "default":
                for d in range(ndim):
                    if mask[d]:
                        fill *= abs(scale[d])
                if provided > 1:
                    fill = fill ** (1.0 / provided)
            for d in range(ndim):
                if not mask[d]:
                    out[d] = _F32(float(in_size[d]) * fill) if mode == "default" else in_size[d]
        if limit is not None:
            for d in range(ndim):
                if limit[d] > 0 and abs(out[d]) > limit[d]:
                    out[d] = _F32(math.copysign(float(limit[d]), float(out[d])))
        return out
    final = None
    for d in range(ndim):
        if mask[d]:
            s = float(_F32(abs(scale[d])))
            if final is None or (mode == "not_smaller" and s > final) or (mode == "not_larger" and s < final):
                final = s
    if limit is not None:
        for d in range(ndim):
            if limit[d] > 0:
                final = min(final, float(limit[d]) / float(in_size[d]))
    for d in range(ndim):
        if not mask[d] or abs(scale[d]) != final:
            out[d] = _F32(float(in_size[d]) * math.copysign(final, scale[d]))
    return out


def tensor_resize_plan(shape, *, sizes=None, scales=None, axes=None, mode="default", max_size=None,
                       roi_start=None, roi_end=None, roi_relative=False, subpixel_scale=True,
                       size_rounding="round", alignment=0.5):
    """DALI's TensorResizeAttr for one sample of ``shape``: per axis, the output extent and the source
    region (lo, hi) resampled onto it (float32, reversed where it flips)."""
    ndim = len(shape)
    axes = list(range(ndim)) if axes is None else [a + ndim if a < 0 else a for a in axes]
    if any(not 0 <= a < ndim for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"tensor_resize: axes {axes} do not name distinct axes of a {ndim}-D input")
    if (sizes is None) == (scales is None):
        raise ValueError("tensor_resize: give one of sizes and scales")
    if mode not in ("default", "stretch", "not_smaller", "not_larger"):
        raise ValueError(f"tensor_resize: unknown mode {mode!r}")
    if scales is not None and mode in ("not_smaller", "not_larger"):
        raise ValueError("tensor_resize: scales cannot be used with the not_smaller and not_larger modes")
    if size_rounding not in _ROUNDING:
        raise ValueError(f"tensor_resize: size_rounding must be round, truncate or ceil, not {size_rounding!r}")
    if (roi_start is None) != (roi_end is None):
        raise ValueError("tensor_resize: roi_start and roi_end must be given together")
    count = len(axes)
    requested = [_F32(n) for n in shape]
    if sizes is not None:
        for a, v in zip(axes, _per_axis(sizes, count, "sizes")):
            requested[a] = _F32(v)
    else:
        for a, v in zip(axes, _per_axis(scales, count, "scales")):
            requested[a] = _F32(float(_F32(v)) * shape[a])
    limit = None
    if max_size is not None:
        limit = [_F32(0)] * ndim
        for a, v in zip(axes, _per_axis(max_size, count, "max_size")):
            limit[a] = _F32(v)
    align = [0.5] * ndim
    for a, v in zip(axes, _per_axis(alignment, count, "alignment")):
        align[a] = float(_F32(v))
    lo, hi = [_F32(0)] * ndim, [_F32(n) for n in shape]
    if roi_start is not None:
        for a, start, end in zip(axes, _per_axis(roi_start, count, "roi_start"), _per_axis(roi_end, count, "roi_end")):
            start, end = float(_F32(start)), float(_F32(end))
            if roi_relative:
                start, end = start * shape[a], end * shape[a]
            if abs(end - start) < 1e-3:  # DALI widens a degenerate region to 0.001
                offset = 0.0005 if start <= end else -0.0005
                start, end = start - offset, end + offset
            lo[a], hi[a] = _F32(start), _F32(end)
    in_size = []
    for d in range(ndim):
        if hi[d] < lo[d]:
            lo[d], hi[d], requested[d] = hi[d], lo[d], -requested[d]
        in_size.append(_F32(hi[d] - lo[d]))
    out = _adjust_sizes(requested, in_size, mode, limit)
    empty = any(n == 0 for n in shape)
    round_size = _ROUNDING[size_rounding]
    sizes_out, src = [], []
    for d in range(ndim):
        if in_size[d] == 0 and out[d] != 0:
            raise ValueError("tensor_resize: cannot produce non-empty output from empty input")
        dst = max(0 if empty else 1, round_size(abs(float(out[d]))))
        start, end = (hi[d], lo[d]) if out[d] < 0 else (lo[d], hi[d])
        if subpixel_scale and dst != abs(float(out[d])):
            adjustment = min(10.0, max(-10.0, dst / abs(float(out[d]))))
            center = (1 - align[d]) * float(start) + align[d] * float(end)
            start = _F32(min(1e9, max(-1e9, center + (float(start) - center) * adjustment)))
            end = _F32(min(1e9, max(-1e9, center + (float(end) - center) * adjustment)))
        sizes_out.append(dst)
        src.append((float(start), float(end)))
    return sizes_out, src


def tensor_resize_sample(tensor: torch.Tensor, *, interp_type="linear", antialias=True, dtype=None, **plan):
    """One sample of fn.tensor_resize (the rules in the module's docstring)."""
    shape = tuple(int(n) for n in tensor.shape)
    sizes, src = tensor_resize_plan(shape, **plan)
    changed = [d for d in range(len(shape)) if (sizes[d], src[d]) != (shape[d], (0.0, float(shape[d])))]
    if len(shape) == 1:
        image, axes = tensor.reshape(1, -1, 1), (None, 0)
    elif len(shape) == 2:
        image, axes = tensor.unsqueeze(-1), (0, 1)
    elif len(shape) == 3 and 2 not in changed:
        image, axes = tensor, (0, 1)
    else:
        raise NotImplementedError(f"fastload.compat.dali: fn.tensor_resize of a {len(shape)}-D input changing "
                                  f"axes {changed} is not supported (1-D and 2-D inputs, and 3-D ones whose "
                                  f"last axis is kept, are)")
    starts, ends, extents = [], [], []
    for axis, size in zip(axes, image.shape[:2]):
        (start, end), extent = ((0.0, float(size)), int(size)) if axis is None else (src[axis], sizes[axis])
        starts.append(start)
        ends.append(end)
        extents.append(extent)
    out = resampling.resize(image, resize_y=extents[0], resize_x=extents[1], roi_start=starts, roi_end=ends,
                            subpixel_scale=False, interp_type=interp_type, antialias=antialias, dtype=dtype)
    return out.reshape(sizes)


_TENSOR_RESIZE_ARGS = {"sizes", "scales", "axes", "axis_names", "mode", "max_size", "roi_start", "roi_end",
                       "roi_relative", "subpixel_scale", "size_rounding", "alignment"}


@operator("tensor_resize", "TensorResize", aliases={"experimental.tensor_resize": "experimental.TensorResize"})
def tensor_resize(data, *, device=None, interp_type=None, min_filter=None, mag_filter=None, antialias=True,
                  dtype=None, **args):
    """``fn.tensor_resize``: resize any of a tensor's axes (``sizes`` or ``scales``, per ``axes`` or
    ``axis_names``) with fn.resize's filters; at most two axes may change (see the module's docstring)."""
    check_args("fn.tensor_resize", args, _TENSOR_RESIZE_ARGS)
    args = dict(args)
    names = args.pop("axis_names", None)
    if names is not None:
        if "axes" in args:
            raise ValueError("fn.tensor_resize: axes and axis_names are mutually exclusive")
        layout = data.layout()
        if not layout or any(name not in layout for name in str(names)):
            raise ValueError(f"fn.tensor_resize: axis_names {names!r} are not in the input's layout {layout!r}")
        args["axes"] = [layout.index(name) for name in str(names)]
    elif "axes" in args:
        args["axes"] = [int(a) for a in (args["axes"] if isinstance(args["axes"], (list, tuple)) else [args["axes"]])]
    settings = {**args, "interp_type": _filters("fn.tensor_resize", interp_type, min_filter, mag_filter),
                "antialias": bool(antialias), "dtype": torch_dtype(dtype) if dtype is not None else None}

    def run(ctx, op, tensor, **a):
        return tensor_resize_sample(tensor, **a)
    return _one(Op("tensor_resize", run, [data], settings, device=_device([data], device),
                   layouts=(data.layout(),), fusable=False))
