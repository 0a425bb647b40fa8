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
