"""DALI's operators as graph builders: ``fn.<name>(inputs, **args)`` adds an ``Op`` and returns its nodes.

Each operator is an explicit function (nothing is generated at import) that
checks its arguments against the ones fastload runs as DALI does, and
refuses any other with NotImplementedError naming the operator and the
argument -- a different result is never given silently. The per-sample
work is the family modules' (``decoding``, ``crops``, ``resampling``, ``warping``, ``colour``,
``conversions``), in torch.
"""

from __future__ import annotations

import builtins
import os
import re
from dataclasses import dataclass

import torch

from . import colour, crops, decoding, resampling, warping
from ..engine import conversions
from ..engine.graph import DataNode, Op, ReaderOp
from ..engine.readers import read_sample
from .spec import operator
from .types import image_type_name, interp_name, torch_dtype

# Arguments that change no result here (memory and scheduling hints; ``seed`` changes nothing but for the random
# operators, which read it: ``_seeded``). Every DALI 2.4 schema has bytes_per_sample_hint and preserve (``name``
# and ``seed`` its Python wrapper takes for any operator); the rest only some schemas have, and DALI refuses them
# elsewhere (a KeyError naming the argument and operator), so they are accepted only where DALI's schema has them.
HINTS = frozenset({"bytes_per_sample_hint", "preserve", "seed", "name"})
_READER_HINTS = frozenset({"dont_use_mmap", "lazy_init", "prefetch_queue_depth", "read_ahead", "skip_cached_images",
                           "tensor_init_bytes"})
_DECODER_HINTS = frozenset({"affine", "device_memory_padding", "device_memory_padding_jpeg2k", "host_memory_padding",
                            "host_memory_padding_jpeg2k", "hw_decoder_load", "hybrid_huffman_threshold",
                            "jpeg_fancy_upsampling", "memory_stats", "preallocate_height_hint",
                            "preallocate_width_hint", "split_stages", "use_chunk_allocator"})
_RESIZE_HINTS = frozenset({"minibatch_size", "temp_buffer_hint"})
_RESIZERS = frozenset({"fn.resize", "fn.experimental.resize", "fn.random_resized_crop", "fn.tensor_resize",
                       "fn.resize_crop_mirror", "fn.fast_resize_crop_mirror", "fn.readers.video_resize"})
_SCHEMA_HINTS = _READER_HINTS | _DECODER_HINTS | _RESIZE_HINTS


def _schema_hints(operator: str) -> frozenset:
    """The hints beyond ``HINTS`` that DALI 2.4's schema for ``operator`` ("fn.decoders.image", ...) has."""
    found = re.findall(r"fn\.[\w.]+", operator)
    name = found[-1] if found else operator
    hints = frozenset()
    if name.startswith(("fn.readers.", "fn.experimental.readers.")):
        hints |= _READER_HINTS
    if name == "fn.io.file.read":
        hints |= {"dont_use_mmap"}
    if name.startswith(("fn.decoders.image", "fn.experimental.decoders.image")):
        hints |= _DECODER_HINTS
    if name in ("fn.decoders.video", "fn.experimental.decoders.video", "fn.experimental.inputs.video"):
        hints |= {"affine"}
    if name in _RESIZERS:
        hints |= _RESIZE_HINTS
    return hints


def check_args(operator: str, args: dict, supported: set) -> None:
    """Refuse arguments fastload does not run as DALI does, naming them and what is supported; a hint that
    DALI's schema for the operator lacks is refused as DALI refuses it (KeyError)."""
    foreign = sorted((set(args) & _SCHEMA_HINTS) - set(supported) - _schema_hints(operator))
    if foreign:
        raise KeyError(f"fastload.compat.dali: argument {foreign[0]!r} is not defined for operator {operator} "
                       f"(DALI's schema for it has no such argument)")
    unknown = sorted(set(args) - set(supported) - HINTS - _schema_hints(operator))
    if unknown:
        raise NotImplementedError(f"fastload.compat.dali: {operator} does not support argument(s) "
                                  f"{', '.join(unknown)}; supported: {', '.join(sorted(supported))}")


