"""The Open Inference Protocol's gRPC API (KServe v2's GRPCInferenceService, as Triton serves it) for
``fastload.serve.InferenceServer``: the other half of the protocol beside its REST API.

``InferenceServer(..., grpc_port=8001)`` starts it: a ``grpc.aio`` server on the HTTP server's own event loop,
answering from the same models, decode pool (with its per-request budget), batchers, statistics and limits;
only the encoding differs. The messages are the generated ones tritonclient[grpc] ships
(``tritonclient.grpc.service_pb2``), so no protocol file is compiled here.

RPCs: ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer (the BYTES input in
``raw_input_contents``, as tritonclient.grpc sends it, or in ``contents.bytes_contents``; outputs in
``raw_output_contents``; an output's ``classification`` parameter as on REST), ModelStatistics,
RepositoryIndex, RepositoryModelLoad, RepositoryModelUnload; the others (model config, shared memory, trace,
log settings, streaming) answer UNIMPLEMENTED. An error is the REST answer's message under the status code
Triton gives it: 400 INVALID_ARGUMENT, 404 NOT_FOUND, 413 and 429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE (a full
queue, no model: retry), 500 INTERNAL (a bug of ours, its traceback logged).

Limits (the REST API's, applied before a message is parsed; the policy is docs/errors.md's):
- a message over ``max_bytes`` is refused by grpc itself (RESOURCE_EXHAUSTED);
- messages are read a few at a time, max(1, max_inflight_bytes // max_bytes) at once, each within
  ``timeout_s`` (past it DEADLINE_EXCEEDED, so a client that trickles holds its turn no longer); grpc's BDP
  probing is off, so a message waiting for its turn holds one 64 KiB stream window, not its whole size;
- a message's length is charged to ``max_inflight_bytes`` with the REST bodies until it is answered; past
  the cap it is refused with RESOURCE_EXHAUSTED (retry) before it is parsed. Each RPC takes its message as raw
  bytes (registered without a deserializer), so nothing grpc does parses it first;
- a message is parsed only if it holds at most MAX_FIELDS fields, counted by walking its wire format (the
  parser holds the GIL, and so the event loop, ~20-40 ns a field: five million empty elements fit in
  10 MB), and a big one off the event loop;
- at most ``max_connections`` RPCs run at once (an RPC is gRPC's unit of concurrency: many share one
  connection), and a connection idle for ``timeout_s`` is closed; error details are cut to 1000 characters.
A deadline or cancellation at any stage (the message arriving, its parse, its images' decode, the batcher's
queue, its batch, its answer's encoding) ends that RPC alone: its bytes are given back and the model serves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time

from .serve_limits import MAX_CLASSIFICATION, MAX_SHAPE_RANK
from .serve_protocol import ONE_INPUT, RequestError, images_input, integer, parse_bytes_tensor, raw_tensor

log = logging.getLogger("fastload.serve")  # (serve.py's logger)

try:
    import grpc
    from google.protobuf import json_format
    from google.protobuf.message import DecodeError as ProtobufDecodeError
    from tritonclient.grpc import service_pb2 as pb
except ImportError as error:
    raise ImportError(f"fastload's gRPC API needs tritonclient[grpc] (the protocol's generated stubs, and grpcio): "
                      f"pip install 'torch-fastload[grpc]' ({error})") from error

SERVICE = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
STATUS = {400: grpc.StatusCode.INVALID_ARGUMENT, 404: grpc.StatusCode.NOT_FOUND,
          413: grpc.StatusCode.RESOURCE_EXHAUSTED, 429: grpc.StatusCode.RESOURCE_EXHAUSTED,
          503: grpc.StatusCode.UNAVAILABLE, 408: grpc.StatusCode.DEADLINE_EXCEEDED}
MAX_FIELDS = 16384
"""Fields in one request message at most (nested ones included). A real request has a few dozen (a
ModelInferRequest: ~10 and one per image at most); each costs the parser ~20-40 ns with the GIL held."""
PARSE_ON_LOOP = 64 << 10  # a message up to this many bytes is parsed on the event loop (< 0.1 ms)
MAX_DETAILS = 1000  # characters of an error's details at most (they travel in the trailers)


async def start_grpc(server, host: str, port: int) -> tuple[grpc.aio.Server, int]:
    """The gRPC server for ``server`` (a ``fastload.serve.InferenceServer``), listening on host:port (0: any
    free port) on the running loop, and the port it listens on."""
    options = [("grpc.max_receive_message_length", server.max_bytes),
               ("grpc.http2.bdp_probe", 0),  # (else grpc widens each stream's window: unread messages buffered)
               ("grpc.so_reuseport", 0)]  # (else a port another server holds is taken without an error)
    if server.timeout_s is not None:
        options.append(("grpc.max_connection_idle_ms", int(server.timeout_s * 1000)))
    grpc_server = grpc.aio.server(options=options)
    grpc_server.add_generic_rpc_handlers((InferenceService(server).handler(),))
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = grpc_server.add_insecure_port(address)
    except RuntimeError as error:
        raise OSError(f"cannot serve gRPC on {address}: {error}") from None
    if not bound:
        raise OSError(f"cannot serve gRPC on {address}")
    await grpc_server.start()
    return grpc_server, bound


_SUBMESSAGES: dict = {}  # a message descriptor -> {field number: the descriptor of that field's messages}


def _submessages(descriptor) -> dict:
    if descriptor not in _SUBMESSAGES:
        _SUBMESSAGES[descriptor] = {f.number: f.message_type for f in descriptor.fields if f.message_type}
    return _SUBMESSAGES[descriptor]


def count_fields(data: bytes, descriptor) -> int:
    """The fields in ``data`` (a ``descriptor`` message's wire format), nested messages' too, counted without
    parsing: 400 past MAX_FIELDS (as soon as it is passed) or where the wire format is broken. It allocates no
    object per field (a walk that did woke the cyclic collector, whose full pass beside torch's objects held
    the event loop for ~0.1 s)."""
    count, at, end, submessages = 0, 0, len(data), _submessages(descriptor)
    outer = []  # (end, submessages) of each message the walk is inside of
    try:
        while True:
            if at >= end:
                if at > end:
                    raise IndexError
                if not outer:
                    return count
                end, submessages = outer.pop()
                continue
            count += 1
            if count > MAX_FIELDS:
                raise RequestError(400, f"a {descriptor.name} of over {MAX_FIELDS} fields: the limit")
            key = shift = 0
            while True:  # (varints inline: a function would return a tuple a field)
                byte = data[at]
                at, key, shift = at + 1, key | (byte & 0x7F) << shift, shift + 7
                if byte < 0x80:
                    break
                if shift > 63:
                    raise IndexError
            wire = key & 7
            if wire == 0:
                stop = at + 10  # (a varint is 10 bytes at most)
                while data[at] >= 0x80:
                    at += 1
                    if at == stop:
                        raise IndexError
                at += 1
            elif wire in (1, 5):
                at += 8 if wire == 1 else 4
            elif wire == 2:
                length = shift = 0
                while True:
                    byte = data[at]
                    at, length, shift = at + 1, length | (byte & 0x7F) << shift, shift + 7
                    if byte < 0x80:
                        break
                    if shift > 63:
                        raise IndexError
                inner = submessages.get(key >> 3)
                if inner is not None and at + length <= end:
                    outer.append((end, submessages))
                    end, submessages = at + length, _submessages(inner)
                else:
                    at += length
            elif wire > 5:  # (3 and 4 open and close a group: its fields follow, counted as these)
                raise IndexError
    except IndexError:
        raise RequestError(400, f"not a {descriptor.name}: its wire format is broken") from None


async def parse(message_type, raw: bytes):
    """``raw`` as a ``message_type``, its size of work bounded first (count_fields), a big one parsed off the
    event loop; a malformed one is 400."""
    try:
        if len(raw) > 2 * MAX_FIELDS:  # (a field takes 2 bytes at least: a smaller message has fewer)
            count_fields(raw, message_type.DESCRIPTOR)
        if len(raw) <= PARSE_ON_LOOP:
            return message_type.FromString(raw)
        return await asyncio.get_running_loop().run_in_executor(None, message_type.FromString, raw)
    except ProtobufDecodeError as error:
        raise RequestError(400, f"not a {message_type.DESCRIPTOR.name}: {error}") from None


def _parameter(parameter):
    """An InferParameter's or ModelRepositoryParameter's value, whichever kind it holds."""
    kind = parameter.WhichOneof("parameter_choice")
    return getattr(parameter, kind) if kind else None


def infer_images(request: pb.ModelInferRequest, max_images: int) -> list[bytes]:
    """The images of a ModelInferRequest's one BYTES input: in ``raw_input_contents`` (each element a 4-byte
    little-endian length and its bytes) or in the input's ``contents.bytes_contents``; more than ``max_images``
    (the model's max_batch_size) is 400 before any is read."""
    if len(request.inputs) != 1 or request.inputs[0].name != "images":
        raise RequestError(400, f"{ONE_INPUT}, not {[tensor.name[:40] for tensor in request.inputs[:4]]}")
    tensor, raw = request.inputs[0], request.raw_input_contents
    if len(raw) > 1:
        raise RequestError(400, f"{len(raw)} raw_input_contents for 1 input")
    if raw and tensor.HasField("contents"):
        raise RequestError(400, "the input's data both in raw_input_contents and in contents: send one")
    other = [field.name for field, _ in tensor.contents.ListFields() if field.name != "bytes_contents"]
    if other:
        raise RequestError(400, f"a BYTES input's contents are bytes_contents, not {other[0]}")
    if len(tensor.shape) > MAX_SHAPE_RANK:  # (checked before it becomes a list of Python ints)
        raise RequestError(400, f"the input's shape: a list of at most {MAX_SHAPE_RANK} sizes")

    def elements() -> list[bytes]:
        if raw:
            return parse_bytes_tensor(raw[0], max_images)
        if len(tensor.contents.bytes_contents) > max_images:
            raise RequestError(400, f"a BYTES tensor of more than {max_images} elements: the limit")
        return list(tensor.contents.bytes_contents)

    return images_input(tensor.datatype, list(tensor.shape), elements, max_images)


def requested_outputs(request: pb.ModelInferRequest) -> list[tuple[str, int]]:
    """(name, classification: 0 for none) of the one output a request may ask for (none: the model's)."""
    if len(request.outputs) > 1:
        raise RequestError(400, f"{len(request.outputs)} outputs requested: a model has one")
    return [(output.name, integer(_parameter(output.parameters["classification"]), "classification", 0,
                                  MAX_CLASSIFICATION) if "classification" in output.parameters else 0)
            for output in request.outputs]


def _utf8(text: str) -> bool:
    """Whether ``text`` can be a protobuf string: UTF-8, which a repository file named in undecodable bytes
    (held by Python as lone surrogates), and a model loaded from one at start, is not."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _details(reason: str) -> str:
    return reason if len(reason) <= MAX_DETAILS else reason[:MAX_DETAILS - 3] + "..."


class InferenceService:
    """GRPCInferenceService answered from ``server``'s models (run on its event loop, as its REST handlers):
    a method of this class for each RPC served, by the RPC's name, called with the parsed request."""

    def __init__(self, server):  # a fastload.serve.InferenceServer
        self.server = server
        self.rpcs = 0  # RPCs being answered
        self._reading: asyncio.Semaphore | None = None  # (made on the server's loop)

    def handler(self) -> grpc.GenericRpcHandler:
        """Every RPC of the service. A unary one is registered as taking a stream of raw bytes (the same on the
        wire), so that its message is read only when ``_rpc`` asks for it, under the read gate."""
        handlers = {}
        for method in SERVICE.methods:
            if method.client_streaming or method.server_streaming:
                handlers[method.name] = grpc.stream_stream_rpc_method_handler(self._stream)
            else:
                response = getattr(pb, method.output_type.name)
                handlers[method.name] = grpc.stream_unary_rpc_method_handler(
                    self._rpc(method.name, getattr(pb, method.input_type.name)),
                    response_serializer=response.SerializeToString)
        return grpc.method_handlers_generic_handler(SERVICE.full_name, handlers)

    async def _read(self, context) -> bytes:
        """The RPC's message, read under the gate: at most max(1, max_inflight_bytes // max_bytes) messages are
        read at once, each within ``timeout_s`` (a sender that trickles holds a turn no longer). Until its turn
        a message waits in grpc's flow control, a stream window (64 KiB) of it buffered."""
        if self._reading is None:
            self._reading = asyncio.Semaphore(max(1, self.server.max_inflight_bytes // self.server.max_bytes))
        async with self._reading:
            try:
                raw = await asyncio.wait_for(context.read(), self.server.timeout_s)
            except asyncio.TimeoutError:
                raise RequestError(408, f"the message did not arrive within {self.server.timeout_s:g} s") from None
        if raw is grpc.aio.EOF:
            raise RequestError(400, "no request message")
        return raw

    def _rpc(self, name: str, request_type):
        """RPC ``name``: under the cap on RPCs at once, its message read (``_read``) and its bytes charged to the
        bytes in flight, then parsed as ``request_type`` and answered by the method ``name``."""
        implementation = getattr(self, name, None)

        async def answer(requests, context):
            if implementation is None:
                await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"fastload serves no {name}")
            limit = self.server.max_connections
            if self.rpcs >= limit:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{self.rpcs} RPCs in flight, the limit "
                                                                       f"is {limit}: retry")
            self.rpcs += 1
            try:
                outcome = await self._answer(name, implementation, request_type, context)
            finally:
                self.rpcs -= 1
            if isinstance(outcome, tuple):
                # Aborted here, where no frame holds the message: grpc keeps the abort's traceback, and with it
                # every frame it names, until the cyclic collector runs.
                await context.abort(*outcome)
            return outcome
        answer.__name__ = answer.__qualname__ = name
        return answer

    async def _answer(self, name: str, implementation, request_type, context):
        """The RPC's response, or the (status code, details) that answer it: a RequestError's status with its
        reason, anything else INTERNAL (logged: a bug of ours)."""
        try:
            raw = await self._read(context)
            with contextlib.ExitStack() as charged:
                try:
                    charged.enter_context(self.server.in_flight(len(raw)))
                except RequestError as full:  # (REST's 503: here a quota of this server's, so retry later)
                    raise RequestError(429, full.reason) from None
                request = await parse(request_type, raw)
                del raw  # (the parsed request holds what is needed of it)
                result = implementation(request, context)
                return await result if inspect.isawaitable(result) else result
        except RequestError as error:
            if error.status >= 500 and error.status != 503:
                log.error("gRPC %s answered INTERNAL: %s", name, error.reason)
            return STATUS.get(error.status, grpc.StatusCode.INTERNAL), _details(error.reason)
        except Exception as error:  # a bug of ours: the client is told, the log keeps the traceback
            log.exception("gRPC %s failed", name)
            return grpc.StatusCode.INTERNAL, _details(f"the server failed: {type(error).__name__}: {error}")

    async def _stream(self, requests, context):
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "fastload serves no streaming inference "
                                                           "(ModelStreamInfer): use ModelInfer")

    def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=True)

    def ServerReady(self, request, context):
        return pb.ServerReadyResponse(ready=True)

    def ModelReady(self, request, context):
        try:  # (Triton answers "not ready" for a model it does not hold, not an error)
            self.server.find_model(request.name, request.version)
        except RequestError:
            return pb.ModelReadyResponse(ready=False)
        return pb.ModelReadyResponse(ready=True)

    def ServerMetadata(self, request, context):
        return json_format.ParseDict(self.server.server_metadata(), pb.ServerMetadataResponse())

    def ModelMetadata(self, request, context):
        model = self.server.find_model(request.name, request.version)
        return json_format.ParseDict(model.metadata(), pb.ModelMetadataResponse())

    async def ModelInfer(self, request, context):
        model = self.server.find_model(request.model_name, request.model_version)
        with model.stats.counted():
            images, wanted = infer_images(request, model.max_batch_size), requested_outputs(request)
            results = await self.server.run(model, images)
            encoding = time.perf_counter_ns()
            response = pb.ModelInferResponse(model_name=model.name, model_version=model.version, id=request.id)
            for name, dtype, shape, data in model.answer(results, wanted):
                response.outputs.add(name=name, datatype=dtype, shape=shape)
                response.raw_output_contents.append(bytes(raw_tensor(dtype, data)))
            model.stats.made_output(time.perf_counter_ns() - encoding)
            return response

    def ModelStatistics(self, request, context):
        stats = [m for m in self.server.statistics(request.name, request.version) if _utf8(m["name"])]
        return json_format.ParseDict({"model_stats": stats}, pb.ModelStatisticsResponse())

    def RepositoryIndex(self, request, context):
        index = [m for m in self.server.repository_index()
                 if (not request.ready or m["state"] == "READY") and _utf8(m["name"])]
        return json_format.ParseDict({"models": index}, pb.RepositoryIndexResponse())

    async def RepositoryModelLoad(self, request, context):
        parameters = {key: _parameter(value) for key, value in request.parameters.items()}
        await self.server.repository_load(request.model_name, parameters)  # (which checks them: kinds, ranges)
        return pb.RepositoryModelLoadResponse()

    def RepositoryModelUnload(self, request, context):
        self.server.repository_unload(request.model_name)
        return pb.RepositoryModelUnloadResponse()
