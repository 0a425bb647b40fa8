"""fastload.serve on the Open Inference Protocol: driven by tritonclient.http (what Triton's users run) and by
raw HTTP for the error answers, against a server on 127.0.0.1 (an ephemeral port)."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from fastload.compat.rocal import JsonPipeline
from fastload.serve import InferenceServer, Model, load_model, model_input

from test_serve import PIPELINE, jpeg

httpclient = pytest.importorskip("tritonclient.http")
UINT8 = {"pipeline": [{"operation": "Resize", "dest_width": 24, "dest_height": 20, "is_output": True}]}
HALF = {"pipeline": [{"operation": "ResizeMirrorNormalize", "dest_width": 16, "dest_height": 16, "mirror": False,
                      "mean": [128, 128, 128], "std_dev": [64, 64, 64], "output_dtype": "float16",
                      "is_output": True}]}


@pytest.fixture(scope="module")
def classifier():
    return load_model("resnet18", seed=3)


@pytest.fixture
def server(tmp_path_factory, classifier):
    """Models: ``pre`` (PIPELINE alone, FP32), ``small`` (a uint8 resize), ``resnet18`` (PIPELINE then the
    classifier); a repository folder holding small.json and a broken pipeline."""
    repository = tmp_path_factory.mktemp("repository")
    (repository / "small.json").write_text(json.dumps(UINT8))
    (repository / "pre2.json").write_text(json.dumps(PIPELINE))
    (repository / "broken.txt").write_text("{")
    models = [Model("pre", JsonPipeline(PIPELINE), max_batch_size=16, max_queue_delay_us=20_000),
              Model("resnet18", JsonPipeline(PIPELINE), classifier, max_batch_size=16, max_queue_delay_us=20_000),
              Model("half", JsonPipeline(HALF))]
    with InferenceServer(models=models, repository=str(repository), pipeline_loader=JsonPipeline, port=0) as running:
        running.unload = running.models.pop("pre2").close  # listed by the index as unloaded
        running.unload()
        running.classifier = classifier
        yield running


def client(server):
    return httpclient.InferenceServerClient(f"127.0.0.1:{server.port}")


def images_input(images: list[bytes], binary: bool = True):
    tensor = httpclient.InferInput("images", [len(images)], "BYTES")
    if binary:
        tensor.set_data_from_numpy(np.array(images, dtype=object))
    else:  # JSON: each element the image in base64
        tensor.set_data_from_numpy(np.array([base64.b64encode(i) for i in images], dtype=object), binary_data=False)
    return tensor


def request(port: int, method: str, path: str, body: bytes = b"", headers: dict | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_health_and_metadata(server):
    triton = client(server)
    assert triton.is_server_live() and triton.is_server_ready() and triton.is_model_ready("pre")
    metadata = triton.get_server_metadata()
    assert metadata["name"] == "fastload" and "binary_tensor_data" in metadata["extensions"]
    pre = triton.get_model_metadata("pre")
    assert pre["inputs"] == [{"name": "images", "datatype": "BYTES", "shape": [-1]}]
    assert pre["outputs"] == [{"name": "output", "datatype": "FP32", "shape": [-1, 64, 64, 3]}]
    assert triton.get_model_metadata("small", "1")["outputs"][0]["datatype"] == "UINT8"
    assert triton.get_model_metadata("half")["outputs"][0]["datatype"] == "FP16"
    assert triton.get_model_metadata("resnet18")["outputs"] == [{"name": "probabilities", "datatype": "FP32",
                                                                 "shape": [-1, 1000]}]
    assert not triton.is_model_ready("nothing")


@pytest.mark.parametrize("binary", [True, False])
def test_preprocessing_equals_the_pipeline(server, binary):
    images = [jpeg(1), jpeg(2), jpeg(3)]
    triton = client(server)
    for model, pipeline in (("pre", JsonPipeline(PIPELINE)), ("small", JsonPipeline(UINT8)),
                            ("half", JsonPipeline(HALF))):
        expected = torch.stack(pipeline(images)).numpy()
        output = httpclient.InferRequestedOutput(server.models[model].output[0], binary_data=binary)
        batched = triton.infer(model, [images_input(images, binary)], outputs=[output]).as_numpy(
            server.models[model].output[0])
        assert batched.dtype == expected.dtype and np.array_equal(batched, expected)
        single = triton.infer(model, [images_input(images[1:2], binary)]).as_numpy(server.models[model].output[0])
        assert np.array_equal(single, expected[1:2])


def test_the_classifier_answers_as_the_model_run_locally(server):
    images = [jpeg(seed) for seed in range(4)]
    with torch.inference_mode():
        local = server.classifier(model_input([JsonPipeline(PIPELINE).one(i) for i in images])).softmax(1)
    result = client(server).infer("resnet18", [images_input(images)])
    probabilities = result.as_numpy("probabilities")
    assert probabilities.shape == (4, 1000) and np.allclose(probabilities, local.numpy(), atol=1e-5)
    assert (probabilities.argmax(1) == local.argmax(1).numpy()).all()
    top = client(server).infer("resnet18", [images_input(images)],
                               outputs=[httpclient.InferRequestedOutput("probabilities", class_count=3)])
    classes = top.as_numpy("probabilities")
    assert classes.shape == (4, 3) and [int(row[0].split(b":")[1]) for row in classes] == local.argmax(1).tolist()
    as_text = json.dumps({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1], "data": [
        base64.b64encode(images[0]).decode()]}], "outputs": [{"name": "probabilities", "parameters": {
            "classification": "3"}}]}).encode()  # a number as text, as gRPC's string parameters carry it
    status, _, answer = request(server.port, "POST", "/v2/models/resnet18/infer", as_text)
    assert status == 200 and json.loads(answer)["outputs"][0]["data"] == [r.decode() for r in classes[0]]


def test_32_concurrent_requests_are_answered_right_and_batched(server):
    images = {seed: jpeg(seed) for seed in range(32)}
    pipeline = JsonPipeline(PIPELINE)
    before = client(server).get_inference_statistics("pre")["model_stats"][0]

    def infer(seed):
        return seed, httpclient.InferenceServerClient(f"127.0.0.1:{server.port}").infer(
            "pre", [images_input([images[seed]])]).as_numpy("output")

    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(infer, range(32)))
    for seed, output in answers:
        assert np.array_equal(output[0], pipeline.one(images[seed]).numpy())
    after = client(server).get_inference_statistics("pre")["model_stats"][0]
    assert after["inference_count"] - before["inference_count"] == 32
    assert after["execution_count"] - before["execution_count"] < 32  # batched
    assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == 32
    assert after["inference_stats"]["queue"]["ns"] > 0 and after["batch_stats"]
    for phase in ("compute_input", "compute_output"):  # each request's decoding, and its answer's encoding
        stats, earlier = after["inference_stats"][phase], before["inference_stats"][phase]
        assert stats["count"] - earlier["count"] == 32 and stats["ns"] > earlier["ns"]
    metrics = request(server.port, "GET", "/metrics")[2].decode()
    assert 'nv_inference_request_success{model="pre",version="1"}' in metrics
    assert 'nv_inference_compute_input_duration_us{model="pre",version="1"}' in metrics


def test_bad_requests_get_4xx_with_a_reason(server):
    port, good = server.port, jpeg(4)
    with pytest.raises(httpclient.InferenceServerException, match="cannot decode"):
        client(server).infer("pre", [images_input([good, b"not an image"])])
    status, _, body = request(port, "POST", "/v2/models/nothing/infer", b"{}")
    assert status == 404 and "no model 'nothing'" in json.loads(body)["error"]
    assert request(port, "GET", "/v2/models/pre/versions/7")[0] == 404
    assert request(port, "GET", "/v2/nowhere")[0] == 404
    for body, reason in ((b"{", "not JSON"), (b'{"inputs": []}', "one BYTES tensor"),
                         (b'{"inputs": [{"name": "images", "datatype": "BYTES", "shape": [2], "data": ["!!"]}]}',
                          "base64"),
                         (b'{"inputs": [{"name": "images", "datatype": "BYTES", "shape": [2], "data": ["aGk="]}]}',
                          "holds 2 elements")):
        status, _, answer = request(port, "POST", "/v2/models/pre/infer", body)
        assert status == 400 and reason in json.loads(answer)["error"], answer
    header = json.dumps({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1],
                                     "parameters": {"binary_data_size": 8}}]}).encode()
    status, _, answer = request(port, "POST", "/v2/models/pre/infer", header + struct.pack("<I", 100) + b"abcd",
                                {"Inference-Header-Content-Length": str(len(header))})
    assert status == 400 and "runs past" in json.loads(answer)["error"]
    too_many = {"inputs": [{"name": "images", "datatype": "BYTES", "shape": [17],
                            "data": [base64.b64encode(good).decode()] * 17}]}
    status, _, answer = request(port, "POST", "/v2/models/pre/infer", json.dumps(too_many).encode())
    assert status == 400 and "max_batch_size is 16" in json.loads(answer)["error"]


def test_the_repository_loads_and_unloads_pipelines(server):
    port = server.port
    index = json.loads(request(port, "POST", "/v2/repository/index")[2])
    assert {"name": "pre2", "state": "UNAVAILABLE", "reason": "unloaded"} in index
    triton = client(server)
    status, _, _ = request(port, "POST", "/v2/repository/models/loaded/load",
                           json.dumps({"parameters": {"batch": 4, "model": "pre2.json"}}).encode())
    assert status == 200 and triton.is_model_ready("loaded")
    output = triton.infer("loaded", [images_input([jpeg(9)])]).as_numpy("output")
    assert np.array_equal(output[0], JsonPipeline(PIPELINE).one(jpeg(9)).numpy())
    for parameters, reason in (({"model": "broken.txt"}, "ends in .json"), ({"model": "../x.json"}, "outside"),
                               ({"model": "none.json"}, "no pipeline")):
        status, _, answer = request(port, "POST", "/v2/repository/models/x/load",
                                    json.dumps({"parameters": parameters}).encode())
        assert status == 400 and reason in json.loads(answer)["error"], answer
    assert request(port, "POST", "/v2/repository/models/loaded/unload")[0] == 200
    assert not triton.is_model_ready("loaded")
    assert request(port, "POST", "/v2/repository/models/loaded/unload")[0] == 404
    for _ in range(20):  # (the unloading threads of the models replaced are not kept once done)
        assert request(port, "POST", "/v2/repository/models/again/load",
                       json.dumps({"parameters": {"model": "pre2.json"}}).encode())[0] == 200
    assert len(server._unloading) < 10


class _SlowPipeline(JsonPipeline):
    def _decode(self, data, index, name):
        if data.startswith(b"SLOW"):
            time.sleep(3)
        return super()._decode(data, index, name)


def test_a_slow_image_fails_its_request_alone_and_caps_give_503():
    model = Model("m", _SlowPipeline(UINT8), max_batch_size=4, max_queue_delay_us=0)
    with InferenceServer(models=[model], port=0, decode_threads=2, decode_budget_s=1, max_connections=4,
                         max_inflight_bytes=50_000) as server:
        slow = client(server).async_infer("m", [images_input([b"SLOW"])])
        time.sleep(0.1)
        started = time.monotonic()
        assert client(server).infer("m", [images_input([jpeg(1)])]).as_numpy("output").shape == (1, 20, 24, 3)
        assert time.monotonic() - started < 1  # not behind the slow one
        with pytest.raises(httpclient.InferenceServerException, match="budget of 1 s"):
            slow.get_result()
        status, headers, body = request(server.port, "POST", "/predict", b"x" * 60_000)
        assert status == 503 and headers["Retry-After"] == "1" and "bytes in flight" in json.loads(body)["error"]
        chunked = iter([b"x" * 20_000] * 3)  # no Content-Length: charged piece by piece as it arrives
        status, headers, body = request(server.port, "POST", "/predict", chunked)
        assert status == 503 and headers["Retry-After"] == "1" and "bytes in flight" in json.loads(body)["error"]
        assert server._inflight_bytes == 0  # every charge given back
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
        time.sleep(0.2)
        status, headers, body = request(server.port, "GET", "/v2/health/live")
        assert status == 503 and headers["Retry-After"] == "1" and "connections" in json.loads(body)["error"]
        for sock in idle:
            sock.close()


def test_a_repository_without_a_pipeline_loader_is_refused(tmp_path):
    """The server knows no front end's format: a repository comes with what makes its pipelines."""
    (tmp_path / "small.json").write_text(json.dumps(UINT8))
    with pytest.raises(ValueError, match="pipeline_loader"):
        InferenceServer(repository=str(tmp_path), port=0)