def _device(inputs, device: str | None) -> str:
    if device is not None:
        return device
    return "gpu" if any(isinstance(x, DataNode) and x.device == "gpu" for x in inputs) else "cpu"


def _one(op: Op):
    return op.outputs[0] if op.num_outputs == 1 else op.outputs


def _seeded(op: Op, args: dict) -> Op:
    """A random operator with the ``seed`` it was given (DALI's -1, the default, is the pipeline's)."""
    seed = args.get("seed")
    op.seed = int(seed) if seed is not None and int(seed) != -1 else None
    return op


# ---------------------------------------------------------------------------------------------- readers

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".pnm", ".ppm", ".pgm", ".pbm",
                    ".jp2", ".webp")


@dataclass
class ReaderSpec:
    """What ``fn.readers.file`` was told: its samples [(path, label)] and DALI's sharding arguments."""

    samples: list
    names: list  # what DALI's source_info() gives per sample
    shard_id: int
    num_shards: int
    random_shuffle: bool
    initial_fill: int
    shuffle_after_epoch: bool
    stick_to_shard: bool
    pad_last_batch: bool
    seed: int
    name: str | None


def _list_folder(root: str) -> list[tuple[str, int, str]]:
    """DALI's file_root discovery: sorted class folders give labels; in each, the files directly inside
    whose extension (any case) is an image's, sorted; sub-folders are not entered (measured on DALI 2.4)."""
    classes = sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    found = []
    for label, name in enumerate(classes):
        folder = os.path.join(root, name)
        for file in sorted(entry.name for entry in os.scandir(folder) if entry.is_file()):
            if file.lower().endswith(IMAGE_EXTENSIONS):
                found.append((os.path.join(folder, file), label, f"{name}/{file}"))
    return found


def _read_list(list_file: str, root: str | None) -> list[tuple[str, int, str]]:
    from ...sources import FileList
    listed = FileList(list_file, root=root if root is not None else os.path.dirname(list_file))
    return [(path, label, os.path.relpath(path, listed.root)) for path, label in listed.samples]


@operator("readers.file", "readers.File", aliases={"file_reader": "FileReader"}, fused=True)
def readers_file(*, file_root=None, files=None, labels=None, file_list=None, shard_id=0, num_shards=1,
                 random_shuffle=False, initial_fill=1024, shuffle_after_epoch=False, stick_to_shard=False,
                 pad_last_batch=False, seed=-1, name=None, file_filters=None, case_sensitive_filter=False,
                 device="cpu", **hints):
    """``fn.readers.file``: (encoded bytes, int32 label of shape [1]) per sample, in DALI's order."""
    check_args("fn.readers.file", hints, set())
    if file_filters is not None or case_sensitive_filter:
        raise NotImplementedError("fastload.compat.dali: fn.readers.file: file_filters and "
                                  "case_sensitive_filter are not supported (the default image extensions are)")
    if device != "cpu":
        raise ValueError("fn.readers.file runs on the CPU (device='cpu'), as in DALI")
    if files is not None:
        paths = [os.path.join(file_root, f) if file_root else f for f in files]
        labels = list(range(len(paths))) if labels is None else [int(x) for x in labels]
        if len(labels) != len(paths):
            raise ValueError(f"fn.readers.file: {len(paths)} files but {len(labels)} labels")
        found = list(zip(paths, labels, files))
    elif file_list is not None:
        found = _read_list(file_list, file_root)
    elif file_root is not None:
        found = _list_folder(file_root)
    else:
        raise ValueError("fn.readers.file needs file_root, files or file_list")
    if not found:
        raise ValueError(f"fn.readers.file: no files found (file_root={file_root!r}, file_list={file_list!r})")
    spec = ReaderSpec([(p, label) for p, label, _ in found], [n for _, _, n in found], int(shard_id),
                      int(num_shards), bool(random_shuffle), int(initial_fill), bool(shuffle_after_epoch),
                      bool(stick_to_shard), bool(pad_last_batch), int(seed), name)
    return ReaderOp("readers.file", read_sample, spec).outputs


