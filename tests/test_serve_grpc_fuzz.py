"""fastload serve's gRPC API fuzzed from the protocol's own message descriptors (tritonclient.grpc.service_pb2):
for each RPC, Hypothesis builds request messages field by field from the request's DESCRIPTOR (every scalar
type, nested messages, repeated fields, maps, oneofs; strings drawn mostly from the names the server knows, so
that requests get past the first check), near-valid requests with one part replaced, valid messages with bytes
flipped, inserted or cut, and random bytes, and sends them to a real server on 127.0.0.1. Checked: no answer is
INTERNAL, UNKNOWN or DEADLINE_EXCEEDED (a bug, or a request that hung), the server's event loop is never held
past LAG_BOUND_S while a request is in flight (a watchdog on ``server._loop``), and the models still answer a
normal request on both APIs after each run. Seeded (derandomize) and bounded, about 20 s in all;
benchmarks/fuzz_grpc.py runs the same checks longer (it loads this file for them).
"""

from __future__ import annotations

import gc
import http.client
import io
import json
import pathlib
import time
from collections import Counter

import pytest

pytest.importorskip("tritonclient.grpc")
hypothesis = pytest.importorskip("hypothesis")
import grpc  # noqa: E402  (installed with tritonclient.grpc)
from google.protobuf import descriptor as pbd  # noqa: E402
from google.protobuf import message_factory  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tritonclient.grpc import service_pb2 as pb  # noqa: E402

from fastload.compat.rocal import JsonPipeline  # noqa: E402
from fastload.sample_data import make_image  # noqa: E402
from fastload.serve import InferenceServer  # noqa: E402
from fastload.serve_metrics import LoopLag  # noqa: E402

SERVICE = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
UNARY = [m.name for m in SERVICE.methods if not (m.client_streaming or m.server_streaming)]
TINY = {"pipeline": [{"operation": "Resize", "dest_width": 8, "dest_height": 6, "is_output": True}]}
MODELS = ("m", "small")  # the repository's pipelines, loaded at start
KEPT = "kept-5f0c"  # a model no drawn name reaches (nothing unloads it): the one checked after each run
LAG_BOUND_S = 0.25  # the target is 100 ms (serve_limits.LOOP_LAG_S); the margin is for 2 loaded cores
BAD = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED}
pytestmark = pytest.mark.filterwarnings("ignore:a [A-Z]+ image in a rocAL pipeline")  # (drawn bytes: GIF, PNG)


def tiny_jpeg(seed: int) -> bytes:
    out = io.BytesIO()
    make_image(seed, 16 + seed % 16, 12 + seed % 8).save(out, "JPEG", quality=80)
    return out.getvalue()


def start_server(folder: pathlib.Path) -> InferenceServer:
    """A server of tiny pipelines from a repository in ``folder`` (``m``, ``small`` and KEPT), with small caps
    so that fuzzing reaches them (max_models, max_bytes, max_inflight_bytes)."""
    for name in (*MODELS, KEPT):
        (folder / f"{name}.json").write_text(json.dumps(TINY))
    return InferenceServer(repository=str(folder), pipeline_loader=JsonPipeline, port=0, grpc_port=0, max_batch=4,
                           max_models=5, max_bytes=1 << 20, max_inflight_bytes=4 << 20, timeout_s=5,
                           decode_budget_s=5).start()


# -- strategies, from the messages' descriptors

JPEGS = [tiny_jpeg(seed) for seed in range(3)]
NAMES = [*MODELS, KEPT[:4], "", "1", "2", "images", "output", "probabilities", "BYTES", "FP32", "UINT8",
         "model", "batch", "classifier", "max_queue_delay_us", "classification", "binary_data", "m.json",
         "small.json", "../m.json", "/etc/passwd", "a\x00b", "a\nb", "x" * 300, "1e999", "-1", "18446744073709551616"]


def bytes_tensor(elements: list[bytes]) -> bytes:
    """Triton's raw BYTES tensor: each element a 4-byte little-endian length and its bytes."""
    return b"".join(len(e).to_bytes(4, "little") + e for e in elements)


