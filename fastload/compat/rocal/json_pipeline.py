"""The JSON preprocessing pipelines of rocAL's inference-server backend, run by fastload.

AMD's inference server (Xilinx/inference-server, src/amdinfer/workers/rocal.cpp,
docs/backends/rocal.rst) describes a rocAL preprocessing pipeline as JSON:

    {"pipeline": [
        {"operation": "Resize", "dest_width": 224, "dest_height": 224, "is_output": false},
        {"operation": "CropMirrorNormalize", "crop_height": 224, "crop_width": 224, "start_x": 0,
         "start_y": 0, "mean": [0.485, 0.456, 0.406], "std_dev": [0.229, 0.224, 0.225], "is_output": true}]}

Each request's encoded image is decoded as that backend decodes it (TurboJPEG
through rocAL's external source with ROCAL_USE_USER_GIVEN_SIZE at 1000x1000:
the largest DCT scale from 2/1 down to 1/8 that fits, so a 500x375 JPEG
decodes at 1000x750 and a 1200x900 one at 3/4, 900x675), then
the operations run in order, each on the previous one's output, with the C
API's semantics (rocAL/include/api/rocal_api_augmentation.h at ROCm/rocAL
0981d5bb): NHWC uint8 outputs, mean/std applied to 0-255 pixels as written
(so the example's output saturates, as the backend's does), every output a
fixed-size buffer with the image at its top left. The last operation must be
marked ``is_output``. One key is fastload's own: ``"output_dtype"`` ("uint8",
"float16", "float32") on ResizeMirrorNormalize and CropMirrorNormalize, for a
normalized model input (the backend's uint8 saturates it).

A file or dict the backend would refuse, or fastload cannot run, is a
``PipelineSpecError`` (a ValueError) naming the file, the operation's place
and name, and the key: a file that is not UTF-8 or not JSON (nested too deeply
included), an unknown operation, a missing, mistyped or unknown parameter, or
a value outside these bounds, checked when the pipeline is made so that no
request can meet them:

- output sizes (dest_width, dest_height, crop_width, crop_height, crop_w,
  crop_h) are whole numbers from 1 to ``MAX_SIDE`` (4096): a decoded image is
  at most 1000 x 1000, and a 4096 x 4096 x 3 float32 output is 201 MB per
  image; 10^9 would make every call try to allocate gigabytes;
- CropMirrorNormalize's start_x, start_y and CropResizeFixed's drifts are from
  0 to 1. rocAL places the window at ``(size_t) nearbyintf(anchor * (side -
  crop))`` (parameter_rocal_crop.cpp, RocalCropParam::fill_crop_dims) and clamps
  nothing else: only an anchor in [0, 1] keeps the window inside the image (a
  negative one is an undefined float-to-unsigned cast in C++, one above 1 starts
  the window past the image's edge), so fastload refuses the others rather than
  guess what rocAL's build would do;
- CropFixed's crop_pos_x, crop_pos_y are pixel offsets of at least 0 (rocAL's
  rule for one past the image, kept: it is 0); area is above 0 and at most 1,
  aspect_ratio from 1/1000 to 1000 (past those no window fits a 1000-pixel
  image);
- mean and std_dev values are finite with magnitude at most 10^6, and std_dev at
  least 10^-6 (never 0, never negative); NaN and Infinity (which Python's JSON
  reader accepts) are refused, as is every non-finite number.

Most pipelines are one crop of the decoded image resized with plain bilinear
sampling, then a window of that, a mirror and a normalization: what
``fastload.kernels.augment`` does in one pass. Those are lowered (``Fused``)
and run as one fused step per batch: the Triton kernel on a GPU
(``antialias=False``; decoded on the CPU by rocAL's rule, uploaded), or on the
CPU torch's uint8 bilinear resize (the kernel's arithmetic within a rounding)
and the window, mirror and normalization on the small result; without triton
a GPU gets the CPU's step, copied. RPP's bilinear never reads a region's last
row or column (its taps stop at side - 2), so the step reads a copy of the
region with those replaced by the ones before them (``_capped``). Their values
equal RPP's within one level (RPP truncates the last ``width % 8`` columns of
a row where it rounds the others). Everything else, and any pipeline with
``exact=True``, runs operator by operator on RPP's exact arithmetic
(``imageops``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from PIL import UnidentifiedImageError

from fastload.kernels import augment

from ...errors import DecodeError
from . import imageops

MAX_SIDE = 4096  # the largest output side a pipeline may ask for (see the module's docstring)
MAX_NORM = 1e6  # the largest magnitude of a mean or std_dev value, and 1 / the smallest std_dev
_SIZE = f"a whole number from 1 to {MAX_SIDE}"
_UINT, _FLOAT, _BOOL = "a non-negative integer", "a finite number", "true or false"
_UNIT, _OFFSET = "a number from 0 to 1", "a finite number of at least 0"
_AREA, _RATIO = "a number above 0 and at most 1", "a number from 0.001 to 1000"
_FLOATS = f"a list of finite numbers of magnitude at most {MAX_NORM:g}"
_DTYPE = '"uint8", "float16" or "float32"'
OUTPUT_DTYPES = {"uint8": torch.uint8, "float16": torch.float16, "float32": torch.float32}

def _dtype(p: dict) -> torch.dtype:
    """An operation's output type: its ``output_dtype``, else uint8 (rounded, saturated: the C API's default)."""
    return OUTPUT_DTYPES[p.get("output_dtype", "uint8")]


@dataclass(frozen=True)
class JsonOperation:
    """One operation of the JSON pipeline, declared once: its ``name`` in the JSON, the rocAL operator it
    is (``rocal``: the C API's rocal<Name> is fn.<rocal>, checked against ``spec.OPERATORS`` by the tests),
    its ``required`` and ``optional`` keys (key -> what its value must be), the keys the backend reads
    nowhere and ignores, ``step(p)``: the operation as a function of an HWC image, and ``buffer(p)``: its
    output buffer (height, width)."""

    name: str
    rocal: str
    required: dict
    optional: dict
    step: Callable[[dict], Callable[[torch.Tensor], torch.Tensor]]
    buffer: Callable[[dict], tuple[int, int]]
    ignored: frozenset = frozenset()


def _dest(p: dict) -> tuple[int, int]:
    return p["dest_height"], p["dest_width"]


def _crop_mirror_normalize(p: dict):
    def run(x):  # start_x/start_y: the window's anchor, as crop_pos_x/y
        left, top, w, h = imageops.anchored_crop(x.shape[1], x.shape[0], p["crop_width"], p["crop_height"],
                                                 p["start_x"], p["start_y"])
        return imageops.normalize(x[top:top + h, left:left + w], p["mean"], p["std_dev"], p.get("mirror", False),
                                  _dtype(p))
    return run


def _crop_fixed(p: dict):
    def run(x):  # whole-pixel offsets (CropNode::init)
        left, top, w, h = imageops.fixed_crop(x.shape[1], x.shape[0], p["crop_width"], p["crop_height"],
                                              p["crop_pos_x"], p["crop_pos_y"])
        return x[top:top + h, left:left + w]
    return run


JSON_OPERATIONS = (
    JsonOperation(  # rocalResize's default scaling mode: STRETCH to (dest_width, dest_height)
        "Resize", "resize", {"dest_width": _SIZE, "dest_height": _SIZE}, {"is_output": _BOOL},
        lambda p: lambda x: imageops.resample(x, p["dest_width"], p["dest_height"], "linear"), _dest),
    JsonOperation(
        "ResizeMirrorNormalize", "resize_mirror_normalize",
        {"dest_width": _SIZE, "dest_height": _SIZE, "mean": _FLOATS, "std_dev": _FLOATS},
        {"is_output": _BOOL, "mirror": _BOOL, "output_dtype": _DTYPE},
        lambda p: lambda x: imageops.normalize(imageops.resample(x, p["dest_width"], p["dest_height"], "linear"),
                                               p["mean"], p["std_dev"], p.get("mirror", False), _dtype(p)), _dest),
    JsonOperation(
        "CropResizeFixed", "resize_crop",
        {"dest_width": _SIZE, "dest_height": _SIZE, "area": _AREA, "aspect_ratio": _RATIO, "x_center_drift": _UNIT,
         "y_center_drift": _UNIT}, {"is_output": _BOOL},
        lambda p: lambda x: imageops.crop_resize(x, p["area"], p["aspect_ratio"], p["x_center_drift"],
                                                 p["y_center_drift"], p["dest_width"], p["dest_height"]), _dest),
    JsonOperation(
        "CropMirrorNormalize", "crop_mirror_normalize",
        {"crop_height": _SIZE, "crop_width": _SIZE, "start_x": _UNIT, "start_y": _UNIT, "mean": _FLOATS,
         "std_dev": _FLOATS}, {"is_output": _BOOL, "mirror": _BOOL, "output_dtype": _DTYPE},
        _crop_mirror_normalize, lambda p: (p["crop_height"], p["crop_width"]), frozenset({"crop_depth", "start_z"})),
    JsonOperation(
        "CropFixed", "crop",
        {"crop_width": _SIZE, "crop_height": _SIZE, "crop_depth": _UINT, "crop_pos_x": _OFFSET, "crop_pos_y": _OFFSET,
         "crop_pos_z": _FLOAT}, {"is_output": _BOOL}, _crop_fixed, lambda p: (p["crop_height"], p["crop_width"])),
    JsonOperation(
        "ResizeCropMirrorFixed", "resize_crop_mirror",
        {"dest_width": _SIZE, "dest_height": _SIZE, "crop_h": _SIZE, "crop_w": _SIZE}, {"is_output": _BOOL,
                                                                                         "mirror": _BOOL},
        lambda p: lambda x: imageops.resize_crop_mirror(x, p["crop_w"], p["crop_h"], p["dest_width"],
                                                        p["dest_height"], p.get("mirror", False)), _dest),
)
OPERATIONS: dict[str, JsonOperation] = {op.name: op for op in JSON_OPERATIONS}  # the declarations by name
COLOR_FORMATS = {"RGB24": "RGB", "BGR24": "BGR", "U8": "GRAY"}
MAX_DECODED = 1000  # the backend's external source: ROCAL_USE_USER_GIVEN_SIZE, 1000 x 1000


class PipelineSpecError(ValueError):
    """A JSON pipeline the backend would refuse or fastload cannot run. Its message names ``file`` (the
    file's path, or "the pipeline" for a dict), the operation's ``place`` and ``operation`` name and the
    ``key``, where there is one (None where not: a file that is not JSON has neither). A server answers it
    as the client's error (400), never as its own (500)."""

    def __init__(self, file: str, message: str, place: int | None = None, operation: str | None = None,
                 key: str | None = None):
        self.file, self.place, self.operation, self.key = file, place, operation, key
        at = file if place is None else f"{file}: operation {place}" + (f" ({operation})" if operation else "")
        super().__init__(f"{at}: {message}")


def _real(value) -> float | None:
    """``value`` as a finite float; None for a bool, a non-number, NaN, an infinity or an int past floats."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _typed(kind: str, value) -> bool:
    real = _real(value)
    if kind == _SIZE:
        return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SIDE
    if kind == _UINT:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if kind == _FLOAT:
        return real is not None
    if kind == _UNIT:
        return real is not None and 0 <= real <= 1
    if kind == _OFFSET:
        return real is not None and real >= 0
    if kind == _AREA:
        return real is not None and 0 < real <= 1
    if kind == _RATIO:
        return real is not None and 1e-3 <= real <= 1e3
    if kind == _FLOATS:
        return isinstance(value, list) and bool(value) and all(
            (v := _real(item)) is not None and abs(v) <= MAX_NORM for item in value)
    if kind == _DTYPE:
        return isinstance(value, str) and value in OUTPUT_DTYPES
    return isinstance(value, bool)


def _shown(value) -> str:
    """``value`` for a message, at most 80 characters (an int of 5000 digits has no repr)."""
    try:
        text = repr(value)
    except ValueError:
        return f"an integer of {value.bit_length()} bits"
    return text if len(text) <= 80 else f"{text[:77]}..."


def parse(spec: Any, where: str = "the pipeline") -> list[tuple[str, dict]]:
    """The operations of a JSON pipeline (a dict as json.load gives it), checked: [(name, parameters)]. A
    PipelineSpecError naming ``where``, the operation and the key for anything the module's docstring
    refuses."""
    if not isinstance(spec, dict) or not isinstance(spec.get("pipeline"), list) or not spec["pipeline"]:
        raise PipelineSpecError(where, "expected an object with a non-empty \"pipeline\" list of operations",
                                key="pipeline")
    operations = []
    for place, node in enumerate(spec["pipeline"]):
        if not isinstance(node, dict) or not isinstance(node.get("operation"), str):
            raise PipelineSpecError(where, "expected an object with an \"operation\" name", place,
                                    key="operation")
        name = node["operation"]
        if name not in OPERATIONS:
            raise PipelineSpecError(where, f"unknown operation {_shown(name)} (known: {', '.join(OPERATIONS)})",
                                    place, key="operation")
        declared = OPERATIONS[name]
        required, optional, ignored = declared.required, declared.optional, declared.ignored

        def refuse(key: str, message: str):
            raise PipelineSpecError(where, message, place, name, key)
        for key, kind in required.items():
            if key not in node:
                refuse(key, f"missing parameter {key!r} ({kind})")
        for key, value in node.items():
            kind = required.get(key) or optional.get(key)
            if key == "operation" or key in ignored:
                continue
            if kind is None:
                refuse(key, f"unknown parameter {_shown(key)} (parameters: {', '.join([*required, *optional])})")
            if not _typed(kind, value):
                refuse(key, f"parameter {key!r} must be {kind}, not {_shown(value)}")
        for key in ("mean", "std_dev"):
            if key in node and len(node[key]) not in (1, 3):
                refuse(key, f"{key!r} has one value or three (one per channel), not {len(node[key])}")
        if any(float(v) < 1 / MAX_NORM for v in node.get("std_dev", ())):
            refuse("std_dev", f"'std_dev' has {_shown(min(node['std_dev']))}: each value must be at least "
                              f"{1 / MAX_NORM:g} (every output divides by it)")
        operations.append((name, {k: v for k, v in node.items() if k != "operation" and k not in ignored}))
    if not operations[-1][1].get("is_output", False):
        raise PipelineSpecError(where, f"the last operation ({operations[-1][0]}) must have \"is_output\": true",
                                len(operations) - 1, operations[-1][0], "is_output")
    return operations


def _operation(name: str, p: dict) -> tuple[Callable[[torch.Tensor], torch.Tensor], tuple[int, int]]:
    """One operation as a function of an HWC image, and its output buffer (height, width)."""
    operation = OPERATIONS[name]
    return operation.step(p), operation.buffer(p)


@dataclass(frozen=True)
class Fused:
    """A lowered pipeline: ``box`` of each decoded image ((width, height) -> (x, y, w, h)), resized to
    ``resize`` (height, width) with plain bilinear sampling; of that the ``window`` (top, left, height, width),
    mirrored, then ``(x - mean) / std`` in ``dtype`` (no normalization where ``mean`` is None: uint8)."""

    box: Callable[[int, int], tuple[int, int, int, int]]
    resize: tuple[int, int]
    window: tuple[int, int, int, int]
    mirror: bool = False
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None
    dtype: str = "uint8"

    def region(self, image: torch.Tensor) -> torch.Tensor:
        """The image's crop window (a view); a ValueError if it is empty."""
        x, y, w, h = self.box(image.shape[1], image.shape[0])
        if w < 1 or h < 1:
            raise ValueError(f"its crop window of a {image.shape[1]}x{image.shape[0]} image is empty ({w}x{h})")
        return image[y:y + h, x:x + w]


def _whole(width: int, height: int) -> tuple[int, int, int, int]:
    return 0, 0, width, height


def _rgb(values) -> tuple[float, float, float]:
    return tuple(imageops.per_channel(values, 3))


def lower(operations: list[tuple[str, dict]], color: str) -> Fused | str:
    """The pipeline as one fused step, or why it runs operator by operator."""
    if color != "RGB":
        return f"its color format is {color}, not RGB"
    if len(operations) > 2:
        return "it has more than two operations"
    (first, p), rest = operations[0], operations[1:]
    size = (p.get("dest_height"), p.get("dest_width"))
    if first == "Resize":
        fused = Fused(_whole, size, (0, 0, *size))
    elif first == "CropResizeFixed":
        fused = Fused(lambda w, h: imageops.crop_resize_window(w, h, p["area"], p["aspect_ratio"],
                                                               p["x_center_drift"], p["y_center_drift"]),
                      size, (0, 0, *size))
    elif first in ("ResizeMirrorNormalize", "ResizeCropMirrorFixed") and rest:
        return f"{rest[0][0]} follows {first}"
    elif first == "ResizeMirrorNormalize":
        return Fused(_whole, size, (0, 0, *size), p.get("mirror", False), _rgb(p["mean"]), _rgb(p["std_dev"]),
                     p.get("output_dtype", "uint8"))
    elif first == "ResizeCropMirrorFixed":
        return Fused(lambda w, h: imageops.fixed_crop(w, h, p["crop_w"], p["crop_h"], 0, 0), size, (0, 0, *size),
                     p.get("mirror", False))
    else:
        return f"it starts with {first}"
    if not rest:
        return fused
    (second, q), (height, width) = rest[0], size
    if second == "CropMirrorNormalize":
        if not (0 < q["crop_width"] <= width and 0 < q["crop_height"] <= height):
            return "its CropMirrorNormalize window is not inside the resized image"
        left, top, w, h = imageops.anchored_crop(width, height, q["crop_width"], q["crop_height"], q["start_x"],
                                                 q["start_y"])
        return Fused(fused.box, size, (top, left, h, w), q.get("mirror", False), _rgb(q["mean"]),
                     _rgb(q["std_dev"]), q.get("output_dtype", "uint8"))
    if second == "CropFixed":
        left, top, w, h = imageops.fixed_crop(width, height, q["crop_width"], q["crop_height"], q["crop_pos_x"],
                                              q["crop_pos_y"])
        if (w, h) != (q["crop_width"], q["crop_height"]):
            return "its CropFixed window is not inside the resized image"
        return Fused(fused.box, size, (top, left, h, w))
    return f"{second} follows {first}"


def _capped(region: torch.Tensor, owned: bool = False) -> torch.Tensor:
    """The region as RPP's bilinear resize reads it: its taps stop at side - 2 (resize.cpp: maxHeightLimit,
    maxWidthLimit), so the last row and column count as copies of the ones before them. With those copied
    in, torch's bilinear and the kernel read what RPP reads. ``owned``: the region's image is the caller's
    to overwrite (a decode nothing else holds), so the copies are written into it rather than into a clone
    of the whole region (a 1000x750 image's clone is about a fifth of the batcher's time an image)."""
    if not owned:
        region = region.clone()
    # (a 1-pixel side: RPP's cap is -1 there, a read outside; fastload reads the pixel)
    if region.shape[0] >= 2:
        region[-1] = region[-2]
    if region.shape[1] >= 2:
        region[:, -1] = region[:, -2]
    return region


def run_fused(images: list[torch.Tensor], fused: Fused, device: torch.device,
              kernel: bool | None = None, owned: bool = False) -> torch.Tensor:
    """``fused`` on decoded HWC uint8 images: an (N, height, width, 3) batch on ``device``. With ``kernel``
    (default: on a CUDA or ROCm device, where triton is) the fused kernel runs on the batch; else the CPU
    runs, per image, torch's uint8 bilinear resize and the rest on its result, then copies it to ``device``.
    An image whose crop window is empty is a ValueError. ``owned``: the images are the caller's to overwrite
    (``_capped``); their pixels outside the last row and column stay as they were."""
    top, left, height, width = fused.window
    out_dtype = OUTPUT_DTYPES[fused.dtype]
    regions = [_capped(fused.region(image), owned) for image in images]
    if kernel is None:
        kernel = device.type == "cuda" and augment.triton is not None
    if kernel:
        with torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext():  # triton's device
            sources = [region.to(device).permute(2, 0, 1) for region in regions]
            params = augment.AugmentParams.make([(0, 0, r.shape[0], r.shape[1]) for r in regions],
                                                [(fused.mirror, 0)] * len(regions), device=device,
                                                windows=[(*fused.resize, top, left)] * len(regions))
            if fused.mean is None:
                return augment.augment_batch(sources, params, (height, width), torch.uint8, channels_last=True,
                                             antialias=False).permute(0, 2, 3, 1)
            scale = [1 / s for s in fused.std]
            shift = [-m / s for m, s in zip(fused.mean, fused.std)]
            dtype = torch.float32 if out_dtype == torch.uint8 else out_dtype
            out = augment.augment_batch(sources, params, (height, width), dtype, scale, shift, channels_last=True,
                                        antialias=False).permute(0, 2, 3, 1)
            return imageops.as_output(out, out_dtype)
    outputs = []
    for region in regions:
        resized = F.interpolate(region.permute(2, 0, 1)[None], size=fused.resize, mode="bilinear",
                                align_corners=False, antialias=False)  # (a channels_last view: torch's fast path)
        out = resized[0, :, top:top + height, left:left + width].permute(1, 2, 0)
        out = out.flip(1) if fused.mirror else out
        if fused.mean is not None:
            out = imageops.as_output((out.float() - torch.tensor(fused.mean)) / torch.tensor(fused.std), out_dtype)
        outputs.append(out)
    return torch.stack(outputs).to(device)


def load(path: str) -> Any:
    """A JSON pipeline file's contents: a PipelineSpecError naming ``path`` where it is not UTF-8 or not JSON
    (nested too deeply, a number of more digits than Python reads, included); an OSError where it cannot be
    read."""
    with open(path, "rb") as file:
        raw = file.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PipelineSpecError(path, f"not UTF-8 text (byte {error.start} is "
                                      f"{raw[error.start:error.start + 1]!r}); a JSON pipeline is UTF-8") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise PipelineSpecError(path, f"not valid JSON: {error}") from None
    except RecursionError:
        raise PipelineSpecError(path, "not valid JSON for a pipeline: nested too deeply to read") from None
    except ValueError as error:  # e.g. an integer of more digits than int() reads
        raise PipelineSpecError(path, f"not valid JSON for a pipeline: {error}") from None


class JsonPipeline:
    """A rocAL inference-server JSON pipeline: ``pipeline(images)`` maps encoded images (one per request)
    to one NHWC output tensor per image, on ``device``, ``batch`` at a time.

    Args:
        path_or_dict: a ``.json`` file, or the pipeline as a dict.
        batch: how many images one call processes together at most (the backend's ``batch``).
        device: where the outputs go ("cpu", "cuda", ...).
        color_format: the backend's RGB24 (default), BGR24 or U8 (grayscale).
        exact: run every pipeline operator by operator on RPP's arithmetic, none as a fused step (see the
            module's docstring for where the two differ).
    """

    def __init__(self, path_or_dict, batch: int = 64, device="cpu", color_format: str = "RGB24",
                 exact: bool = False):
        if isinstance(path_or_dict, (str, os.PathLike)):
            path = os.fspath(path_or_dict)
            if not path.endswith(".json"):
                raise PipelineSpecError(path, "a JSON pipeline's file name ends in .json (as the backend requires)")
            self.operations = parse(load(path), path)
        else:
            self.operations = parse(path_or_dict)
        if color_format not in COLOR_FORMATS:
            raise ValueError(f"color_format {color_format!r}: one of {', '.join(COLOR_FORMATS)}")
        imageops.require_dct_scaling("a JSON pipeline (the backend decodes with USER_GIVEN_SIZE)")
        if batch < 1:
            raise ValueError("batch must be positive")
        self.batch, self.device, self.color = batch, torch.device(device), COLOR_FORMATS[color_format]
        self._steps = [_operation(name, params) for name, params in self.operations]
        channels = 1 if self.color == "GRAY" else 3
        self.output_shape = (*self._steps[-1][1], channels)
        # what the last operation gives: uint8 unless it normalizes to fastload's float output_dtype
        self.output_dtype = OUTPUT_DTYPES[self.operations[-1][1].get("output_dtype", "uint8")]
        lowered = "exact=True" if exact else lower(self.operations, self.color)
        # a Fused step, or why the pipeline runs operator by operator
        self.fused, self.unfused_reason = (lowered, None) if isinstance(lowered, Fused) else (None, lowered)

    def __call__(self, images: list, on_error: str = "raise", names: list[str] | None = None) -> list:
        """Outputs for ``images`` (encoded bytes each), ``batch`` at a time (a fused step's outputs are views
        of its batch's tensor). ``on_error="raise"``: a DecodeError naming the first image of a batch that
        cannot be decoded or preprocessed (an empty crop window), once that batch is done; ``"return"``:
        that image's place holds the error instead of a tensor. ``names``: one per image, what errors call
        it (default "request <its place>")."""
        if on_error not in ("raise", "return"):
            raise ValueError("on_error is 'raise' or 'return'")
        if names is None:
            names = [f"request {index}" for index in range(len(images))]
        elif len(names) != len(images):
            raise ValueError(f"{len(names)} names for {len(images)} images")
        outputs: list = []
        for start in range(0, len(images), self.batch):
            results = self._run([(index, names[index], data)
                                 for index, data in enumerate(images[start:start + self.batch], start)])
            failed = next((out for out in results if isinstance(out, DecodeError)), None)
            if failed is not None and on_error == "raise":
                raise failed
            outputs.extend(results)
        return outputs

    def one(self, data, index: int = 0) -> torch.Tensor:
        """One encoded image's output, (height, width, channels), on ``device``; a DecodeError naming
        ``index`` if it cannot be decoded or preprocessed."""
        (out,) = self._run([(index, f"request {index}", data)])
        if isinstance(out, DecodeError):
            raise out
        return out

    def _run(self, items: list[tuple[int, str, Any]]) -> list:
        """(place, name, encoded bytes) each, decoded and processed as one batch: each one's output, or its
        DecodeError."""
        decoded = [(index, name, self._decode(data, index, name)) for index, name, data in items]
        done = iter(self._process([item for item in decoded if not isinstance(item[2], DecodeError)]))
        return [image if isinstance(image, DecodeError) else next(done) for _, _, image in decoded]

    def _decode(self, data, index: int, name: str) -> torch.Tensor | DecodeError:
        try:
            return imageops.decode(bytes(data), self.color, MAX_DECODED, MAX_DECODED, keep_original=False)
        except Exception as error:
            reason = (f"not an image format Pillow reads ({len(data)} bytes starting {bytes(data[:8])!r}; an "
                      f"HTTP body must be the image's bytes, not a form)" if isinstance(error, UnidentifiedImageError)
                      else str(error))  # (Pillow's own message names a BytesIO object)
            failed = DecodeError(index, name, f"cannot decode: {reason}")
            failed.__cause__ = error
            return failed

    def _process(self, items: list[tuple[int, str, torch.Tensor]]) -> list:
        """The operations on decoded images, (place, name, image) each: one fused step for the batch, or
        operator by operator; an image they cannot process (a ValueError: an empty crop window) gets its
        DecodeError, the others their outputs. The images are its own decodes (``_decode``'s), which the fused
        step overwrites in place of a copy (``run_fused``'s ``owned``)."""
        if not items:
            return []
        if self.fused is not None:
            refused = {}
            for index, name, image in items:  # (so that one image does not fail its batch's step)
                try:
                    self.fused.region(image)
                except ValueError as error:
                    refused[index] = DecodeError(index, name, f"cannot preprocess: {error}")
            kept = [image for index, _, image in items if index not in refused]
            done = iter(run_fused(kept, self.fused, self.device, owned=True).unbind(0) if kept else ())
            return [refused[index] if index in refused else next(done) for index, _, _ in items]
        outputs: list = []
        for index, name, image in items:
            try:
                for step, _ in self._steps:
                    image = step(image)
            except ValueError as error:
                outputs.append(DecodeError(index, name, f"cannot preprocess: {error}"))
                continue
            out = torch.zeros(self.output_shape, dtype=image.dtype)
            out[:image.shape[0], :image.shape[1]] = image  # the buffer, the image at its top left
            outputs.append(out.to(self.device))
        return outputs