def test_load_with_a_pipeline_the_checks_refuse_is_400(tmp_path):
    """The pipeline's own checks (a ValueError naming file, operation and key) answer 400, not 500."""
    ok = [Model("ok", JsonPipeline(UINT8))]
    with InferenceServer(models=ok, repository=str(tmp_path), pipeline_loader=JsonPipeline, port=0) as server:
        (tmp_path / "bad.json").write_text(json.dumps({"pipeline": [{"operation": "Resize", "dest_width": 0,
                                                                      "dest_height": 8, "is_output": True}]}))
        status, _, body = request(server.port, "POST", "/v2/repository/models/bad/load",
                                  json.dumps({"parameters": {"model": "bad.json"}}).encode())
        assert status == 400 and "dest_width" in json.loads(body)["error"] and "Traceback" not in body.decode()
    with pytest.raises(ValueError, match="dest_width"):  # at start: the repository's pipelines are checked then
        InferenceServer(models=[Model("ok", JsonPipeline(UINT8))], repository=str(tmp_path),
                        pipeline_loader=JsonPipeline, port=0)


def test_preferred_batch_sizes_run_without_waiting_for_the_delay():
    """Triton's preferred_batch_size: a batch of a preferred size with nothing more waiting runs at once, not
    after max_queue_delay."""
    from fastload.serve import Batcher
    sizes = []
    batcher = Batcher(lambda items: sizes.append(len(items)) or items, max_batch=8, max_wait_ms=5000, preferred=(2,))
    started = time.monotonic()
    futures = [batcher.submit(i) for i in range(2)]
    assert [f.result(timeout=10) for f in futures] == [0, 1] and time.monotonic() - started < 2 and sizes == [2]
    batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit(3)