STRINGS = st.one_of(st.sampled_from(NAMES), st.text(max_size=12))
BINARIES = st.one_of(st.binary(max_size=48), st.sampled_from(JPEGS),
                     st.lists(st.one_of(st.sampled_from(JPEGS), st.binary(max_size=16)), max_size=5).map(bytes_tensor))
INT32, INT64 = st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 63), (1 << 63) - 1)
SMALL = st.integers(-2, 6)  # (sizes and counts near the server's bounds are the interesting ones)
F = pbd.FieldDescriptor
SCALARS = {F.TYPE_DOUBLE: st.floats(), F.TYPE_FLOAT: st.floats(width=32), F.TYPE_BOOL: st.booleans(),
           F.TYPE_INT32: st.one_of(SMALL, INT32), F.TYPE_SINT32: INT32, F.TYPE_SFIXED32: INT32,
           F.TYPE_INT64: st.one_of(SMALL, INT64), F.TYPE_SINT64: INT64, F.TYPE_SFIXED64: INT64,
           F.TYPE_UINT32: st.integers(0, (1 << 32) - 1), F.TYPE_FIXED32: st.integers(0, (1 << 32) - 1),
           F.TYPE_UINT64: st.one_of(st.integers(0, 6), st.integers(0, (1 << 64) - 1)),
           F.TYPE_FIXED64: st.integers(0, (1 << 64) - 1), F.TYPE_STRING: STRINGS, F.TYPE_BYTES: BINARIES}


def _repeated(field) -> bool:
    return getattr(field, "is_repeated", None) if hasattr(field, "is_repeated") else field.label == F.LABEL_REPEATED


def _value(field, depth: int) -> st.SearchStrategy:
    """One value of ``field`` (a message for a message field, built to ``depth`` more levels)."""
    if field.type == F.TYPE_MESSAGE:
        return messages(field.message_type, depth - 1)
    if field.type == F.TYPE_ENUM:
        return st.one_of(st.sampled_from([v.number for v in field.enum_type.values]), st.integers(-3, 100))
    return SCALARS[field.type]


def _field(field, depth: int) -> st.SearchStrategy:
    """What ``field`` is set to: a value, a list of them (repeated), or a dict (a map)."""
    if field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return st.dictionaries(_value(key, depth), _value(value, depth), max_size=3)
    if _repeated(field):
        return st.lists(_value(field, depth), max_size=4)
    return _value(field, depth)


def _build(descriptor, values: dict):
    message = message_factory.GetMessageClass(descriptor)()
    for name, value in values.items():
        field, target = descriptor.fields_by_name[name], getattr(message, name)
        if field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry:
            for key, item in value.items():
                if field.message_type.fields_by_name["value"].type == F.TYPE_MESSAGE:
                    target[key].CopyFrom(item)
                else:
                    target[key] = item
        elif _repeated(field):
            for item in value:
                target.add().CopyFrom(item) if field.type == F.TYPE_MESSAGE else target.append(item)
        elif field.type == F.TYPE_MESSAGE:
            target.CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


def messages(descriptor, depth: int = 3) -> st.SearchStrategy:
    """Messages of ``descriptor``: any subset of its fields set (one field at most of each oneof), each to a
    value of its type; nested messages ``depth`` levels deep at most (deeper: empty)."""
    if depth <= 0:
        return st.just(message_factory.GetMessageClass(descriptor)())
    plain = {f.name: _field(f, depth) for f in descriptor.fields if f.containing_oneof is None}
    oneofs = [st.one_of(st.just({}), *[_field(f, depth).map(lambda v, name=f.name: {name: v}) for f in oneof.fields])
              for oneof in descriptor.oneofs]
    return st.tuples(st.fixed_dictionaries({}, optional=plain), *oneofs).map(
        lambda parts: _build(descriptor, {k: v for part in parts for k, v in part.items()}))


