"""The Open Inference Protocol's gRPC API (KServe v2's GRPCInferenceService, as Triton serves it) for
``fastload.serve.InferenceServer``: the other half of the protocol beside its REST API.

``InferenceServer(..., grpc_port=8001)`` starts it: a ``grpc.aio`` server on the HTTP server's own event loop,
answering from the same models, decode pool (with its per-request budget), batchers, statistics and limits;
only the encoding differs. The servicer and messages are the generated ones tritonclient[grpc] ships
(``tritonclient.grpc.service_pb2`` / ``service_pb2_grpc``), so no protocol file is compiled here.

RPCs: ServerLive, ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer (the BYTES input in
``raw_input_contents``, as tritonclient.grpc sends it, or in ``contents.bytes_contents``; outputs in
``raw_output_contents``; an output's ``classification`` parameter as on REST), ModelStatistics,
RepositoryIndex, RepositoryModelLoad, RepositoryModelUnload; the others (model config, shared memory, trace,
log settings, streaming) answer UNIMPLEMENTED. An error is the REST answer's message under the matching status
code: 400 INVALID_ARGUMENT, 404 NOT_FOUND, 503 (full: retry) RESOURCE_EXHAUSTED, 500 INTERNAL.

Limits: a message over ``max_bytes`` is refused by grpc itself (RESOURCE_EXHAUSTED); an infer request's bytes
count against ``max_inflight_bytes`` with the REST bodies; at most ``max_connections`` RPCs run at once (an
RPC is gRPC's unit of concurrency: many share one connection); a connection idle for ``timeout_s`` is closed.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time

from .serve_protocol import ONE_INPUT, RequestError, images_input, parse_bytes_tensor, raw_tensor

log = logging.getLogger("fastload.serve")  # (serve.py's logger)

try:
    import grpc
    from google.protobuf import json_format
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc
except ImportError as error:
    raise ImportError(f"fastload's gRPC API needs tritonclient[grpc] (the protocol's generated stubs, and grpcio): "
                      f"pip install 'torch-fastload[grpc]' ({error})") from error

STATUS = {400: grpc.StatusCode.INVALID_ARGUMENT, 404: grpc.StatusCode.NOT_FOUND,
          413: grpc.StatusCode.RESOURCE_EXHAUSTED, 503: grpc.StatusCode.RESOURCE_EXHAUSTED}


async def start_grpc(server, host: str, port: int) -> tuple[grpc.aio.Server, int]:
    """The gRPC server for ``server`` (a ``fastload.serve.InferenceServer``), listening on host:port (0: any
    free port) on the running loop, and the port it listens on."""
    options = [("grpc.max_receive_message_length", server.max_bytes),
               ("grpc.so_reuseport", 0)]  # (else a port another server holds is taken without an error)
    if server.timeout_s is not None:
        options.append(("grpc.max_connection_idle_ms", int(server.timeout_s * 1000)))
    grpc_server = grpc.aio.server(options=options)
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceService(server), grpc_server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = grpc_server.add_insecure_port(address)
    except RuntimeError as error:
        raise OSError(f"cannot serve gRPC on {address}: {error}") from None
    if not bound:
        raise OSError(f"cannot serve gRPC on {address}")
    await grpc_server.start()
    return grpc_server, bound


def _rpc(method):
    """An RPC under the cap on RPCs at once, its RequestError as the matching status code with its reason."""
    @functools.wraps(method)
    async def answer(self: "InferenceService", request, context):
        limit = self.server.max_connections
        if self.rpcs >= limit:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{self.rpcs} RPCs in flight, the limit is "
                                                                   f"{limit}: retry")
        self.rpcs += 1
        try:
            result = method(self, request, context)
            return await result if inspect.isawaitable(result) else result
        except RequestError as error:
            code, reason = STATUS.get(error.status, grpc.StatusCode.INTERNAL), error.reason
        except Exception as error:  # a bug of ours: the client is told, the log keeps the traceback
            log.exception("gRPC %s failed", method.__name__)
            code, reason = grpc.StatusCode.INTERNAL, f"the server failed: {error}"
        finally:
            self.rpcs -= 1
        await context.abort(code, reason)
    return answer


def _parameter(parameter):
    """An InferParameter's or ModelRepositoryParameter's value, whichever kind it holds."""
    kind = parameter.WhichOneof("parameter_choice")
    return getattr(parameter, kind) if kind else None


def infer_images(request: pb.ModelInferRequest) -> list[bytes]:
    """The images of a ModelInferRequest's one BYTES input: in ``raw_input_contents`` (each element a 4-byte
    little-endian length and its bytes) or in the input's ``contents.bytes_contents``."""
    if len(request.inputs) != 1:
        raise RequestError(400, ONE_INPUT)
    tensor, raw = request.inputs[0], request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise RequestError(400, f"{len(raw)} raw_input_contents for {len(request.inputs)} input")
    if raw and tensor.HasField("contents"):
        raise RequestError(400, "the input's data both in raw_input_contents and in contents: send one")
    return images_input(tensor.datatype, list(tensor.shape),
                        lambda: parse_bytes_tensor(raw[0]) if raw else list(tensor.contents.bytes_contents))


