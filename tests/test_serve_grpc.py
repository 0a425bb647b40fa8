"""fastload.serve_grpc: the Open Inference Protocol's gRPC API, driven by tritonclient.grpc (and the protocol's
generated stub for what that client does not send) against a server on 127.0.0.1 serving both APIs on ephemeral
ports."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

from fastload.compat.rocal import JsonPipeline
from fastload.serve import InferenceServer, Model, model_input
from fastload.serve_limits import LOOP_LAG_S
from fastload.serve_metrics import LoopLag

from test_serve import PIPELINE, jpeg, post

grpcclient = pytest.importorskip("tritonclient.grpc")
import grpc  # noqa: E402  (installed with tritonclient.grpc)
from tritonclient.grpc import service_pb2 as pb, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

UINT8 = {"pipeline": [{"operation": "Resize", "dest_width": 24, "dest_height": 20, "is_output": True}]}


def tiny_classifier() -> torch.nn.Module:
    """A classifier in miniature (float NCHW in, 10 logits out): what the server does with one is the test."""
    with torch.random.fork_rng():
        torch.manual_seed(5)
        return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 10)).eval()


@pytest.fixture
def server(tmp_path):
    """Models ``pre`` (PIPELINE, FP32), ``small`` (a uint8 resize), ``cls`` (PIPELINE then a classifier), and
    ``pre2`` loaded from a repository folder."""
    repository = tmp_path
    (repository / "pre2.json").write_text(json.dumps(PIPELINE))
    models = [Model("pre", JsonPipeline(PIPELINE), max_batch_size=4), Model("small", JsonPipeline(UINT8)),
              Model("cls", JsonPipeline(PIPELINE), tiny_classifier())]
    with InferenceServer(models=models, repository=str(repository), pipeline_loader=JsonPipeline, port=0,
                         grpc_port=0) as running:
        yield running


def client(server) -> grpcclient.InferenceServerClient:
    return grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")


def stub(server):
    """The protocol's own stub, for requests tritonclient.grpc does not make."""
    return service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))


def images_input(images: list[bytes]):
    tensor = grpcclient.InferInput("images", [len(images)], "BYTES")
    tensor.set_data_from_numpy(np.array(images, dtype=object))  # (sent in raw_input_contents)
    return tensor


def fails(code: str, reason: str, call, *args, **kwargs) -> None:
    with pytest.raises(InferenceServerException) as raised:
        call(*args, **kwargs)
    assert raised.value.status() == f"StatusCode.{code}" and reason in raised.value.message(), raised.value


def test_health_and_metadata(server):
    triton = client(server)
    assert triton.is_server_live() and triton.is_server_ready() and triton.is_model_ready("pre")
    assert not triton.is_model_ready("nothing") and not triton.is_model_ready("pre", "7")
    metadata = triton.get_server_metadata(as_json=True)
    assert metadata["name"] == "fastload" and "model_repository" in metadata["extensions"]
    pre = triton.get_model_metadata("pre")
    assert [(i.name, i.datatype, list(i.shape)) for i in pre.inputs] == [("images", "BYTES", [-1])]
    assert [(o.name, o.datatype, list(o.shape)) for o in pre.outputs] == [("output", "FP32", [-1, 64, 64, 3])]
    assert triton.get_model_metadata("small", "1").outputs[0].datatype == "UINT8"
    assert list(triton.get_model_metadata("cls").outputs[0].shape) == [-1, 10]
    fails("NOT_FOUND", "no model 'nothing'", triton.get_model_metadata, "nothing")
    fails("NOT_FOUND", "no version '7'", triton.get_model_metadata, "pre", "7")


