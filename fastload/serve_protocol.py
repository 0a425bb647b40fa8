"""The Open Inference Protocol's tensors and errors, as both of fastload serve's APIs (REST and gRPC) read
and write them: the request's BYTES input of encoded images, the outputs' datatypes and raw bytes, and the
error that answers a request with a status other than 200. No HTTP and no models here: serve.py (the REST
server), serve_grpc.py and serve_model.py build on it.
"""

from __future__ import annotations

import base64
import json
import math
import secrets
import struct
import unicodedata
from typing import Callable

import torch

from .serve_limits import (MAX_BATCH_SIZE, MAX_CLASSIFICATION, MAX_DIGITS, MAX_JSON_DEPTH, MAX_JSON_VALUES,
                           MAX_NAME, MAX_QUEUE_DELAY_US, MAX_SHAPE_RANK)

DTYPES = {torch.uint8: "UINT8", torch.float16: "FP16", torch.float32: "FP32"}
PROTOCOL_EXTENSIONS = ["binary_tensor_data", "classification", "model_repository", "statistics"]
ONE_INPUT = "expected {\"inputs\": [one BYTES tensor named \"images\"]}"  # (either protocol's request)


class RequestError(ValueError):
    """An answer other than 200: its status and reason."""

    def __init__(self, status: int, reason: str, headers: dict | None = None):
        super().__init__(reason)
        self.status, self.reason, self.headers = status, reason, headers or {}


def parse_bytes_tensor(data: bytes, limit: int = MAX_BATCH_SIZE) -> list[bytes]:
    """Triton's binary BYTES tensor: each element a 4-byte little-endian length and its bytes. More than
    ``limit`` elements is 400 as soon as the one past it is reached (five million empty elements fit in
    20 MiB: parsing them all would hold the event loop for seconds)."""
    elements, offset = [], 0
    while offset < len(data):
        if len(elements) == limit:
            raise RequestError(400, f"a BYTES tensor of more than {limit} elements: the limit")
        if offset + 4 > len(data):
            raise RequestError(400, "a BYTES tensor ends inside an element's 4-byte length")
        (length,) = struct.unpack_from("<I", data, offset)
        offset += 4
        if offset + length > len(data):
            raise RequestError(400, f"a BYTES element of {length} bytes runs past the tensor's end")
        elements.append(data[offset:offset + length])
        offset += length
    return elements


def _flatten(data, limit: int) -> list:
    """A JSON tensor's nested lists as one list, without recursion (a body nested 950 deep is valid JSON) and
    at most ``limit`` elements or MAX_JSON_DEPTH levels deep."""
    flat, stack = [], [(iter(data), 1)]
    while stack:
        items, depth = stack[-1]
        for item in items:
            if isinstance(item, list):
                if depth >= MAX_JSON_DEPTH:
                    raise RequestError(400, f"a tensor's data nested over {MAX_JSON_DEPTH} deep")
                stack.append((iter(item), depth + 1))
                break
            if len(flat) == limit:
                raise RequestError(400, f"a tensor of more than {limit} elements: the limit")
            flat.append(item)
        else:
            stack.pop()
    return flat


def _base64(text) -> bytes:
    """A base64 string's bytes, decoded 1 MiB of text a call (a thread decoding a 14 MB image lets the event
    loop run between calls); a TypeError or ValueError if it is not one."""
    if not isinstance(text, str):
        raise TypeError("not a string")
    step = 1 << 20  # (a multiple of 4: each slice is whole base64 quanta)
    return b"".join(base64.b64decode(text[i:i + step], validate=True) for i in range(0, len(text), step))


def load_json(body: bytes, what: str):
    """``body`` parsed as JSON, its size of work bounded first: more than MAX_JSON_VALUES commas and colons
    (counted in the bytes: a few ms for 20 MiB) is 400 before json.loads could hold the event loop for
    long; a document nested past the parser's depth is 400 too."""
    values = body.count(b",") + body.count(b":")
    if values > MAX_JSON_VALUES:
        raise RequestError(400, f"{what} holds over {MAX_JSON_VALUES} JSON values: the limit")
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as error:
        raise RequestError(400, f"{what} is not JSON: {error}") from None


def parameters_of(holder: dict, where: str) -> dict:
    """The ``parameters`` object of a request, an input or an output ({} if absent); anything but a JSON
    object is 400."""
    parameters = holder.get("parameters")
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise RequestError(400, f"{where}'s \"parameters\" must be a JSON object, not {type(parameters).__name__}")
    return parameters


def flag(parameters: dict, key: str, default: bool = False) -> bool:
    """A boolean parameter (binary_data, binary_data_output): true or false, nothing else."""
    value = parameters.get(key, default)
    if not isinstance(value, bool):
        raise RequestError(400, f"parameter {key!r}={_shown(value)}: true or false")
    return value