def test_the_access_log_can_be_turned_on(capfd):
    with InferenceServer(models=[Model("m", JsonPipeline(UINT8))], port=0, access_log=True) as server:
        assert request(server.port, "GET", "/v2/health/live")[0] == 200
    assert '"GET /v2/health/live HTTP/1.1" 200' in capfd.readouterr().err


def test_trickling_headers_are_cut_at_the_timeout():
    """Headers sent a line now and then, each within timeout_s, must still all arrive within timeout_s (the
    HTTP stack's first-request deadline): one client cannot hold a connection open for ever."""
    with InferenceServer(models=[Model("m", JsonPipeline(UINT8))], port=0, timeout_s=1) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            with pytest.raises(OSError):
                while time.monotonic() - started < 10:
                    sock.sendall(b"X-Slow: 1\r\n")
                    time.sleep(0.3)
            assert time.monotonic() - started < 5


def error_of(answer: tuple) -> tuple[int, str]:
    """(status, the {"error": ...} body's reason): every answer but a 200 is one."""
    status, headers, body = answer
    assert headers["Content-Type"].startswith("application/json"), (status, body)
    return status, json.loads(body)["error"]


BAD_LOADS = [  # (the load body's parameters as JSON text, the name its 400 must give)
    ('"max_queue_delay_us": 1e16', "max_queue_delay_us"), ('"max_queue_delay_us": 1e999', "max_queue_delay_us"),
    ('"max_queue_delay_us": "inf"', "max_queue_delay_us"), ('"max_queue_delay_us": -1', "max_queue_delay_us"),
    ('"max_queue_delay_us": "abc"', "max_queue_delay_us"), ('"max_queue_delay_us": [5]', "max_queue_delay_us"),
    ('"max_queue_delay_us": NaN', "max_queue_delay_us"), ('"max_queue_delay_us": true', "max_queue_delay_us"),
    ('"batch": true', "batch"), ('"batch": 0', "batch"), ('"batch": 2.5', "batch"), ('"batch": "8x"', "batch"),
    ('"batch": 100000000000000000000000', "batch"), ('"batch": [8]', "batch"), ('"batch": null', "batch"),
    ('"model": 5', "model"), ('"model": ["small.json"]', "model"), ('"model": "small\\u0000.json"', "model"),
    ('"classifier": 5', "classifier"), ('"classifier": ["resnet18"]', "classifier"),
    ('"classifier": {"a": 1}', "classifier"), ('"classifier": true', "classifier"),
    ('"classifier": "no_such_net"', "no_such_net"), ('"config": "{}"', "config"),
    ('"batch": ' + "[" * 950 + "]" * 950, "batch"),  # (its repr in the message recursed as deep)
    ('"classifier": "raft_large"', "unknown torchvision model"),  # (optical flow: not a classifier)
    ('"classifier": "vit_h_14"', "over the limit"),  # (633 million parameters)
    ('"classifier": "inception_v3"', "cannot take the pipeline's [20, 24, 3] output")]