def test_infer_equals_the_pipeline(server):
    images = [jpeg(1), jpeg(2), jpeg(3)]
    triton = client(server)
    for model, spec in (("pre", PIPELINE), ("small", UINT8)):
        expected = torch.stack(JsonPipeline(spec)(images)).numpy()
        batched = triton.infer(model, [images_input(images)], request_id="7")
        assert batched.get_response().id == "7" and batched.get_response().model_version == "1"
        output = batched.as_numpy("output")
        assert output.dtype == expected.dtype and np.array_equal(output, expected)
        assert np.array_equal(triton.infer(model, [images_input(images[1:2])]).as_numpy("output"), expected[1:2])
    # the input in contents.bytes_contents (tritonclient sends raw_input_contents), the output still raw
    request = pb.ModelInferRequest(model_name="small", inputs=[pb.ModelInferRequest.InferInputTensor(
        name="images", datatype="BYTES", shape=[2], contents=pb.InferTensorContents(bytes_contents=images[:2]))])
    response = stub(server).ModelInfer(request)
    assert list(response.outputs[0].shape) == [2, 20, 24, 3]
    output = np.frombuffer(response.raw_output_contents[0], np.uint8).reshape(2, 20, 24, 3)
    assert np.array_equal(output, torch.stack(JsonPipeline(UINT8)(images[:2])).numpy())


def test_the_classifier_and_the_classification_parameter(server):
    images = [jpeg(seed) for seed in range(4)]
    with torch.inference_mode():
        local = tiny_classifier()(model_input([JsonPipeline(PIPELINE).one(i) for i in images])).softmax(1)
    probabilities = client(server).infer("cls", [images_input(images)]).as_numpy("probabilities")
    assert probabilities.shape == (4, 10) and np.allclose(probabilities, local.numpy(), atol=1e-5)
    top = client(server).infer("cls", [images_input(images)],
                               outputs=[grpcclient.InferRequestedOutput("probabilities", class_count=3)])
    classes = top.as_numpy("probabilities")
    assert classes.shape == (4, 3) and [int(row[0].split(b":")[1]) for row in classes] == local.argmax(1).tolist()
    fails("INVALID_ARGUMENT", "classification", client(server).infer, "pre", [images_input(images[:1])],
          outputs=[grpcclient.InferRequestedOutput("output", class_count=3)])


def test_errors_are_status_codes_with_the_rest_reasons(server):
    triton, good = client(server), jpeg(4)
    fails("INVALID_ARGUMENT", "cannot decode", triton.infer, "pre", [images_input([good, b"not an image"])])
    fails("NOT_FOUND", "no model 'nothing'", triton.infer, "nothing", [images_input([good])])
    fails("INVALID_ARGUMENT", "max_batch_size is 4", triton.infer, "pre", [images_input([good] * 5)])
    fails("INVALID_ARGUMENT", "has one output, 'output'", triton.infer, "pre", [images_input([good])],
          outputs=[grpcclient.InferRequestedOutput("logits")])
    floats = grpcclient.InferInput("images", [1], "FP32")
    floats.set_data_from_numpy(np.zeros(1, np.float32))
    fails("INVALID_ARGUMENT", "BYTES tensor", triton.infer, "pre", [floats])
    raw = pb.ModelInferRequest(model_name="pre", inputs=[pb.ModelInferRequest.InferInputTensor(
        name="images", datatype="BYTES", shape=[2])], raw_input_contents=[b"\x04\x00\x00\x00abcd"])
    with pytest.raises(grpc.RpcError) as raised:
        stub(server).ModelInfer(raw)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "holds 2 elements" in raised.value.details()


def test_statistics_are_the_rest_apis(server):
    triton = client(server)
    before = triton.get_inference_statistics("small", as_json=True)["model_stats"][0]
    triton.infer("small", [images_input([jpeg(5), jpeg(6)])])
    after = triton.get_inference_statistics("small", as_json=True)["model_stats"][0]
    assert int(after["inference_count"]) - int(before.get("inference_count", 0)) == 2
    assert int(after["inference_stats"]["success"]["count"]) == int(
        before["inference_stats"].get("success", {}).get("count", 0)) + 1
    assert int(after["inference_stats"]["compute_output"]["ns"]) > 0 and after["batch_stats"]
    rest = server.statistics("small")[0]  # what GET /v2/models/small/stats answers
    assert rest["inference_count"] == int(after["inference_count"])
    every = triton.get_inference_statistics(as_json=True)["model_stats"]
    assert {"pre", "small", "cls", "pre2"} <= {m["name"] for m in every}
    fails("NOT_FOUND", "no model 'nothing'", triton.get_inference_statistics, "nothing")