def integer(value, name: str, low: int, high: int) -> int:
    """``value`` as a whole number in [low, high]: a JSON integer or a string of digits (gRPC's string
    parameters carry numbers as text); a boolean (an int in Python), a float or anything else is 400 naming
    ``name``."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= MAX_DIGITS:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RequestError(400, f"{name}={_shown(value)}: a whole number from {low} to {high}")
    return value


def number(value, name: str, low: float, high: float) -> float:
    """``value`` as a finite number in [low, high]: a JSON number or its text; a boolean, NaN, an infinity
    (Python's JSON reader takes Infinity and 1e999) or anything else is 400 naming ``name``."""
    if isinstance(value, str) and len(value) <= 2 * MAX_DIGITS:
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise RequestError(400, f"{name}={_shown(value)}: a number from {low:g} to {high:g}")
    return float(value)


def check_model_name(name) -> str:
    """A name a model may be loaded under: a non-empty string of at most MAX_NAME characters, without
    control characters (NUL, newlines: it reaches logs and /metrics labels), no '/' and not '.' or '..' (it
    is a URL path segment), no lone surrogates (a repository file named in bytes that are not UTF-8: no
    answer could encode it); else 400. For both APIs' repository loads."""
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
        raise RequestError(400, f"a model name is 1 to {MAX_NAME} characters, not {_shown(name)}")
    if "/" in name or name in (".", "..") or any(unicodedata.category(c) in ("Cc", "Cs") for c in name):
        raise RequestError(400, f"model name {name!r}: no '/', no control characters, not '.' or '..', and "
                                f"UTF-8 text (a file name's undecodable bytes are not)")
    return name


LOAD_PARAMETERS = ("model", "batch", "classifier", "max_queue_delay_us")


def load_parameters(name: str, parameters: dict) -> dict:
    """A repository load's parameters, range-checked, with their defaults: ``model`` (a pipeline file of
    the repository: a file name, default ``<name>.json``), ``batch`` (max_batch_size: 1 to MAX_BATCH_SIZE,
    default 8), ``classifier`` (a torchvision model name, or absent), ``max_queue_delay_us`` (0 to
    MAX_QUEUE_DELAY_US, default 5000). Numbers may come as text (gRPC's string parameters). An unknown
    parameter is 400 naming it (Triton's ``config`` and ``file:`` parameters are not served). For both
    APIs' repository loads."""
    if not isinstance(parameters, dict):
        raise RequestError(400, "expected {\"parameters\": {\"model\": ..., \"batch\": ...}}")
    unknown = [key for key in parameters if key not in LOAD_PARAMETERS]
    if unknown:
        raise RequestError(400, f"unknown load parameter {_shown(unknown[0])} (known: {', '.join(LOAD_PARAMETERS)})")
    file = parameters.get("model", f"{name}.json")
    if not isinstance(file, str) or not 0 < len(file) <= 4 * MAX_NAME or any(
            unicodedata.category(c) == "Cc" for c in file):
        raise RequestError(400, f"parameter \"model\"={_shown(file)}: a pipeline file name of the repository")
    classifier = parameters.get("classifier")
    if classifier is not None and (not isinstance(classifier, str) or not 0 < len(classifier) <= MAX_NAME):
        raise RequestError(400, f"parameter \"classifier\"={_shown(classifier)}: a torchvision model's name")
    return {"model": file, "batch": integer(parameters.get("batch", 8), "batch", 1, MAX_BATCH_SIZE),
            "classifier": classifier or None,
            "max_queue_delay_us": number(parameters.get("max_queue_delay_us", 5000), "max_queue_delay_us", 0,
                                         MAX_QUEUE_DELAY_US)}


def _shown(value) -> str:
    """A value from a request as an error message shows it: its repr, cut to 60 characters; a JSON array or
    object by its kind alone (its repr could recurse as deep as the JSON nests)."""
    if isinstance(value, (list, dict)):
        return f"a JSON {'array' if isinstance(value, list) else 'object'} of {len(value)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_infer_request(body: bytes, header_length: str | None,
                        max_images: int = MAX_BATCH_SIZE) -> tuple[dict, list[bytes]]:
    """(the request's JSON, the images of its one BYTES input), every field the server reads checked
    (``parameters`` objects, ``outputs``, ``id``). JSON BYTES elements are base64 strings (a JSON string
    cannot hold an image's bytes). More than ``max_images`` images (the model's max_batch_size) is 400
    before they are read."""
    if header_length is not None:
        if (not header_length.isascii() or not header_length.isdigit() or len(header_length) > MAX_DIGITS
                or int(header_length) > len(body)):
            raise RequestError(400, f"Inference-Header-Content-Length {_shown(header_length)}: not a length "
                                    f"within the {len(body)}-byte body")
        header, binary = body[:int(header_length)], body[int(header_length):]
    else:
        header, binary = body, b""
    request = load_json(header, "the inference request")
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list) or len(request["inputs"]) != 1:
        raise RequestError(400, ONE_INPUT)
    flag(parameters_of(request, "the request"), "binary_data_output")
    if "id" in request and not isinstance(request["id"], str):
        raise RequestError(400, f"the request's \"id\" must be a string, not {_shown(request['id'])}")
    outputs = request.get("outputs", [])
    if not isinstance(outputs, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str)
                                                for o in outputs):
        raise RequestError(400, "\"outputs\" must be a list of {\"name\": ..., \"parameters\": {...}} objects")
    for output in outputs:
        parameters = parameters_of(output, f"output {_shown(output['name'])}")
        flag(parameters, "binary_data")
        integer(parameters.get("classification", 0), "classification", 0, MAX_CLASSIFICATION)
    tensor = request["inputs"][0]
    if not isinstance(tensor, dict):
        raise RequestError(400, "the input must be a BYTES tensor of encoded images")

    def elements() -> list[bytes]:
        size = parameters_of(tensor, "the input").get("binary_data_size")
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int) or size != len(binary):
                raise RequestError(400, f"binary_data_size {_shown(size)}, but {len(binary)} bytes follow the header")
            return parse_bytes_tensor(binary, max_images)
        data = tensor.get("data", [])
        if not isinstance(data, list):
            raise RequestError(400, "the input's \"data\" must be a list of base64 strings")
        flat = _flatten(data, max_images)
        try:
            return [_base64(item) for item in flat]
        except (ValueError, TypeError):
            raise RequestError(400, "a JSON BYTES element must be the image's bytes in base64") from None

    return request, images_input(tensor.get("datatype"), tensor.get("shape"), elements, max_images)