def _valid(method: str) -> bytes:
    """A request of ``method`` the server answers OK (or UNIMPLEMENTED), to mutate."""
    request_type = message_factory.GetMessageClass(SERVICE.methods_by_name[method].input_type)
    if method == "ModelInfer":
        return pb.ModelInferRequest(model_name="m", inputs=[pb.ModelInferRequest.InferInputTensor(
            name="images", datatype="BYTES", shape=[2])], raw_input_contents=[bytes_tensor(JPEGS[:2])]
                                    ).SerializeToString()
    if method == "RepositoryModelLoad":
        return pb.RepositoryModelLoadRequest(model_name="small", parameters={
            "model": pb.ModelRepositoryParameter(string_param="small.json"),
            "batch": pb.ModelRepositoryParameter(int64_param=2)}).SerializeToString()
    fields = request_type.DESCRIPTOR.fields_by_name
    return request_type(**{k: v for k, v in (("name", "m"), ("model_name", "m")) if k in fields}).SerializeToString()


def _mutated(raw: bytes) -> st.SearchStrategy:
    """``raw`` with a few bytes flipped, inserted or cut."""
    edit = st.tuples(st.integers(0, len(raw)), st.integers(0, 3), st.binary(max_size=3))
    return st.lists(edit, min_size=1, max_size=3).map(
        lambda edits: _apply(raw, edits))


def _apply(raw: bytes, edits) -> bytes:
    for at, cut, insert in edits:
        raw = raw[:at] + insert + raw[at + cut:]
    return raw


def _near_valid_infer() -> st.SearchStrategy:
    """Valid infer requests with one part drawn instead: the input, the output, the data or the parameters."""
    tensor = pb.ModelInferRequest.InferInputTensor
    inputs = messages(tensor.DESCRIPTOR, 3).map(lambda t: [t])
    images = st.lists(st.sampled_from(JPEGS), min_size=1, max_size=5)
    return st.fixed_dictionaries({
        "model_name": st.sampled_from([*MODELS, KEPT, "nothing"]),
        "inputs": st.one_of(images.map(lambda i: [tensor(name="images", datatype="BYTES", shape=[len(i)])]), inputs),
        "raw_input_contents": st.one_of(images.map(lambda i: [bytes_tensor(i)]), st.lists(BINARIES, max_size=2)),
        "outputs": st.lists(messages(pb.ModelInferRequest.InferRequestedOutputTensor.DESCRIPTOR, 3), max_size=2),
        "parameters": st.dictionaries(STRINGS, messages(pb.InferParameter.DESCRIPTOR, 2), max_size=2),
    }).map(lambda kw: _build(pb.ModelInferRequest.DESCRIPTOR, kw).SerializeToString())


def requests(method: str) -> st.SearchStrategy[bytes]:
    """The bytes sent to ``method``: a message built from its descriptor, a mutated valid one, random bytes,
    and for ModelInfer near-valid requests too."""
    descriptor = SERVICE.methods_by_name[method].input_type
    kinds = [messages(descriptor).map(lambda m: m.SerializeToString()), _mutated(_valid(method)),
             st.binary(max_size=64)]
    if method == "ModelInfer":
        kinds.insert(0, _near_valid_infer())
    return st.one_of(*kinds)


# -- sending and checking


