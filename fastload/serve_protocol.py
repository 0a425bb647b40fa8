"""The Open Inference Protocol's tensors and errors, as both of fastload serve's APIs (REST and gRPC) read
and write them: the request's BYTES input of encoded images, the outputs' datatypes and raw bytes, and the
error that answers a request with a status other than 200. No HTTP and no models here: serve.py (the REST
server), serve_grpc.py and serve_model.py build on it.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from typing import Callable

import torch

DTYPES = {torch.uint8: "UINT8", torch.float16: "FP16", torch.float32: "FP32"}
PROTOCOL_EXTENSIONS = ["binary_tensor_data", "classification", "model_repository", "statistics"]
ONE_INPUT = "expected {\"inputs\": [one BYTES tensor named \"images\"]}"  # (either protocol's request)


class RequestError(ValueError):
    """An answer other than 200: its status and reason."""

    def __init__(self, status: int, reason: str, headers: dict | None = None):
        super().__init__(reason)
        self.status, self.reason, self.headers = status, reason, headers or {}


def parse_bytes_tensor(data: bytes) -> list[bytes]:
    """Triton's binary BYTES tensor: each element a 4-byte little-endian length and its bytes."""
    elements, offset = [], 0
    while offset < len(data):
        if offset + 4 > len(data):
            raise RequestError(400, "a BYTES tensor ends inside an element's 4-byte length")
        (length,) = struct.unpack_from("<I", data, offset)
        offset += 4
        if offset + length > len(data):
            raise RequestError(400, f"a BYTES element of {length} bytes runs past the tensor's end")
        elements.append(data[offset:offset + length])
        offset += length
    return elements


def _flatten(data) -> list:
    return [x for item in data for x in _flatten(item)] if isinstance(data, list) else [data]


def parse_infer_request(body: bytes, header_length: str | None) -> tuple[dict, list[bytes]]:
    """(the request's JSON, the images of its one BYTES input). JSON BYTES elements are base64 strings
    (a JSON string cannot hold an image's bytes)."""
    if header_length is not None:
        if not header_length.isascii() or not header_length.isdigit() or int(header_length) > len(body):
            raise RequestError(400, f"Inference-Header-Content-Length {header_length!r}: not a length within "
                                    f"the {len(body)}-byte body")
        header, binary = body[:int(header_length)], body[int(header_length):]
    else:
        header, binary = body, b""
    try:
        request = json.loads(header)
    except (ValueError, RecursionError) as error:
        raise RequestError(400, f"the inference request is not JSON: {error}") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list) or len(request["inputs"]) != 1:
        raise RequestError(400, ONE_INPUT)
    tensor = request["inputs"][0]
    if not isinstance(tensor, dict):
        raise RequestError(400, "the input must be a BYTES tensor of encoded images")

    def elements() -> list[bytes]:
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or size != len(binary):
                raise RequestError(400, f"binary_data_size {size!r}, but {len(binary)} bytes follow the header")
            return parse_bytes_tensor(binary)
        try:
            return [base64.b64decode(item, validate=True) for item in _flatten(tensor.get("data", []))]
        except (ValueError, TypeError):
            raise RequestError(400, "a JSON BYTES element must be the image's bytes in base64") from None

    return request, images_input(tensor.get("datatype"), tensor.get("shape"), elements)


def images_input(datatype, shape, elements: Callable[[], list[bytes]]) -> list[bytes]:
    """The images of a request's one input, on either protocol: its datatype BYTES, its shape a list of sizes
    holding as many elements as ``elements()`` (which reads them out of the request) gives."""
    if datatype != "BYTES":
        raise RequestError(400, "the input must be a BYTES tensor of encoded images")
    if not isinstance(shape, list) or not shape or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise RequestError(400, f"the input's shape {shape!r}: a list of sizes")
    images = elements()
    if math.prod(shape) != len(images):
        raise RequestError(400, f"the input's shape {shape} holds {math.prod(shape)} elements, {len(images)} came")
    return images


def encode_output(name: str, dtype: str, tensor: torch.Tensor | list[bytes], binary: bool, shape: list,
                   parameters: dict | None = None) -> tuple[dict, bytes | memoryview]:
    """One output's JSON and its binary part (empty for JSON data)."""
    out = {"name": name, "datatype": dtype, "shape": shape}
    if parameters:
        out["parameters"] = dict(parameters)
    if not binary:
        out["data"] = [x.decode() for x in tensor] if dtype == "BYTES" else tensor.flatten().tolist()
        return out, b""
    data = raw_tensor(dtype, tensor)
    out.setdefault("parameters", {})["binary_data_size"] = len(data)
    return out, data


def raw_tensor(dtype: str, tensor: torch.Tensor | list[bytes]) -> bytes | memoryview:
    """An output's bytes as both protocols send them raw (HTTP's binary data, gRPC's raw_output_contents):
    little-endian elements; a BYTES element as a 4-byte little-endian length and its bytes. A CPU tensor's
    come as a view of its memory (a 224x224x3 float32 output is 600 KB, and the HTTP answer copies it
    once more anyway, into its body)."""
    if dtype == "BYTES":
        return b"".join(struct.pack("<I", len(x)) + x for x in tensor)
    return memoryview(tensor.contiguous().cpu().numpy()).cast("B")
