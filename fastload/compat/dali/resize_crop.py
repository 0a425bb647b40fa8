"""DALI's decoder crops, resize-crop-mirror and tensor resizes: ``fn.decoders.image_crop``,
``fn.resize_crop_mirror`` (and its deprecated twin ``fn.fast_resize_crop_mirror``), ``fn.tensor_resize``
and ``fn.experimental.resize``.

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_resize_crop.py); the rules
measured there (and read in DALI's sources) are:

- ``decoders.image_crop``: fn.decoders.image, then fn.crop's window (``crop_pos * (in - crop)``, rounded
  half away from zero or truncated with ``rounding``); a window past the image's edges is an error, as
  DALI's. ``dtype=FLOAT`` gives ``value * (1 / 255)`` in float32 (bit for bit); other output types are
  refused (DALI scales them to the type's range).
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

import numpy as np
import torch

from ..engine.graph import Op
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

def _crop_size(args: dict, operator: str) -> tuple:
    crop = args.pop("crop", None)
    if crop is not None:
        if "crop_h" in args or "crop_w" in args:
            raise ValueError(f"{operator}: crop and crop_h/crop_w are mutually exclusive")
        return _pair(crop)
    return args.pop("crop_h", 0), args.pop("crop_w", 0)


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
        crop_h, crop_w = _crop_size(args, f"fn.{name}")
        args = {k: _pair(v) if k in ("size", "roi_start", "roi_end", "max_size") and isinstance(v, (list, tuple))
                else v for k, v in args.items()}
        settings = {"crop_h": crop_h, "crop_w": crop_w, "mirror": mirror, **args,
                    "interp_type": _filters(f"fn.{name}", interp_type, min_filter, mag_filter),
                    "antialias": bool(antialias), "dtype": torch_dtype(dtype) if dtype is not None else None}

        def run(ctx, op, image, **a):
            return resize_crop_mirror_image(image, **a)
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
    crop_h, crop_w = _crop_size(args, "fn.decoders.image_crop")
    kind = image_type_name(output_type) if output_type is not None else "RGB"
    settings = {"crop_h": crop_h, "crop_w": crop_w, **args}

    def run(ctx, op, encoded, **window):
        image = crops.crop(_decode(ctx, op, encoded, kind), out_of_bounds_policy="error", **window)
        if target == torch.float32:  # DALI's normalising conversion: a multiply by 1/255 in float32
            return image.float() * torch.tensor(1 / 255, dtype=torch.float32)
        return image
    return _one(Op("decoders.image_crop", run, [data], settings, device=device, layouts=("HWC",), fusable=False))