class InferenceService(service_pb2_grpc.GRPCInferenceServiceServicer):
    """GRPCInferenceService answered from ``server``'s models (run on its event loop, as its REST handlers)."""

    def __init__(self, server):  # a fastload.serve.InferenceServer
        self.server = server
        self.rpcs = 0  # RPCs being answered

    @_rpc
    def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=True)

    @_rpc
    def ServerReady(self, request, context):
        return pb.ServerReadyResponse(ready=True)

    @_rpc
    def ModelReady(self, request, context):
        try:  # (Triton answers "not ready" for a model it does not hold, not an error)
            self.server.find_model(request.name, request.version)
        except RequestError:
            return pb.ModelReadyResponse(ready=False)
        return pb.ModelReadyResponse(ready=True)

    @_rpc
    def ServerMetadata(self, request, context):
        return json_format.ParseDict(self.server.server_metadata(), pb.ServerMetadataResponse())

    @_rpc
    def ModelMetadata(self, request, context):
        model = self.server.find_model(request.name, request.version)
        return json_format.ParseDict(model.metadata(), pb.ModelMetadataResponse())

    @_rpc
    async def ModelInfer(self, request, context):
        model = self.server.find_model(request.model_name, request.model_version)
        with self.server.in_flight(request.ByteSize()), model.stats.counted():
            results = await self.server.run(model, infer_images(request))
            encoding = time.perf_counter_ns()
            wanted = [(output.name, _parameter(output.parameters["classification"])
                       if "classification" in output.parameters else 0) for output in request.outputs]
            response = pb.ModelInferResponse(model_name=model.name, model_version=model.version, id=request.id)
            for name, dtype, shape, data in model.answer(results, wanted):
                response.outputs.add(name=name, datatype=dtype, shape=shape)
                response.raw_output_contents.append(bytes(raw_tensor(dtype, data)))
            model.stats.made_output(time.perf_counter_ns() - encoding)
            return response

    @_rpc
    def ModelStatistics(self, request, context):
        return json_format.ParseDict({"model_stats": self.server.statistics(request.name, request.version)},
                                     pb.ModelStatisticsResponse())

    @_rpc
    def RepositoryIndex(self, request, context):
        index = [m for m in self.server.repository_index() if not request.ready or m["state"] == "READY"]
        return json_format.ParseDict({"models": index}, pb.RepositoryIndexResponse())

    @_rpc
    async def RepositoryModelLoad(self, request, context):
        parameters = {key: _parameter(value) for key, value in request.parameters.items()}
        await self.server.repository_load(request.model_name, parameters)
        return pb.RepositoryModelLoadResponse()

    @_rpc
    def RepositoryModelUnload(self, request, context):
        self.server.repository_unload(request.model_name)
        return pb.RepositoryModelUnloadResponse()