@pytest.mark.parametrize("parameters, named", BAD_LOADS)
def test_a_load_with_a_bad_parameter_is_400_naming_it_and_kills_nothing(server, parameters, named):
    """Every number of a repository load is range-checked before use (max_queue_delay_us of 1e16 or Infinity
    was taken, then its batcher died in queue.get), booleans are refused for ints, a classifier or file of the
    wrong type is 400 (500 before); the server goes on serving."""
    body = ('{"parameters": {"model": "small.json", ' + parameters + "}}").encode()
    status, reason = error_of(request(server.port, "POST", "/v2/repository/models/loaded/load", body))
    assert status == 400 and named in reason, reason
    assert "loaded" not in server.models
    assert client(server).infer("small", [images_input([jpeg(2)])]).as_numpy("output").shape == (1, 20, 24, 3)


def test_numbers_as_text_and_at_their_bounds_are_loaded(server):
    """gRPC's string parameters carry numbers as text: "4" is 4; the bounds themselves are accepted."""
    body = json.dumps({"parameters": {"model": "small.json", "batch": "4", "max_queue_delay_us": "0"}}).encode()
    assert request(server.port, "POST", "/v2/repository/models/loaded/load", body)[0] == 200
    assert server.models["loaded"].max_batch_size == 4 and server.models["loaded"].batcher.max_wait == 0
    body = json.dumps({"parameters": {"model": "small.json", "batch": 1024, "max_queue_delay_us": 1e7}}).encode()
    assert request(server.port, "POST", "/v2/repository/models/loaded/load", body)[0] == 200
    assert client(server).infer("loaded", [images_input([jpeg(2)])]).as_numpy("output").shape == (1, 20, 24, 3)