@operator("io.file.read", "io.file.Read")
def io_file_read(filepaths, **args):
    """``fn.io.file.read``: the bytes of the file whose path is the input (a uint8 tensor of the path)."""
    check_args("fn.io.file.read", args, {"dont_use_mmap", "use_o_direct"})

    def read(ctx, op, path):
        with open(bytes(path.to(torch.uint8).tolist()).decode(), "rb") as file:
            return torch.frombuffer(bytearray(file.read()), dtype=torch.uint8)
    return _one(Op("io.file.read", read, [filepaths], {}, fusable=False))


# --------------------------------------------------------------------------------------------- decoders

def _decode(ctx, op, data, output_type="RGB"):
    from ...errors import DecodeError
    try:
        return decoding.decode(bytes(data.numpy()), output_type)
    except Exception as error:
        raise DecodeError(ctx.index, ctx.name, f"cannot decode: {error}") from error


def decode_window(ctx, op, data, output_type, window):
    """``decoding.decode_window`` of the sample's bytes: an image that cannot be decoded is a DecodeError
    naming the file; ``window``'s own error (a window out of bounds) is raised as it is."""
    from ...errors import DecodeError
    refused = []

    def checked(shape):
        try:
            return window(shape)
        except ValueError as error:
            refused.append(error)
            raise
    try:
        return decoding.decode_window(bytes(data.numpy()), output_type, checked)
    except Exception as error:
        if refused and error is refused[0]:
            raise
        raise DecodeError(ctx.index, ctx.name, f"cannot decode: {error}") from error


def _fast_idct(operator: str, use_fast_idct) -> None:
    if use_fast_idct:  # DALI's CPU decoder then uses libjpeg's fast integer IDCT: other pixels (up to 5 levels)
        raise NotImplementedError(f"fastload.compat.dali: {operator}(use_fast_idct=True) is not supported "
                                  f"(libjpeg's fast IDCT gives other pixels; fastload decodes with the accurate one)")


@operator("decoders.image", "decoders.Image", fused=True, legacy=("nvJPEGDecoder",),
          aliases={"image_decoder": "ImageDecoder", "experimental.decoders.image": "experimental.decoders.Image"})
def decoders_image(data, *, device="cpu", output_type=None, use_fast_idct=False, **args):
    """``fn.decoders.image``: HWC uint8 images; "mixed" decodes for the GPU."""
    check_args("fn.decoders.image", args, set())
    _fast_idct("fn.decoders.image", use_fast_idct)
    kind = image_type_name(output_type) if output_type is not None else "RGB"
    return _one(Op("decoders.image", _decode, [data], {"output_type": kind}, device=device, layouts=("HWC",)))


def _random_crop_decode(ctx, op, data, output_type, random_area, random_aspect_ratio, num_attempts):
    image = _decode(ctx, op, data, output_type)
    y, x, h, w = crops.random_crop_window(image.shape[0], image.shape[1], ctx.rng(op), tuple(random_area),
                                             tuple(random_aspect_ratio), num_attempts)
    return image[y:y + h, x:x + w].contiguous()


@operator("decoders.image_random_crop", "decoders.ImageRandomCrop", fused=True,
          legacy=("nvJPEGDecoderRandomCrop",),
          aliases={"image_decoder_random_crop": "ImageDecoderRandomCrop",
                   "experimental.decoders.image_random_crop": "experimental.decoders.ImageRandomCrop"})