def test_the_repository_loads_and_unloads(server):
    triton = client(server)
    triton.unload_model("pre2")
    assert not triton.is_model_ready("pre2")
    index = triton.get_model_repository_index(as_json=True)["models"]
    assert {"name": "pre2", "state": "UNAVAILABLE", "reason": "unloaded"} in index
    fails("NOT_FOUND", "no model 'pre2' loaded", triton.unload_model, "pre2")
    triton.load_model("pre2")  # pre2.json by default
    assert triton.is_model_ready("pre2")
    parameters = {"model": pb.ModelRepositoryParameter(string_param="pre2.json"),
                  "batch": pb.ModelRepositoryParameter(int64_param=2)}
    stub(server).RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="loaded", parameters=parameters))
    assert server.models["loaded"].max_batch_size == 2
    output = triton.infer("loaded", [images_input([jpeg(9)])]).as_numpy("output")
    assert np.array_equal(output[0], JsonPipeline(PIPELINE).one(jpeg(9)).numpy())
    with pytest.raises(grpc.RpcError) as raised:
        stub(server).RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="x", parameters={
            "model": pb.ModelRepositoryParameter(string_param="../x.json")}))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "outside" in raised.value.details()
    triton.unload_model("loaded")
    ready = [m.name for m in stub(server).RepositoryIndex(pb.RepositoryIndexRequest(ready=True)).models]
    assert "loaded" not in ready and "pre" in ready
    with open(os.path.join(server.repository.encode(), b"\xff.json"), "w") as undecodable:  # (no UTF-8 name)
        undecodable.write(json.dumps(PIPELINE))
    assert "pre2" in [m.name for m in stub(server).RepositoryIndex(pb.RepositoryIndexRequest()).models]
    server.models["\udcff"] = server.models.pop("pre2")  # (as a server started on that folder names it)
    assert "pre" in [m.name for m in stub(server).ModelStatistics(pb.ModelStatisticsRequest()).model_stats]
    server.models["pre2"] = server.models.pop("\udcff")


class _SlowPipeline(JsonPipeline):
    def _decode(self, data, index, name):
        if data.startswith(b"SLOW"):
            time.sleep(0.6)
        return super()._decode(data, index, name)


def test_limits_answer_resource_exhausted_and_close_stops_grpc():
    """The REST API's limits, as gRPC status codes; close() stops the gRPC server with the HTTP one; a gRPC
    port another socket holds is refused at start."""
    model = Model("m", _SlowPipeline(UINT8), max_batch_size=4, max_queue_delay_us=0)
    with InferenceServer(models=[model], port=0, grpc_port=0, max_connections=1, max_bytes=100_000,
                         max_inflight_bytes=30_000, decode_budget_s=5) as server:
        triton = client(server)
        fails("RESOURCE_EXHAUSTED", "bytes in flight", triton.infer, "m", [images_input([b"x" * 40_000])])
        fails("RESOURCE_EXHAUSTED", "larger than max", triton.infer, "m", [images_input([b"x" * 200_000])])
        answered = threading.Event()
        triton.async_infer("m", [images_input([b"SLOW"])], lambda result, error: answered.set())
        time.sleep(0.2)
        fails("RESOURCE_EXHAUSTED", "1 RPCs in flight, the limit is 1", triton.is_server_live)
        assert answered.wait(10)
        assert triton.infer("m", [images_input([jpeg(1)])]).as_numpy("output").shape == (1, 20, 24, 3)
        assert server._inflight_bytes == 0
        port, last, answered = server.grpc_port, [], threading.Event()
        triton.async_infer("m", [images_input([b"SLOW"])], lambda result, error: last.append(error) or answered.set())
        time.sleep(0.2)
    assert answered.wait(5) and last[0].status() == "StatusCode.INVALID_ARGUMENT"  # in flight at close: answered
    started = time.monotonic()
    with pytest.raises(InferenceServerException):
        grpcclient.InferenceServerClient(f"127.0.0.1:{port}").is_server_live(client_timeout=2)
    assert time.monotonic() - started < 5
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = InferenceServer(models=[Model("m", JsonPipeline(UINT8))], port=0, grpc_port=taken.getsockname()[1])
        with pytest.raises(OSError, match="cannot serve gRPC"):
            server.start()
        for m in server.models.values():
            m.close()


# -- deadlines and cancellations, at every stage of a request