@pytest.mark.parametrize("name", ["a%00b", "a%0Ab", "a%0D%0Anv_forged%201", "%09", "x" * 300, "a%2Fb", "..", "."])
def test_a_model_name_with_control_characters_or_a_slash_is_refused(server, name):
    """A NUL in a model name answered 500; a newline reaches logs and /metrics."""
    status, reason = error_of(request(server.port, "POST", f"/v2/repository/models/{name}/load",
                                      json.dumps({"parameters": {"model": "small.json"}}).encode()))
    assert status in (400, 404) and ("model name" in reason or "no /v2" in reason), reason


def test_metrics_escape_label_values(server):
    """A model name holding a double quote and a backslash is written as Prometheus' text format escapes
    it, so no one can forge series; every line parses."""
    import re
    name = 'q" 1\\evil'
    from urllib.parse import quote
    status, _, _ = request(server.port, "POST", f"/v2/repository/models/{quote(name)}/load",
                           json.dumps({"parameters": {"model": "small.json"}}).encode())
    assert status == 200 and name in server.models
    text = request(server.port, "GET", "/metrics")[2].decode()
    assert 'nv_inference_count{model="q\\" 1\\\\evil",version="1"} 0' in text
    sample = re.compile(r'^[a-z_]+(\{model="(?:[^"\\\n]|\\["\\n])*",version="1"\})? \d+$')
    for line in text.splitlines():
        assert line.startswith("# TYPE ") or sample.match(line), line
    from fastload.serve_metrics import label
    assert label('a\\b"c\nd') == 'a\\\\b\\"c\\nd'