def decoders_image_random_crop(data, *, device="cpu", output_type=None, random_area=(0.08, 1.0),
                               random_aspect_ratio=(0.75, 4 / 3), num_attempts=10, use_fast_idct=False, **args):
    """``fn.decoders.image_random_crop``: decode the window DALI's random-crop rule picks."""
    check_args("fn.decoders.image_random_crop", args, set())
    _fast_idct("fn.decoders.image_random_crop", use_fast_idct)
    kind = image_type_name(output_type) if output_type is not None else "RGB"
    return _one(_seeded(Op("decoders.image_random_crop", _random_crop_decode, [data],
                           {"output_type": kind, "random_area": _pair(random_area),
                            "random_aspect_ratio": _pair(random_aspect_ratio), "num_attempts": int(num_attempts)},
                           device=device, layouts=("HWC",)), args))


def _pair(value) -> tuple:
    value = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    return value if len(value) == 2 else (value[0], value[0])


# ------------------------------------------------------------------------------------------- geometry

_RESIZE_ARGS = {"resize_x", "resize_y", "size", "resize_shorter", "resize_longer", "max_size", "mode",
                "roi_start", "roi_end", "roi_relative", "subpixel_scale"}
_ROI_ARGS = ("roi_start", "roi_end", "roi_relative")


def _resize(ctx, op, image, interp_type="linear", antialias=True, dtype=None, **size):
    return resampling.resize(image, interp_type=interp_type, antialias=antialias, dtype=dtype, **size)


@operator("resize", "Resize", fused=True)
def resize(images, *, device=None, interp_type=None, min_filter=None, mag_filter=None, antialias=True,
           dtype=None, **args):
    """``fn.resize`` in DALI's size modes; the filter DALI picks (linear, antialiased when shrinking); a
    region of interest (``roi_start``/``roi_end``, pixels or ``roi_relative``) and ``subpixel_scale``."""
    check_args("fn.resize", args, _RESIZE_ARGS)
    _layout("fn.resize", images)
    if min_filter is not None or mag_filter is not None:
        if interp_type is None and min_filter == mag_filter:
            interp_type = min_filter
        else:
            raise NotImplementedError("fastload.compat.dali: fn.resize: different min_filter and mag_filter "
                                      "are not supported; use interp_type")
    args = {k: _pair(v) if k in ("size", "roi_start", "roi_end") and isinstance(v, (list, tuple)) else v
            for k, v in args.items()}
    settings = {"interp_type": interp_name(interp_type) if interp_type is not None else "linear",
                "antialias": bool(antialias), "dtype": torch_dtype(dtype) if dtype is not None else None}
    # a region of interest (roi_start/roi_end, (y, x), a reversed one flips) resamples part of the input; the
    # fused plan's source box cannot flip, so lowering (which fuses ops named "resize") leaves it per sample
    name = "resize_roi" if any(k in args for k in _ROI_ARGS) else "resize"
    return _one(Op(name, _resize, [images], {**settings, **args}, device=_device([images], device),
                   layouts=(images.layout(),)))


def _random_resized_crop(ctx, op, image, size, random_area, random_aspect_ratio, num_attempts, **settings):
    y, x, h, w = crops.random_crop_window(image.shape[0], image.shape[1], ctx.rng(op), random_area,
                                             random_aspect_ratio, num_attempts)
    # DALI resamples the window as a region of the whole image: the filter reads past its edges
    return resampling.resize(image, resize_x=size[1], resize_y=size[0], roi_start=(y, x), roi_end=(y + h, x + w),
                           **settings)


@operator("random_resized_crop", "RandomResizedCrop", fused=True)
def random_resized_crop(images, *, size, device=None, random_area=(0.08, 1.0), random_aspect_ratio=(0.75, 4 / 3),
                        num_attempts=10, interp_type=None, antialias=True, dtype=None, **args):
    """``fn.random_resized_crop``: DALI's random window, resized to ``size`` (height, width)."""
    check_args("fn.random_resized_crop", args, set())
    _layout("fn.random_resized_crop", images)
    settings = {"interp_type": interp_name(interp_type) if interp_type is not None else "linear",
                "antialias": bool(antialias), "dtype": torch_dtype(dtype) if dtype is not None else None}
    return _one(_seeded(Op("random_resized_crop", _random_resized_crop, [images],
                           {"size": _pair(size), "random_area": _pair(random_area),
                            "random_aspect_ratio": _pair(random_aspect_ratio), "num_attempts": int(num_attempts),
                            **settings}, device=_device([images], device), layouts=(images.layout(),)), args))