class _HeldPipeline(JsonPipeline):
    """UINT8's pipeline, whose decode and batch a test holds for ``decode_s`` / ``batch_s`` seconds."""
    decode_s = batch_s = 0.0

    def _decode(self, data, index, name):
        time.sleep(self.decode_s)
        return super()._decode(data, index, name)

    def _process(self, items):
        time.sleep(self.batch_s)
        return super()._process(items)


@pytest.fixture
def held():
    """A server of one model ``m`` (one image a batch, no queue delay) whose stages a test can hold."""
    model = Model("m", _HeldPipeline(UINT8), max_batch_size=1, max_queue_delay_us=0)
    with InferenceServer(models=[model], port=0, grpc_port=0, max_bytes=16 << 20) as running:
        yield running


def infer_request(images: list[bytes], model: str = "m", shape: list[int] | None = None) -> pb.ModelInferRequest:
    raw = b"".join(len(image).to_bytes(4, "little") + image for image in images)
    return pb.ModelInferRequest(model_name=model, inputs=[pb.ModelInferRequest.InferInputTensor(
        name="images", datatype="BYTES", shape=shape if shape is not None else [len(images)])],
        raw_input_contents=[raw])


def still_serves(server, within: float = 5.0) -> None:
    """A normal request on each API is answered within ``within`` seconds, and no request bytes stay charged."""
    response = stub(server).ModelInfer(infer_request([jpeg(1)]), timeout=within)
    assert list(response.outputs[0].shape) == [1, 20, 24, 3]
    started = time.monotonic()
    status, answer = post(server.port, jpeg(2))
    assert status == 200 and answer["shape"] == [20, 24, 3] and time.monotonic() - started < within
    deadline = time.monotonic() + within
    while server._inflight_bytes and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server._inflight_bytes == 0


def expires(server, request, timeout: float = 0.3) -> None:
    with pytest.raises(grpc.RpcError) as raised:
        stub(server).ModelInfer(request, timeout=timeout)
    assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_a_deadline_while_the_message_arrives_or_is_parsed(held):
    big = infer_request([b"x" * (12 << 20)])
    for timeout in (0.001, 0.01, 0.03):
        with contextlib.suppress(grpc.RpcError):
            stub(held).ModelInfer(big, timeout=timeout)
    cancelled = stub(held).ModelInfer.future(big)
    time.sleep(0.005)
    cancelled.cancel()
    still_serves(held)


def test_a_deadline_while_the_images_decode(held):
    held.models["m"].pipeline.decode_s = 1.0
    expires(held, infer_request([jpeg(3)]))
    held.models["m"].pipeline.decode_s = 0.0
    still_serves(held)


def test_a_deadline_while_the_batch_runs(held):
    """The batcher's thread answers a Future whose RPC went away (it was cancelled: an asyncio future chained
    to it cancels it) and goes on batching."""
    held.models["m"].pipeline.batch_s = 1.0
    expires(held, infer_request([jpeg(3)]))
    held.models["m"].pipeline.batch_s = 0.0
    time.sleep(1.0)
    still_serves(held)


def test_a_deadline_while_queued_in_the_batcher(held):
    held.models["m"].pipeline.batch_s = 1.0
    first = stub(held).ModelInfer.future(infer_request([jpeg(4)]), timeout=10)
    time.sleep(0.2)  # (the first request's batch runs; the next one waits in the batcher's queue)
    expires(held, infer_request([jpeg(5)]))
    held.models["m"].pipeline.batch_s = 0.0
    assert list(first.result().outputs[0].shape) == [1, 20, 24, 3]
    still_serves(held)


def test_a_deadline_while_the_answer_is_encoded(held, monkeypatch):
    import fastload.serve_grpc as serve_grpc
    raw_tensor = serve_grpc.raw_tensor

    def slow_raw_tensor(dtype, data):
        time.sleep(0.6)  # (on the event loop: the deadline passes meanwhile)
        return raw_tensor(dtype, data)

    monkeypatch.setattr(serve_grpc, "raw_tensor", slow_raw_tensor)
    expires(held, infer_request([jpeg(6)]))
    monkeypatch.undo()
    still_serves(held)