def infer_body(request_json: dict) -> bytes:
    return json.dumps(request_json).encode()


IMAGE = {"name": "images", "datatype": "BYTES", "shape": [1], "data": ["aGk="]}
BAD_INFERS = [  # (the body, what the 400 must say)
    (infer_body({"inputs": [IMAGE], "parameters": [1]}), "parameters"),
    (infer_body({"inputs": [IMAGE], "parameters": "binary"}), "parameters"),
    (infer_body({"inputs": [dict(IMAGE, parameters=[])]}), "parameters"),
    (infer_body({"inputs": [dict(IMAGE, parameters="x")]}), "parameters"),
    (infer_body({"inputs": [IMAGE], "outputs": [{"name": "output", "parameters": ["x"]}]}), "parameters"),
    (infer_body({"inputs": [IMAGE], "outputs": [{"name": "output", "parameters": {"binary_data": "yes"}}]}),
     "binary_data"),
    (infer_body({"inputs": [IMAGE], "parameters": {"binary_data_output": 1}}), "binary_data_output"),
    (infer_body({"inputs": [IMAGE], "outputs": [{"name": "output", "parameters": {"classification": True}}]}),
     "classification"),
    (infer_body({"inputs": [IMAGE], "outputs": [{"name": "output", "parameters": {"classification": -1}}]}),
     "classification"),
    (infer_body({"inputs": [IMAGE], "outputs": ["output"]}), "outputs"),
    (infer_body({"inputs": [IMAGE], "outputs": {"name": "output"}}), "outputs"),
    (infer_body({"inputs": [IMAGE], "outputs": [{"parameters": {}}]}), "outputs"),
    (infer_body({"inputs": [IMAGE], "id": {"a": 1}}), "id"),
    (infer_body({"inputs": [dict(IMAGE, shape=[True])]}), "shape"),
    (infer_body({"inputs": [dict(IMAGE, shape=[1] * 17)]}), "shape"),
    (infer_body({"inputs": [dict(IMAGE, shape=[10 ** 30])]}), "max_batch_size"),
    (infer_body({"inputs": [dict(IMAGE, data="aGk=")]}), "data"),
    (infer_body({"inputs": [dict(IMAGE, parameters={"binary_data_size": True})]}), "binary_data_size"),
    (b'{"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1], "data": ' + b"[" * 950 + b'"aGk="'
     + b"]" * 950 + b"}]}", "nested"),
    (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    (b'{"inputs": [' + b"0," * 70_000 + b"0]}", "JSON values"),
]


@pytest.mark.parametrize("body, reason", BAD_INFERS, ids=range(len(BAD_INFERS)))
def test_a_malformed_infer_request_is_400_naming_its_fault(server, body, reason):
    """parameters given as a list or a string (request, input, output), fields of the wrong type, JSON nested
    950 deep (parsed, then a RecursionError), more JSON values than any request holds: each answered 500, or
    taken, before."""
    status, why = error_of(request(server.port, "POST", "/v2/models/pre/infer", body))
    assert status == 400 and reason in why, why


def test_a_header_length_of_5000_digits_is_400(server):
    """int() of more than 4,300 digits raises ValueError: it answered 500."""
    status, why = error_of(request(server.port, "POST", "/v2/models/pre/infer", b"{}",
                                   {"Inference-Header-Content-Length": "9" * 5000}))
    assert status == 400 and "Inference-Header-Content-Length" in why


def test_max_models_caps_loads_and_queues_answer_503(tmp_path):
    """Past max_models a load is 429 (a reload of a loaded model is not a new one); a model whose batcher
    queue is full answers 503 with Retry-After instead of queueing without bound."""
    (tmp_path / "small.json").write_text(json.dumps(UINT8))
    release = __import__("threading").Event()

    class Held(JsonPipeline):
        def _process(self, items):
            release.wait(30)
            return super()._process(items)

    models = [Model("held", Held(UINT8), max_batch_size=1, max_queue_delay_us=0, max_queue=1)]
    with InferenceServer(models=models, repository=str(tmp_path), pipeline_loader=JsonPipeline, port=0,
                         max_models=3) as server:  # (held, small of the repository, one more)
        load = json.dumps({"parameters": {"model": "small.json"}}).encode()
        assert request(server.port, "POST", "/v2/repository/models/second/load", load)[0] == 200
        assert request(server.port, "POST", "/v2/repository/models/second/load", load)[0] == 200  # a reload
        status, why = error_of(request(server.port, "POST", "/v2/repository/models/third/load", load))
        assert status == 429 and "max_models" in why and "third" not in server.models
        assert request(server.port, "POST", "/v2/repository/models/second/unload")[0] == 200
        assert request(server.port, "POST", "/v2/repository/models/third/load", load)[0] == 200
        try:
            held = [client(server).async_infer("held", [images_input([jpeg(1)])]) for _ in range(2)]
            deadline = time.monotonic() + 20
            while server.models["held"].batcher._waiting < 1 and time.monotonic() < deadline:
                time.sleep(0.02)  # (one in process, one queued)
            answer = request(server.port, "POST", "/predict", jpeg(1))
            status, why = error_of(answer)
            assert status == 503 and answer[1]["Retry-After"] == "1" and "limit is 1" in why
        finally:
            release.set()
        assert all(h.get_result().as_numpy("output").shape == (1, 20, 24, 3) for h in held)
    with pytest.raises(ValueError, match="max_models"):
        InferenceServer(models=[Model("a", JsonPipeline(UINT8))], repository=str(tmp_path),
                        pipeline_loader=JsonPipeline, port=0, max_models=1)


def test_five_million_empty_bytes_elements_do_not_hold_the_event_loop(server):
    """A 20 MB binary BYTES tensor of five million empty elements was parsed whole on the event loop (4-7 s)
    before the count was refused; parsing now stops past the model's max_batch_size, a body of 20 MB of
    JSON values is refused on a count of its commas before json.loads, and a 14 MB base64 image is parsed in
    a thread, 1 MiB of base64 a call. The target is 100 ms
    (serve_limits.LOOP_LAG_S); the bound here leaves room for 2 loaded cores."""
    from fastload.serve_metrics import LoopLag
    header = json.dumps({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1],
                                     "parameters": {"binary_data_size": 20_000_000}}]}).encode()
    binary = header + b"\0\0\0\0" * 5_000_000
    flat = b'{"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1], "data": [' + b'"",' * 6_000_000 \
        + b'""]}]}'
    large = json.dumps({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [1],
                                    "data": [base64.b64encode(b"\xff" * (14 << 20)).decode()]}]}).encode()
    lag = LoopLag(server._loop).start()
    try:
        started = time.perf_counter()  # (the loop's holds while the requests ran: this process's own work aside)
        status, why = error_of(request(server.port, "POST", "/v2/models/pre/infer", binary,
                                       {"Inference-Header-Content-Length": str(len(header))}))
        assert status == 400 and "more than 16 elements" in why
        status, why = error_of(request(server.port, "POST", "/v2/models/pre/infer", flat))
        assert status == 400 and "JSON values" in why
        status, why = error_of(request(server.port, "POST", "/v2/models/pre/infer", large))  # (~130 ms on the loop;
        assert status == 400 and "cannot decode" in why  # parsed in a thread a chunk at a time, ~20)
        worst = lag.held_during(started, time.perf_counter())
    finally:
        lag.stop()
    assert worst < 0.25, f"the event loop was held {worst * 1000:.0f} ms"