def _crop_window(args: dict) -> dict:
    crop = args.pop("crop", None)
    if crop is not None:
        h, w = _pair(crop)
        args.setdefault("crop_h", h)
        args.setdefault("crop_w", w)
    return args


def _layout(operator: str, images, layouts: tuple[str, ...] = ("HWC",)) -> str:
    """The input's layout ("" read as HWC), refused by name where the operator does not take it here (DALI
    reads it: a CHW image resized as if HWC would come out scrambled)."""
    layout = images.layout() or "HWC"
    if layout not in layouts:
        raise NotImplementedError(f"fastload.compat.dali: {operator} of {layout} input is not supported "
                                  f"({' or '.join(layouts)})")
    return layout


@operator("crop", "Crop")
def crop(images, *, device=None, dtype=None, **args):
    """``fn.crop``: a (crop_h, crop_w) window at relative (crop_pos_x, crop_pos_y), of HWC or CHW images;
    with ``dtype`` the window is cut in that type, so a pad's fill_values is the output type's value."""
    check_args("fn.crop", args, {"crop", "crop_h", "crop_w", "crop_pos_x", "crop_pos_y", "fill_values",
                                 "out_of_bounds_policy"})
    args = _crop_window(dict(args))
    args["layout"] = _layout("fn.crop", images, ("HWC", "CHW"))
    args["dtype"] = torch_dtype(dtype) if dtype is not None else None

    def run(ctx, op, image, **a):
        return crops.crop(image, **a)
    return _one(Op("crop", run, [images], args, device=_device([images], device), layouts=(args["layout"],)))


@operator("crop_mirror_normalize", "CropMirrorNormalize", fused=True)
def crop_mirror_normalize(images, *, device=None, dtype=None, output_dtype=None, output_layout="CHW",
                          image_type=None, **args):
    """``fn.crop_mirror_normalize``: crop, mirror, (x - mean) / std * scale + shift, to CHW float by default."""
    check_args("fn.crop_mirror_normalize", args, {"crop", "crop_h", "crop_w", "crop_pos_x", "crop_pos_y",
                                                  "mirror", "mean", "std", "scale", "shift", "pad_output",
                                                  "fill_values", "out_of_bounds_policy"})
    args = _crop_window(dict(args))
    out_dtype = dtype if dtype is not None else output_dtype
    args["dtype"] = torch_dtype(out_dtype) if out_dtype is not None else torch.float32
    args["output_layout"] = str(output_layout)
    args["layout"] = _layout("fn.crop_mirror_normalize", images, ("HWC", "CHW"))
    for key in ("mean", "std", "fill_values"):
        if isinstance(args.get(key), (list, tuple)):
            args[key] = tuple(float(v) for v in args[key])

    def run(ctx, op, image, **a):
        return crops.crop_mirror_normalize(image, **a)
    return _one(Op("crop_mirror_normalize", run, [images], args, device=_device([images], device),
                   layouts=(str(output_layout) or args["layout"],)))


@operator("flip", "Flip")
def flip(images, *, device=None, horizontal=1, vertical=0, **args):
    """``fn.flip``: horizontal and/or vertical flips (per-sample arguments allowed)."""
    check_args("fn.flip", args, set())
    layout = _layout("fn.flip", images, ("HWC", "CHW"))
    return _one(Op("flip", lambda ctx, op, image, horizontal, vertical: crops.flip(
        image, horizontal, vertical, layout), [images], {"horizontal": horizontal, "vertical": vertical},
        device=_device([images], device), layouts=(layout,)))


