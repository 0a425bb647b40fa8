"""The JSON preprocessing pipelines of rocAL's inference-server backend, run by fastload.

AMD's inference server (Xilinx/inference-server, src/amdinfer/workers/rocal.cpp,
docs/backends/rocal.rst) describes a rocAL preprocessing pipeline as JSON:

    {"pipeline": [
        {"operation": "Resize", "dest_width": 224, "dest_height": 224, "is_output": false},
        {"operation": "CropMirrorNormalize", "crop_height": 224, "crop_width": 224, "start_x": 0,
         "start_y": 0, "mean": [0.485, 0.456, 0.406], "std_dev": [0.229, 0.224, 0.225], "is_output": true}]}

Each request's encoded image is decoded as that backend decodes it (TurboJPEG
through rocAL's external source, capped at 1000x1000 by DCT scaling), then
the operations run in order, each on the previous one's output, with the C
API's semantics (rocAL/include/api/rocal_api_augmentation.h at ROCm/rocAL
0981d5bb): NHWC uint8 outputs, mean/std applied to 0-255 pixels as written
(so the example's output saturates, as the backend's does), every output a
fixed-size buffer with the image at its top left. The last operation must be
marked ``is_output``. One key is fastload's own: ``"output_dtype"`` ("uint8",
"float16", "float32") on ResizeMirrorNormalize and CropMirrorNormalize, for a
normalized model input (the backend's uint8 saturates it). A malformed file, an unknown operation, a missing or
mistyped parameter, or an unknown one, is a ValueError naming the file, the
operation's place and the key.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

import torch

from ...errors import DecodeError
from . import imageops

_UINT, _FLOAT, _FLOATS, _BOOL = "a non-negative integer", "a number", "a list of numbers", "true or false"
_DTYPE = '"uint8", "float16" or "float32"'
OUTPUT_DTYPES = {"uint8": torch.uint8, "float16": torch.float16, "float32": torch.float32}

# operation -> (required keys, optional keys, keys the backend reads nowhere and ignores)
OPERATIONS: dict[str, tuple[dict, dict, frozenset]] = {
    "Resize": ({"dest_width": _UINT, "dest_height": _UINT}, {"is_output": _BOOL}, frozenset()),
    "ResizeMirrorNormalize": ({"dest_width": _UINT, "dest_height": _UINT, "mean": _FLOATS, "std_dev": _FLOATS},
                              {"is_output": _BOOL, "mirror": _BOOL, "output_dtype": _DTYPE}, frozenset()),
    "CropResizeFixed": ({"dest_width": _UINT, "dest_height": _UINT, "area": _FLOAT, "aspect_ratio": _FLOAT,
                         "x_center_drift": _FLOAT, "y_center_drift": _FLOAT}, {"is_output": _BOOL}, frozenset()),
    "CropMirrorNormalize": ({"crop_height": _UINT, "crop_width": _UINT, "start_x": _FLOAT, "start_y": _FLOAT,
                             "mean": _FLOATS, "std_dev": _FLOATS},
                            {"is_output": _BOOL, "mirror": _BOOL, "output_dtype": _DTYPE},
                            frozenset({"crop_depth", "start_z"})),
    "CropFixed": ({"crop_width": _UINT, "crop_height": _UINT, "crop_depth": _UINT, "crop_pos_x": _FLOAT,
                   "crop_pos_y": _FLOAT, "crop_pos_z": _FLOAT}, {"is_output": _BOOL}, frozenset()),
    "ResizeCropMirrorFixed": ({"dest_width": _UINT, "dest_height": _UINT, "crop_h": _UINT, "crop_w": _UINT},
                              {"is_output": _BOOL, "mirror": _BOOL}, frozenset()),
}
COLOR_FORMATS = {"RGB24": "RGB", "BGR24": "BGR", "U8": "GRAY"}
MAX_DECODED = 1000  # the backend's external source: ROCAL_USE_USER_GIVEN_SIZE, 1000 x 1000


def _typed(kind: str, value) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == _UINT:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if kind == _FLOAT:
        return number
    if kind == _FLOATS:
        return isinstance(value, list) and bool(value) and all(_typed(_FLOAT, v) for v in value)
    if kind == _DTYPE:
        return value in OUTPUT_DTYPES
    return isinstance(value, bool)


def parse(spec: Any, where: str = "the pipeline") -> list[tuple[str, dict]]:
    """The operations of a JSON pipeline (a dict as json.load gives it), checked: [(name, parameters)]."""
    if not isinstance(spec, dict) or not isinstance(spec.get("pipeline"), list) or not spec["pipeline"]:
        raise ValueError(f"{where}: expected an object with a non-empty \"pipeline\" list of operations")
    operations = []
    for place, node in enumerate(spec["pipeline"]):
        at = f"{where}: operation {place}"
        if not isinstance(node, dict) or not isinstance(node.get("operation"), str):
            raise ValueError(f"{at}: expected an object with an \"operation\" name")
        name = node["operation"]
        if name not in OPERATIONS:
            raise ValueError(f"{at}: unknown operation {name!r} (known: {', '.join(OPERATIONS)})")
        required, optional, ignored = OPERATIONS[name]
        at = f"{at} ({name})"
        for key, kind in required.items():
            if key not in node:
                raise ValueError(f"{at}: missing parameter {key!r} ({kind})")
        for key, value in node.items():
            kind = required.get(key) or optional.get(key)
            if key == "operation" or key in ignored:
                continue
            if kind is None:
                raise ValueError(f"{at}: unknown parameter {key!r} (parameters: "
                                 f"{', '.join([*required, *optional])})")
            if not _typed(kind, value):
                raise ValueError(f"{at}: parameter {key!r} must be {kind}, not {value!r}")
        for key in ("mean", "std_dev"):
            if key in node and len(node[key]) not in (1, 3):
                raise ValueError(f"{at}: {key!r} has one value or three (one per channel), not {len(node[key])}")
        if name in ("Resize", "ResizeMirrorNormalize", "CropResizeFixed", "ResizeCropMirrorFixed") and \
                (node["dest_width"] == 0 or node["dest_height"] == 0):
            raise ValueError(f"{at}: dest_width and dest_height must not be 0")
        operations.append((name, {k: v for k, v in node.items() if k != "operation" and k not in ignored}))
    if not operations[-1][1].get("is_output", False):
        raise ValueError(f"{where}: the last operation ({operations[-1][0]}) must have \"is_output\": true")
    return operations


def _normalize(image: torch.Tensor, mean, std, mirror: bool, dtype: str = "uint8") -> torch.Tensor:
    """(x - mean) / std_dev on 0-255 pixels, as the backend passes them, then to uint8 (rounded,
    saturated: the C API's default output type) or the operation's ``output_dtype``."""
    channels = image.shape[2]
    mean = torch.tensor(mean * channels if len(mean) == 1 else mean[:channels], dtype=torch.float32)
    std = torch.tensor(std * channels if len(std) == 1 else std[:channels], dtype=torch.float32)
    if bool((std == 0).any()):
        raise ValueError("std_dev has a 0")
    out = (image.float() - mean) / std
    return imageops.as_output(out.flip(1) if mirror else out, OUTPUT_DTYPES[dtype])


def _operation(name: str, p: dict) -> tuple[Callable[[torch.Tensor], torch.Tensor], tuple[int, int]]:
    """One operation as a function of an HWC image, and its output buffer (height, width)."""
    linear = "linear"
    if name == "Resize":  # rocalResize's default scaling mode: STRETCH to (dest_width, dest_height)
        return (lambda x: imageops.resample(x, p["dest_width"], p["dest_height"], linear),
                (p["dest_height"], p["dest_width"]))
    if name == "ResizeMirrorNormalize":
        return (lambda x: _normalize(imageops.resample(x, p["dest_width"], p["dest_height"], linear), p["mean"],
                                     p["std_dev"], p.get("mirror", False), p.get("output_dtype", "uint8")),
                (p["dest_height"], p["dest_width"]))
    if name == "CropResizeFixed":
        return (lambda x: imageops.crop_resize(x, p["area"], p["aspect_ratio"], p["x_center_drift"],
                                               p["y_center_drift"], p["dest_width"], p["dest_height"]),
                (p["dest_height"], p["dest_width"]))
    if name == "CropMirrorNormalize":  # start_x/start_y: the window's anchor, as crop_pos_x/y
        def crop_mirror_normalize(x):
            left, top, w, h = imageops.anchored_crop(x.shape[1], x.shape[0], p["crop_width"], p["crop_height"],
                                                     p["start_x"], p["start_y"])
            return _normalize(x[top:top + h, left:left + w], p["mean"], p["std_dev"], p.get("mirror", False),
                              p.get("output_dtype", "uint8"))
        return crop_mirror_normalize, (p["crop_height"], p["crop_width"])
    if name == "CropFixed":  # whole-pixel offsets (CropNode::init)
        def crop_fixed(x):
            left, top, w, h = imageops.fixed_crop(x.shape[1], x.shape[0], p["crop_width"], p["crop_height"],
                                                  p["crop_pos_x"], p["crop_pos_y"])
            return x[top:top + h, left:left + w]
        return crop_fixed, (p["crop_height"], p["crop_width"])

    return (lambda x: imageops.resize_crop_mirror(x, p["crop_w"], p["crop_h"], p["dest_width"], p["dest_height"],
                                                  p.get("mirror", False)),  # ResizeCropMirrorFixed
            (p["dest_height"], p["dest_width"]))


class JsonPipeline:
    """A rocAL inference-server JSON pipeline: ``pipeline(images)`` maps encoded images (one per request)
    to one NHWC output tensor per image, on ``device``, ``batch`` at a time.

    Args:
        path_or_dict: a ``.json`` file, or the pipeline as a dict.
        batch: how many images one call processes together at most (the backend's ``batch``).
        device: where the outputs go ("cpu", "cuda", ...).
        color_format: the backend's RGB24 (default), BGR24 or U8 (grayscale).
    """

    def __init__(self, path_or_dict, batch: int = 64, device="cpu", color_format: str = "RGB24"):
        if isinstance(path_or_dict, (str, os.PathLike)):
            path = os.fspath(path_or_dict)
            if not path.endswith(".json"):
                raise ValueError(f"{path}: a JSON pipeline's file name ends in .json (as the backend requires)")
            try:
                with open(path) as file:
                    spec = json.load(file)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: not valid JSON: {error}") from None
            self.operations = parse(spec, path)
        else:
            self.operations = parse(path_or_dict)
        if color_format not in COLOR_FORMATS:
            raise ValueError(f"color_format {color_format!r}: one of {', '.join(COLOR_FORMATS)}")
        if batch < 1:
            raise ValueError("batch must be positive")
        self.batch, self.device, self.color = batch, torch.device(device), COLOR_FORMATS[color_format]
        self._steps = [_operation(name, params) for name, params in self.operations]
        channels = 1 if self.color == "GRAY" else 3
        self.output_shape = (*self._steps[-1][1], channels)

    def __call__(self, images: list, on_error: str = "raise") -> list:
        """Outputs for ``images`` (encoded bytes each). ``on_error="raise"``: a DecodeError naming the first
        bad image's place; ``"return"``: that image's place holds the error instead of a tensor."""
        if on_error not in ("raise", "return"):
            raise ValueError("on_error is 'raise' or 'return'")
        outputs = []
        for start in range(0, len(images), self.batch):
            for index, data in enumerate(images[start:start + self.batch], start):
                try:
                    outputs.append(self.one(data, index).to(self.device))
                except DecodeError as error:
                    if on_error == "raise":
                        raise
                    outputs.append(error)
        return outputs

    def one(self, data, index: int = 0) -> torch.Tensor:
        """One encoded image's output, (height, width, channels)."""
        name = f"request {index}"
        try:
            image = imageops.decode(bytes(data), self.color, MAX_DECODED, MAX_DECODED)
        except Exception as error:
            raise DecodeError(index, name, f"cannot decode: {error}") from error
        for step, _ in self._steps:
            image = step(image)
        out = torch.zeros(self.output_shape, dtype=image.dtype)
        out[:image.shape[0], :image.shape[1]] = image  # the buffer, the image at its top left
        return out