def test_a_message_that_never_arrives_holds_no_one_else_past_timeout_s():
    """Messages are read a few at a time (here one: max_inflight_bytes < max_bytes): a client that opens an
    RPC and sends nothing is cut at timeout_s (DEADLINE_EXCEEDED), and the RPCs behind it are then read."""
    model = Model("m", JsonPipeline(UINT8), max_batch_size=1)
    with InferenceServer(models=[model], port=0, grpc_port=0, max_bytes=1 << 20, max_inflight_bytes=512 << 10,
                         timeout_s=1.0) as server:
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        silent = channel.stream_unary("/inference.GRPCInferenceService/ModelInfer")

        def nothing():
            time.sleep(3)
            yield b""

        stalled = silent.future(nothing(), timeout=10)
        time.sleep(0.1)
        started = time.monotonic()
        still_serves(server)
        assert time.monotonic() - started < 2.5
        with pytest.raises(grpc.RpcError) as raised:
            stalled.result()
        assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED and "within 1 s" in raised.value.details()


# -- memory: bytes in flight counted before a message is parsed

_SERVER = """
import sys, time
from fastload.compat.rocal import JsonPipeline
from fastload.serve import InferenceServer, Model

class Slow(JsonPipeline):
    def _decode(self, data, index, name):
        if data[:4] == b"SLOW":
            time.sleep(1.5)
        return super()._decode(data, index, name)

spec = {"pipeline": [{"operation": "Resize", "dest_width": 24, "dest_height": 20, "is_output": True}]}
with InferenceServer(models=[Model("m", Slow(spec), max_batch_size=1)], port=0, grpc_port=0, max_bytes=20 << 20,
                     max_inflight_bytes=16 << 20) as server:
    print(server.grpc_port, flush=True)
    sys.stdin.read()
"""


def test_big_messages_past_the_cap_cost_bounded_memory():
    """24 messages of 15 MiB at once, while a slow request holds 8 of the 16 MiB cap: refused with
    RESOURCE_EXHAUSTED (retry) or, once there is room, answered, one at a time; the server's peak memory grows
    by far less than the 360 MiB sent (when grpc parsed every message before the cap was checked: ~0.5 GB).
    The server runs in its own process, so that its peak (VmHWM) is its own."""
    server = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())

        def peak_mib() -> int:
            with open(f"/proc/{server.pid}/status") as status:
                return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) >> 10

        def send(request, codes: list, timeout: float = 60) -> None:
            with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", -1)]) as chan:
                try:
                    service_pb2_grpc.GRPCInferenceServiceStub(chan).ModelInfer(request, timeout=timeout)
                    codes.append(grpc.StatusCode.OK)
                except grpc.RpcError as error:
                    codes.append(error.code())

        warm = []
        send(infer_request([jpeg(1)]), warm)
        send(infer_request([b"x" * (15 << 20)], shape=[2]), warm)  # (its shape is wrong: refused once parsed)
        assert warm == [grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT]
        before, codes = peak_mib(), []
        slow = threading.Thread(target=send, args=(infer_request([b"SLOW" + b"x" * (8 << 20)]), []))
        slow.start()
        time.sleep(0.3)
        big = infer_request([b"x" * (15 << 20)], shape=[2])
        threads = [threading.Thread(target=send, args=(big, codes)) for _ in range(24)]
        for thread in threads:
            thread.start()
        for thread in threads + [slow]:
            thread.join()
        grown = peak_mib() - before
        assert set(codes) <= {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT}, codes
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes and len(codes) == 24
        assert grown < 200, f"the server's peak memory grew by {grown} MiB"
    finally:
        server.stdin.close()
        server.wait(30)


# -- bad input: a status code naming the reason, never INTERNAL or UNKNOWN

Param = pb.ModelRepositoryParameter
Tensor = pb.ModelInferRequest.InferInputTensor
Contents = pb.InferTensorContents
Output = pb.ModelInferRequest.InferRequestedOutputTensor


def call(server, method: str, request, timeout: float = 30) -> tuple[grpc.StatusCode, str]:
    """(status code, details) of RPC ``method`` given ``request`` (a message, or any bytes)."""
    raw = request if isinstance(request, bytes) else request.SerializeToString()
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        try:
            channel.unary_unary(f"/inference.GRPCInferenceService/{method}")(raw, timeout=timeout)
        except grpc.RpcError as error:
            return error.code(), error.details()
    return grpc.StatusCode.OK, ""