def test_a_large_json_answer_does_not_hold_the_event_loop():
    """Eight 224x224 float32 outputs as JSON are 1.2 million numbers: json.dumps of them on the loop held it
    for half a second; they are written in a thread a chunk at a time, and equal the pipeline's."""
    from fastload.serve_metrics import LoopLag
    large = {"pipeline": [{"operation": "ResizeMirrorNormalize", "dest_width": 224, "dest_height": 224,
                           "mirror": False, "mean": [0, 0, 0], "std_dev": [1, 1, 1], "output_dtype": "float32",
                           "is_output": True}]}
    images = [jpeg(seed) for seed in range(8)]
    body = json.dumps({"id": "x", "inputs": [{"name": "images", "datatype": "BYTES", "shape": [8],
                                              "data": [base64.b64encode(i).decode() for i in images]}]}).encode()
    with InferenceServer(models=[Model("large", JsonPipeline(large))], port=0) as server:
        lag = LoopLag(server._loop).start()
        try:
            started = time.perf_counter()
            status, _, answer = request(server.port, "POST", "/v2/models/large/infer", body)
            worst = lag.held_during(started, time.perf_counter())
        finally:
            lag.stop()
    assert status == 200, answer[:200]
    answer = json.loads(answer)
    assert answer["id"] == "x" and answer["outputs"][0]["shape"] == [8, 224, 224, 3]
    expected = torch.stack(JsonPipeline(large)(images)).flatten()
    assert torch.equal(torch.tensor(answer["outputs"][0]["data"]), expected)
    assert worst < 0.25, f"the event loop was held {worst * 1000:.0f} ms"