@operator("rotate", "Rotate")
def rotate(images, *, angle, device=None, fill_value=None, keep_size=False, size=None, interp_type=None, **args):
    """``fn.rotate``: by ``angle`` degrees (DALI's direction), output the bounding box or ``size``; outside
    the image, ``fill_value``, or without one the nearest border pixel (DALI's default)."""
    check_args("fn.rotate", args, set())
    _layout("fn.rotate", images)
    settings = {"angle": angle, "fill_value": fill_value, "keep_size": bool(keep_size),
                "size": _pair(size) if size is not None else None,
                "interp_type": interp_name(interp_type) if interp_type is not None else "linear"}
    return _one(Op("rotate", lambda ctx, op, image, **a: warping.rotate(image, **a), [images], settings,
                   device=_device([images], device), layouts=(images.layout(),), fusable=False))


# ---------------------------------------------------------------------------------------------- color

def _color(operator: str, impl, names: set, layouts: tuple[str, ...] = ("HWC",)):
    def build(images, *, device=None, dtype=None, image_type=None, **args):
        check_args(f"fn.{operator}", args, names)
        _layout(f"fn.{operator}", images, layouts)
        settings = {**args, "dtype": torch_dtype(dtype) if dtype is not None else None}
        return _one(Op(operator, lambda ctx, op, image, **a: impl(image, **a), [images], settings,
                       device=_device([images], device), layouts=(images.layout(),)))
    build.__name__ = operator
    build.__doc__ = f"``fn.{operator}`` ({', '.join(sorted(names))}; per-sample arguments allowed)."
    return build


color_twist = operator("color_twist", "ColorTwist")(
    _color("color_twist", lambda image, **a: colour.color_twist(image, **a),
           {"brightness", "contrast", "hue", "saturation"}))
brightness_contrast = operator("brightness_contrast", "BrightnessContrast")(
    _color("brightness_contrast", lambda image, **a: colour.brightness_contrast(image, **a),
           {"brightness", "brightness_shift", "contrast", "contrast_center"},
           ("HWC", "CHW")))  # per value: the layout does not matter
hsv = operator("hsv", "Hsv")(_color("hsv", lambda image, **a: colour.hsv(image, **a), {"hue", "saturation", "value"}))


@operator("cast", "Cast")
def cast(data, *, dtype, device=None, **args):
    """``fn.cast``: DALI's conversion (floats round to nearest and saturate into integer types)."""
    check_args("fn.cast", args, set())
    target = torch_dtype(dtype)
    return _one(Op("cast", lambda ctx, op, x: conversions.cast(x, target), [data], {},
                   device=_device([data], device), layouts=(data.layout(),)))


def _join(operator: str, stacked: bool):
    def build(*inputs, axis=0, axis_name=None, device=None, **args):
        check_args(f"fn.{operator}", args, set())
        layout = inputs[0].layout()
        if axis_name is not None and not stacked:  # cat: the axis the layout names
            if axis_name not in layout:
                raise ValueError(f"fn.{operator}: axis_name {axis_name!r} is not in layout {layout!r}")
            axis = layout.index(axis_name)
        if stacked:  # stack: axis_name names the new axis, inserted at ``axis`` (DALI: "FHWC" from HWC)
            at = axis + len(layout) + 1 if axis < 0 else axis
            layout = layout[:at] + axis_name + layout[at:] if axis_name is not None and layout else ""

        def run(ctx, op, *values):
            return torch.stack(values, axis) if stacked else torch.cat(values, axis)
        return _one(Op(operator, run, list(inputs), {}, device=_device(inputs, device), layouts=(layout,),
                       fusable=False))
    build.__name__ = operator
    build.__doc__ = f"``fn.{operator}`` of per-sample tensors along ``axis``."
    return build


cat = operator("cat", "Cat")(_join("cat", False))
stack = operator("stack", "Stack")(_join("stack", True))


# --------------------------------------------------------------------------------------------- random

def _shape(shape) -> tuple:
    if shape is None:
        return ()
    return tuple(shape) if isinstance(shape, (list, tuple)) else (int(shape),)