def images_input(datatype, shape, elements: Callable[[], list[bytes]],
                 max_images: int = MAX_BATCH_SIZE) -> list[bytes]:
    """The images of a request's one input, on either protocol: its datatype BYTES, its shape a list of sizes
    holding as many elements as ``elements()`` (which reads them out of the request) gives, and at most
    ``max_images`` (checked on the shape, before they are read)."""
    if datatype != "BYTES":
        raise RequestError(400, "the input must be a BYTES tensor of encoded images")
    if (not isinstance(shape, list) or not 0 < len(shape) <= MAX_SHAPE_RANK
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)):
        raise RequestError(400, f"the input's shape {_shown(shape)}: a list of at most {MAX_SHAPE_RANK} sizes")
    count = math.prod(shape)
    if count > max_images:
        raise RequestError(400, f"{count if count < 10 ** 12 else 'over 10^12'} images in one request: "
                                f"max_batch_size is {max_images}")
    images = elements()
    if count != len(images):
        raise RequestError(400, f"the input's shape {shape} holds {count} elements, {len(images)} came")
    return images


def encode_output(name: str, dtype: str, tensor: torch.Tensor | list[bytes], binary: bool, shape: list,
                   parameters: dict | None = None) -> tuple[dict, bytes | memoryview]:
    """One output's JSON and its binary part (empty for JSON data). JSON data is left a flat tensor (BYTES: a
    list of strings), for ``answer_body`` to write."""
    out = {"name": name, "datatype": dtype, "shape": shape}
    if parameters:
        out["parameters"] = dict(parameters)
    if not binary:
        out["data"] = [x.decode() for x in tensor] if dtype == "BYTES" else tensor.flatten()
        return out, b""
    data = raw_tensor(dtype, tensor)
    out.setdefault("parameters", {})["binary_data_size"] = len(data)
    return out, data


JSON_CHUNK = 1 << 15  # elements of a JSON tensor written by one json.dumps call


def answer_body(header: dict) -> bytes:
    """An inference answer's JSON text: ``header`` with each output's ``data`` (a flat tensor, as
    encode_output leaves it, or a list) written JSON_CHUNK elements at a time, so that a thread writing a
    large answer lets the event loop run between chunks (json.dumps of 1.2 million floats, eight 224x224
    images, holds the GIL for half a second). Each data goes in place of a marker no request can hold
    (random)."""
    marker, datas, outputs = "\0" + secrets.token_hex(8) + ":", [], []
    for out in header.get("outputs", []):
        if "data" in out:
            datas.append(out["data"])
            out = dict(out, data=f"{marker}{len(datas) - 1}")
        outputs.append(out)
    text = json.dumps(dict(header, outputs=outputs))
    for i, data in enumerate(datas):
        text = text.replace(json.dumps(f"{marker}{i}"), _json_list(data), 1)
    return text.encode()


def _json_list(data) -> str:
    """A list's or a flat tensor's JSON text, a chunk at a time."""
    chunks = [data[i:i + JSON_CHUNK] for i in range(0, len(data), JSON_CHUNK)]
    return "[" + ",".join(json.dumps(c if isinstance(c, list) else c.tolist())[1:-1] for c in chunks) + "]"


def raw_tensor(dtype: str, tensor: torch.Tensor | list[bytes]) -> bytes | memoryview:
    """An output's bytes as both protocols send them raw (HTTP's binary data, gRPC's raw_output_contents):
    little-endian elements; a BYTES element as a 4-byte little-endian length and its bytes. A CPU tensor's
    come as a view of its memory (a 224x224x3 float32 output is 600 KB, and the HTTP answer copies it
    once more anyway, into its body)."""
    if dtype == "BYTES":
        return b"".join(struct.pack("<I", len(x)) + x for x in tensor)
    return memoryview(tensor.contiguous().cpu().numpy()).cast("B")