def test_a_compressed_body_meets_the_limits_at_its_inflated_size():
    """A gzip body of 3 KB that inflates to 3 MB was charged 3 KB to the bytes in flight, and past max_bytes
    (aiohttp's 413) was answered 400 as if the client had stopped sending: it is charged inflated (503 past
    the cap) and 413 past max_bytes; a compressed image within both is served (tritonclient can compress)."""
    import gzip
    for inflight, inflated, answer in ((2 << 20, 3 << 20, 413), (1 << 19, 600 << 10, 503)):
        with InferenceServer(models=[Model("m", JsonPipeline(UINT8))], port=0, max_bytes=1 << 20,
                             max_inflight_bytes=inflight) as server:
            body = gzip.compress(b"\0" * inflated)
            status, why = error_of(request(server.port, "POST", "/predict", body, {"Content-Encoding": "gzip"}))
            assert status == answer and ("inflated" in why if answer == 413 else "bytes in flight" in why), why
            status, _, body = request(server.port, "POST", "/predict", gzip.compress(jpeg(3)),
                                      {"Content-Encoding": "gzip"})
            assert status == 200 and json.loads(body)["shape"] == [20, 24, 3]
            assert server._inflight_bytes == 0


def test_a_repository_file_named_in_bytes_that_are_not_utf8_is_refused_at_start(tmp_path):
    """Python names such a file with lone surrogates, which no answer can encode (/metrics failed with
    UnicodeEncodeError): the server refuses to start, naming it, as for any pipeline its checks refuse."""
    os = __import__("os")
    with open(os.path.join(os.fsencode(tmp_path), b"bad\xff.json"), "w") as file:
        file.write(json.dumps(UINT8))
    with pytest.raises(ValueError, match="UTF-8"):
        InferenceServer(repository=str(tmp_path), pipeline_loader=JsonPipeline, port=0)