@operator("random.coin_flip", "random.CoinFlip", aliases={"coin_flip": "CoinFlip"}, fused=True)
def random_coin_flip(*, probability=0.5, shape=None, dtype=None, device="cpu", **args):
    """``fn.random.coin_flip``: 1 with ``probability``, else 0; int32 unless ``dtype``."""
    check_args("fn.random.coin_flip", args, set())
    target, dims = torch_dtype(dtype) if dtype is not None else torch.int32, _shape(shape)

    def run(ctx, op, probability):
        rng = ctx.rng(op)
        values = [1 if rng.random() < probability else 0 for _ in range(max(1, _numel(dims)))]
        return torch.tensor(values, dtype=target).reshape(dims)
    return _one(_seeded(Op("random.coin_flip", run, [], {"probability": probability}, device=device), args))


@operator("random.uniform", "random.Uniform", aliases={"uniform": "Uniform"})
def random_uniform(*, range=(-1.0, 1.0), values=None, shape=None, dtype=None, device="cpu", **args):
    """``fn.random.uniform``: uniform in [range[0], range[1]), or one of ``values``; float32 unless ``dtype``."""
    check_args("fn.random.uniform", args, set())
    target, dims = torch_dtype(dtype) if dtype is not None else torch.float32, _shape(shape)
    choices = tuple(values) if values is not None else None

    def run(ctx, op, range):
        rng = ctx.rng(op)
        count = max(1, _numel(dims))
        if choices is not None:
            drawn = [choices[rng.randint(0, len(choices))] for _ in builtins.range(count)]
        else:
            low, high = range
            drawn = [rng.uniform(low, high) for _ in builtins.range(count)]
        return torch.tensor(drawn, dtype=torch.float64).to(target).reshape(dims)
    return _one(_seeded(Op("random.uniform", run, [], {"range": range}, device=device), args))


def _numel(dims: tuple) -> int:
    count = 1
    for d in dims:
        count *= int(d)
    return count


# -------------------------------------------------------------------------------------- external source

class ExternalSourceOp(Op):
    """``fn.external_source``: values fed per batch by the pipeline (from ``source`` or ``feed_input``)."""

    def __init__(self, source, num_outputs, batch, batch_info, cycle, dtypes, layouts, device, name, ndim=None):
        self.source, self.batch, self.batch_info, self.cycle = source, batch, batch_info, cycle
        self.ndim = int(ndim) if ndim is not None else None  # each sample's, checked as fed
        self.output_dtypes, self.feed_name = dtypes, name
        super().__init__("external_source", self._value, [], {}, device=device,
                         num_outputs=num_outputs or 1, layouts=layouts)
        self.grouped = num_outputs is not None

    def _value(self, ctx, op):
        value = ctx.external[self.id]
        return value if self.grouped else (value,)


@operator("external_source", "ExternalSource", positional=("source", "num_outputs"))
def external_source(source=None, num_outputs=None, *, batch=True, batch_info=False, cycle=None, dtype=None,
                    layout=None, device="cpu", name=None, parallel=False, prefetch_queue_depth=1, no_copy=None,
                    blocking=None, ndim=None, **args):
    """``fn.external_source``: a callable, iterable or generator function; or ``feed_input(name, ...)``."""
    check_args("fn.external_source", args, {"repeat_last", "cuda_stream", "use_copy_kernel"})
    if args.get("repeat_last"):
        raise NotImplementedError("fastload.compat.dali: fn.external_source(repeat_last=True) is not supported")
    count = num_outputs or 1
    dtypes = dtype if isinstance(dtype, (list, tuple)) else [dtype] * count
    layouts = layout if isinstance(layout, (list, tuple)) else [layout] * count
    op = ExternalSourceOp(source, num_outputs, bool(batch), bool(batch_info), cycle,
                          [torch_dtype(d) if d is not None else None for d in dtypes],
                          tuple(str(x) if x else "" for x in layouts), device, name, ndim)
    return op.outputs if num_outputs is not None else op.outputs[0]