class Fuzzer:
    """Sends requests to a running server and checks each answer: its status counted, a bad one (BAD) kept
    with the request, and the event loop's longest hold while a request was in flight (the client shares the
    process and its GIL: its own work between requests is not counted)."""

    def __init__(self, server: InferenceServer):
        self.server, self.statuses, self.failures, self.worst = server, Counter(), [], (0.0, "")
        self.channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
        self.lag = LoopLag(server._loop, tick_s=0.005).start()

    def send(self, method: str, raw: bytes) -> grpc.StatusCode:
        started = time.perf_counter()
        try:
            if method == "ModelStreamInfer":
                list(self.channel.stream_stream(f"/{SERVICE.full_name}/{method}")(iter([raw]), timeout=30))
            else:
                self.channel.unary_unary(f"/{SERVICE.full_name}/{method}")(raw, timeout=30)
            code, details = grpc.StatusCode.OK, ""
        except grpc.RpcError as error:
            code, details = error.code(), error.details()
        held = self.lag.held_during(started, time.perf_counter())
        self.statuses[(method, code.name)] += 1
        if held > self.worst[0]:
            self.worst = (held, f"{method} {raw[:80]!r}")
        if code in BAD:
            self.failures.append(f"{method} {raw[:200]!r}: {code.name} {details}")
        return code

    def check(self) -> None:
        """Raise at a bad status, or a hold of the loop past LAG_BOUND_S."""
        assert not self.failures, self.failures[0]
        assert self.worst[0] < LAG_BOUND_S, f"the event loop was held {self.worst[0] * 1000:.0f} ms: {self.worst[1]}"

    def serves(self) -> None:
        """KEPT answers a normal request on each API."""
        response = pb.ModelInferResponse.FromString(self.channel.unary_unary(f"/{SERVICE.full_name}/ModelInfer")(
            pb.ModelInferRequest(model_name=KEPT, inputs=[pb.ModelInferRequest.InferInputTensor(
                name="images", datatype="BYTES", shape=[1])], raw_input_contents=[bytes_tensor(JPEGS[:1])]
            ).SerializeToString(), timeout=10))
        assert list(response.outputs[0].shape) == [1, 6, 8, 3]
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            body = json.dumps({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1],
                                           "parameters": {"binary_data_size": len(bytes_tensor(JPEGS[:1]))}}]})
            connection.request("POST", f"/v2/models/{KEPT}/infer", body=body.encode() + bytes_tensor(JPEGS[:1]),
                               headers={"Inference-Header-Content-Length": str(len(body))})
            assert connection.getresponse().status == 200
        finally:
            connection.close()

    def close(self) -> None:
        self.lag.stop()
        self.channel.close()


@pytest.fixture
def fuzzer(tmp_path):
    """A server of its own for each test (no server thread may outlive a test: conftest checks). The objects
    made so far (torch's, the suite's, the strategies') are frozen out of the cyclic collector meanwhile: its
    full pass over them holds the GIL, and so the server's loop, for 0.1-0.4 s here, which is the test
    process's doing, not a request's."""
    server = start_server(tmp_path)
    fuzzing = Fuzzer(server)
    gc.collect()
    gc.freeze()
    try:
        yield fuzzing
    finally:
        gc.unfreeze()
        fuzzing.close()
        server.close()


EXAMPLES = {"ModelInfer": 400, "RepositoryModelLoad": 200}  # (the others: 60 each)
FUZZ = settings(derandomize=True, deadline=None, database=None, max_examples=60,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("method", UNARY)
def test_every_rpc_answers_drawn_requests_with_a_status_of_the_protocol(fuzzer, method):
    @settings(FUZZ, max_examples=EXAMPLES.get(method, 60))
    @given(requests(method))
    def run(raw):
        fuzzer.send(method, raw)
        fuzzer.check()

    run()
    fuzzer.serves()


@settings(FUZZ, max_examples=400)
@given(st.data())
def test_drawn_infer_requests_interleaved_with_repository_calls(fuzzer, data):
    """Inference and repository loads and unloads, drawn in turn: what one RPC changes, the next meets."""
    method = data.draw(st.sampled_from(["ModelInfer", "ModelInfer", "RepositoryModelLoad", "RepositoryModelUnload",
                                        "ModelReady", "ModelStatistics", "RepositoryIndex"]))
    fuzzer.send(method, data.draw(requests(method)))
    fuzzer.check()


def test_streaming_and_the_models_after_the_runs(fuzzer):
    assert fuzzer.send("ModelStreamInfer", _valid("ModelInfer")) == grpc.StatusCode.UNIMPLEMENTED
    fuzzer.check()
    fuzzer.serves()
    assert fuzzer.server._inflight_bytes == 0