def load(name: str = "x", **parameters) -> pb.RepositoryModelLoadRequest:
    return pb.RepositoryModelLoadRequest(model_name=name, parameters=parameters)


def infer(inputs=None, raw=None, outputs=(), model: str = "pre", version: str = "") -> pb.ModelInferRequest:
    """A ModelInferRequest of model ``pre`` (max_batch_size 4): one JPEG in raw_input_contents unless told."""
    return pb.ModelInferRequest(
        model_name=model, model_version=version, outputs=outputs,
        inputs=inputs if inputs is not None else [Tensor(name="images", datatype="BYTES", shape=[1])],
        raw_input_contents=raw if raw is not None else [len(jpeg(1)).to_bytes(4, "little") + jpeg(1)])


BAD_LOADS = [(load(batch=Param(bool_param=True)), "batch"), (load(batch=Param(bytes_param=b"8")), "batch"),
             (load(batch=Param(string_param="eight")), "batch"), (load(batch=Param(int64_param=0)), "batch"),
             (load(batch=Param(int64_param=1 << 62)), "batch"), (load(batch=Param(int64_param=-3)), "batch"),
             (load(batch=Param(string_param="9" * 5000)), "batch"), (load(batch=Param()), "batch"),
             (load(max_queue_delay_us=Param(bool_param=False)), "max_queue_delay_us"),
             (load(max_queue_delay_us=Param(int64_param=-1)), "max_queue_delay_us"),
             (load(max_queue_delay_us=Param(int64_param=1 << 62)), "max_queue_delay_us"),
             (load(max_queue_delay_us=Param(string_param="inf")), "max_queue_delay_us"),
             (load(max_queue_delay_us=Param(string_param="nan")), "max_queue_delay_us"),
             (load(classifier=Param(int64_param=5)), "classifier"),
             (load(classifier=Param(bool_param=True)), "classifier"),
             (load(classifier=Param(bytes_param=b"resnet18")), "classifier"),
             (load(model=Param(string_param="pre2.json"), classifier=Param(string_param="no_such_net")), "no_such_net"),
             (load(model=Param(bytes_param=b"pre2.json")), "model"), (load(model=Param(int64_param=1)), "model"),
             (load(model=Param(string_param="../x.json")), "outside"),
             (load(model=Param(string_param="pre2\x00.json")), "model"), (load(model=Param()), "model"),
             (load(config=Param(string_param="{}")), "config"),
             (load("a\x00b"), "name"), (load("a\nb"), "name"), (load(""), "name"), (load("x" * 1000), "name"),
             (load("a/b"), "name")]


def test_bad_repository_loads_are_invalid_argument_naming_the_parameter(server):
    for request, reason in BAD_LOADS:
        code, details = call(server, "RepositoryModelLoad", request)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and reason in details, (request, code, details)
    assert set(server.models) == {"pre", "small", "cls", "pre2"}
    assert call(server, "RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="a\x00b"))[0] == \
        grpc.StatusCode.NOT_FOUND


def _raw(*elements: bytes) -> bytes:
    return b"".join(len(e).to_bytes(4, "little") + e for e in elements)


BAD_INFERS = [
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[1], contents=Contents(bytes_contents=[b"a"]))]),
     "both"),
    (infer(raw=[_raw(b"a"), _raw(b"b")]), "raw_input_contents"),
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[1], contents=Contents(fp32_contents=[1.0]))],
           raw=[]), "not fp32_contents"),
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[1],
                          contents=Contents(bytes_contents=[b"a"], int_contents=[1]))], raw=[]), "not int_contents"),
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[3])]), "holds 3 elements"),
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[2, 2])]), "holds 4 elements"),
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[-1])]), "shape"),
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[1] * 17)]), "shape"),
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[])]), "shape"),
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[1 << 40, 1 << 40])]), "max_batch_size is 4"),
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[5])], raw=[_raw(*[b"a"] * 5)]),
     "max_batch_size is 4"),
    (infer(inputs=[Tensor(name="images", datatype="FP32", shape=[1])]), "BYTES"),
    (infer(inputs=[Tensor(name="images", shape=[1])]), "BYTES"),
    (infer(inputs=[]), "expected"),
    (infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[1])] * 2), "expected"),
    (infer(inputs=[Tensor(name="pixels", datatype="BYTES", shape=[1])]), "expected"),
    (infer(raw=[b"\x09\x00\x00\x00ab"]), "runs past"), (infer(raw=[b"\x01\x00\x00"]), "4-byte length"),
    (infer(raw=[b"\x00" * 4 * 1_000_000]), "more than 4 elements"),
    (infer(raw=[]), "holds 1 elements, 0 came"),
    (infer(outputs=[Output(name="output"), Output(name="output")]), "outputs requested"),
    (infer(outputs=[Output(name="output", parameters={"classification": pb.InferParameter(bool_param=True)})]),
     "classification"),
    (infer(outputs=[Output(name="output", parameters={"classification": pb.InferParameter(int64_param=-1)})]),
     "classification"),
    (infer(outputs=[Output(name="output", parameters={"classification": pb.InferParameter(int64_param=3)})]),
     "classification"),
    (infer(outputs=[Output(name="logits")]), "has one output"),
    (infer(raw=[_raw(b"not an image")]), "cannot decode"),
    (b"\xff\xff\xff\xff", "not a ModelInferRequest"), (b"\x0a\x05ab", "not a ModelInferRequest"),
    (b"\x0b", "not a ModelInferRequest"), (b"\x0f", "not a ModelInferRequest"),
]


def test_bad_infer_requests_are_invalid_argument_naming_the_reason(server):
    for request, reason in BAD_INFERS:
        code, details = call(server, "ModelInfer", request)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and reason in details, (str(request)[:300], code, details)
    assert call(server, "ModelInfer", infer())[0] == grpc.StatusCode.OK


def test_unknown_models_versions_and_rpcs(server):
    for name, version in (("nothing", ""), ("pre", "7"), ("a\x00b", ""), ("\n", ""), ("x" * (1 << 20), "")):
        for method, request in (("ModelInfer", infer(model=name, version=version)),
                                ("ModelMetadata", pb.ModelMetadataRequest(name=name, version=version)),
                                ("ModelStatistics", pb.ModelStatisticsRequest(name=name, version=version))):
            code, details = call(server, method, request)
            assert code == grpc.StatusCode.NOT_FOUND and 0 < len(details) <= 1000, (method, name[:10], code)
        assert not stub(server).ModelReady(pb.ModelReadyRequest(name=name, version=version)).ready
    assert call(server, "ModelConfig", pb.ModelConfigRequest(name="pre"))[0] == grpc.StatusCode.UNIMPLEMENTED
    assert call(server, "LogSettings", b"")[0] == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(grpc.RpcError) as raised:
        list(stub(server).ModelStreamInfer(iter([infer()]), timeout=10))
    assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_millions_of_elements_are_refused_without_holding_the_event_loop(server):
    """Five million empty BYTES elements (10 MB): refused by counting the message's fields, before the parser
    would hold the GIL (and so the event loop) for ~0.1-0.2 s; so are a million outputs, 20,000 load
    parameters, and a varint 16 million bytes long. The target is fastload.serve_limits.LOOP_LAG_S
    (100 ms); the bound here allows for a loaded 2-core machine."""
    many = 5_000_000
    requests = [infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[many],
                                     contents=Contents(bytes_contents=[b""] * many))], raw=[]),
                infer(inputs=[Tensor(name="images", datatype="BYTES", shape=[1])], raw=[b"\x00" * 4 * many]),
                pb.RepositoryModelLoadRequest(model_name="x", parameters={"": Param()} | {
                    str(i): Param() for i in range(20_000)}),
                infer(outputs=[Output()] * 1_000_000)]
    raws = [request.SerializeToString() for request in requests] + [b"\x08" + b"\x80" * (16 << 20) + b"\x00"]
    lag = LoopLag(server._loop, tick_s=0.005).start()
    try:
        for raw, method in zip(raws, ("ModelInfer", "ModelInfer", "RepositoryModelLoad", "ModelInfer", "ModelInfer")):
            started = time.perf_counter()
            code, details = call(server, method, raw)
            held = lag.held_during(started, time.perf_counter())
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (method, code, details)
            assert held < LOOP_LAG_S * 2.5, f"{method}: the event loop was held for {held * 1000:.0f} ms"
    finally:
        lag.stop()
    assert call(server, "ModelInfer", infer())[0] == grpc.StatusCode.OK
