"""fastload.serve: the inference server (POST /predict and the hostile-client cases; the Open Inference
Protocol is tests/test_serving_protocol.py), started on 127.0.0.1 by the tests, under concurrent load with
good, broken, non-image and oversized requests; every answer checked against the model run on that image
alone."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import random
import signal
import subprocess
import time
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from fastload.compat.rocal import JsonPipeline
from fastload.sample_data import make_image
from fastload.serve import Batcher, InferenceServer, load_model, model_input, top5

PIPELINE = {"pipeline": [
    {"operation": "Resize", "dest_width": 72, "dest_height": 72},
    {"operation": "CropMirrorNormalize", "crop_height": 64, "crop_width": 64, "start_x": 0.5, "start_y": 0.5,
     "mean": [123.675, 116.28, 103.53], "std_dev": [58.395, 57.12, 57.375], "output_dtype": "float32",
     "is_output": True}]}


def jpeg(seed: int) -> bytes:
    rng = random.Random(seed)
    out = io.BytesIO()
    make_image(seed, rng.randint(40, 300), rng.randint(40, 300)).save(out, "JPEG", quality=85)
    return out.getvalue()


def post(port: int, body: bytes, path: str = "/predict") -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/octet-stream"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.fixture(scope="module")
def model():
    return load_model("resnet18", seed=3)


def alone(pipeline, model, data: bytes) -> list[dict]:
    with torch.inference_mode():
        return top5(model(model_input([pipeline.one(data)])))[0]


def test_500_concurrent_requests_each_answered_right(model):
    """Good images answer their own top-5 (the model on that image alone, within float tolerance: batching
    changes nothing); broken and non-image bodies get 400 with the reason; oversized ones 413."""
    pipeline = JsonPipeline(PIPELINE)
    images = {seed: jpeg(seed) for seed in range(40)}
    expected = {seed: alone(pipeline, model, data) for seed, data in images.items()}
    broken = images[0][: len(images[0]) // 3]
    requests = []
    for i in range(500):
        kind = ("good", "good", "good", "broken", "text", "big")[i % 6]
        seed = i % 40
        body = {"good": images[seed], "broken": broken, "text": b"hello, not an image",
                "big": os.urandom(300_000)}[kind]
        requests.append((kind, seed, body))
    with InferenceServer(pipeline, model, port=0, max_batch=16, max_wait_ms=10, max_bytes=200_000) as server:
        with ThreadPoolExecutor(64) as pool:
            answers = list(pool.map(lambda r: post(server.port, r[2]), requests))
        batches = server.batcher.batches
    for (kind, seed, _), (status, body) in zip(requests, answers):
        if kind == "good":
            assert status == 200, body
            assert [c["class"] for c in body["top5"]] == [c["class"] for c in expected[seed]]
            assert all(abs(a["probability"] - b["probability"]) < 1e-4
                       for a, b in zip(body["top5"], expected[seed]))
        elif kind == "big":
            assert status == 413 and "limit is 200000" in body["error"]
        else:
            assert status == 400 and body["error"].startswith("cannot decode: "), body
    good = sum(kind == "good" for kind, _, _ in requests)
    assert batches < good  # requests were batched


def test_health_unknown_paths_and_empty_bodies(model):
    with InferenceServer(JsonPipeline(PIPELINE), model, port=0, name="resnet18") as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        connection.request("GET", "/health")
        health = json.loads(connection.getresponse().read())
        assert health["status"] == "ok" and health["model"] == "resnet18" and health["output_shape"] == [64, 64, 3]
        connection.request("GET", "/predict")
        response = connection.getresponse()
        assert response.status == 405 and response.getheader("Allow") == "POST" and "POST" in response.read().decode()
        connection.close()
        assert post(server.port, b"x", "/nowhere")[0] == 404
        status, body = post(server.port, b"")
        assert status == 400 and "empty body" in body["error"]
        status, body = post(server.port, b"--boundary\r\nContent-Disposition: form-data")
        assert status == 400 and "not a form" in body["error"] and "BytesIO" not in body["error"]


def test_a_timeout_must_be_positive(model):
    for timeout in (0, -1):
        with pytest.raises(ValueError, match="above 0"):
            InferenceServer(JsonPipeline(PIPELINE), model, port=0, timeout_s=timeout)


def test_an_unknown_model_is_named_at_once():
    with pytest.raises(ValueError, match=r"unknown torchvision model 'resnet999' \(like it: .*resnet18"):
        load_model("resnet999")


def test_close_answers_the_requests_in_flight(model):
    """close() once 8 requests are accepted and waiting for their batch: every one still gets its answer,
    and a request after it finds no server."""
    import time
    server = InferenceServer(JsonPipeline(PIPELINE), model, port=0, max_batch=64, max_wait_ms=500).start()
    data, answers = jpeg(7), []
    threads = [threading.Thread(target=lambda: answers.append(post(server.port, data)[0])) for _ in range(8)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while server.requests < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.close()
    for thread in threads:
        thread.join()
    assert answers == [200] * 8
    with pytest.raises(ConnectionRefusedError):
        post(server.port, data)


def test_the_batcher_hands_a_model_failure_to_every_request_of_the_batch():
    def broken_model(batch):
        raise RuntimeError("out of memory")
    batcher = Batcher(broken_model, max_batch=4, max_wait_ms=20)
    futures = [batcher.submit(torch.zeros(2)) for _ in range(3)]
    for future in futures:
        with pytest.raises(RuntimeError, match="out of memory"):
            future.result(timeout=10)
    batcher.close()


def test_fastload_serve_command_starts_answers_and_stops_on_sigterm(tmp_path):
    pipeline = tmp_path / "p.json"
    pipeline.write_text(json.dumps(PIPELINE))
    command = [sys.executable, "-m", "fastload", "serve", "--pipeline", str(pipeline), "--model", "resnet18",
               "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        port = int(line.split("http://127.0.0.1:")[1].split()[0])
        status, body = post(port, jpeg(3))
        assert status == 200 and len(body["top5"]) == 5
        httpclient = pytest.importorskip("tritonclient.http")
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        assert client.is_server_live() and client.is_model_ready("resnet18") and client.is_model_ready("p")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0  # SIGTERM: out within 20 s
    finally:
        process.kill()
    with pytest.raises(SystemExit, match="unknown torchvision model"):
        from fastload.cli import main
        main(["serve", "--pipeline", str(pipeline), "--model", "no_such_net"])


def raw(port: int, data: bytes, shut_write: bool = False, timeout: float = 30) -> bytes:
    """Send ``data`` as it is on a fresh connection, then read until the server closes it (or ``timeout``)."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        if shut_write:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        try:
            while piece := sock.recv(65536):
                received += piece
        except TimeoutError:
            pass
        return received


def statuses(received: bytes) -> list[int]:
    return [int(line.split()[1]) for line in received.split(b"\r\n") if line.startswith(b"HTTP/1.")]


def test_request_framing_is_checked_before_the_model(model):
    """The HTTP stack (aiohttp's parser) frames requests: odd Content-Length digits, two different values, a
    Transfer-Encoding beside a Content-Length (how a request is smuggled past a proxy: the one after it is
    not answered) are 400 and never reach the model; a body cut short never reaches the model; HEAD, query
    strings and Expect: 100-continue behave as HTTP says; our own refusals are JSON."""
    data = jpeg(5)
    with InferenceServer(JsonPipeline(PIPELINE), model, port=0, max_bytes=100_000, timeout_s=5) as server:
        port = server.port
        post_head = b"POST /predict HTTP/1.1\r\nHost: x\r\n"
        answer = raw(port, post_head + b"Content-Length: 3 \r\nConnection: close\r\n\r\nabc")  # spaces around: read
        assert statuses(answer) == [400] and b"cannot decode" in answer
        batches = server.batcher.batches
        for length in (b"\xb2", b"-5", b"3,3", b" 3 x"):
            answer = raw(port, post_head + b"Content-Length: " + length + b"\r\n\r\nabc")
            assert statuses(answer) == [400], length
        answer = raw(port, post_head + b"Content-Length: 3\r\nContent-Length: 300\r\n\r\nabc")
        assert statuses(answer) == [400]
        answer = raw(port, post_head + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"
                                       b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert statuses(answer) == [400]  # and the smuggled GET is not answered
        answer = raw(port, post_head + b"Content-Length: %d\r\n\r\n" % len(data) + data[:-100], shut_write=True)
        assert statuses(answer) in ([400], []) and server.batcher.batches == batches
        answer = raw(port, b"HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert statuses(answer) == [200] and answer.endswith(b"\r\n\r\n")  # its headers, no body
        answer = raw(port, b"PUT /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        assert statuses(answer) == [405] and b"Allow: POST" in answer and b'{"error"' in answer
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/health?verbose=1")
        assert connection.getresponse().status == 200
        connection.close()
        assert post(port, data, "/predict?model=x")[0] == 200
        answer = raw(port, post_head + b"Content-Length: 200000\r\nExpect: 100-continue\r\n\r\n")
        assert statuses(answer) == [413] and b"100 Continue" not in answer and b"limit is 100000" in answer
        answer = raw(port, post_head + b"Content-Length: 3\r\nExpect: coffee\r\nConnection: close\r\n\r\nabc")
        assert statuses(answer) == [417] and b'{"error": "Expect:' in answer  # (aiohttp's own: plain text)
        answer = raw(port, b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde")
        assert statuses(answer) == [404] and b'{"error"' in answer
        for line in (b"HELLO", b"GET /health HTTP/9.9", b"GET / HTTP/1"):  # with a status line, not a bare body
            assert statuses(raw(port, line + b"\r\n\r\n"))[0] in (400, 404, 505), line
        smuggled = b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"  # a GET's body is a body, not a request
        answer = raw(port, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                     % len(smuggled) + smuggled)
        assert statuses(answer) == [200]
        assert server.batcher.batches == batches + 1


def test_quiet_connections_are_closed_and_gone_clients_cost_no_traceback(model, capfd):
    """A connection that sends nothing, or stops within a body, is closed after timeout_s (the stalled body
    answered 400); a client that leaves before its answer is no error on stderr."""
    import socket
    import time
    data = jpeg(6)
    with InferenceServer(JsonPipeline(PIPELINE), model, port=0, timeout_s=0.5) as server:
        started = time.monotonic()
        assert raw(server.port, b"", timeout=30) == b""  # closed by the server, well before 30 s
        answer = raw(server.port, b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + data[:10])
        assert statuses(answer) == [400] and b"ended after 10 of the 1000" in answer
        assert time.monotonic() - started < 20
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
        time.sleep(2)  # its request run (or dropped: the client is gone), its answer to a closed socket
    assert server.batcher.batches <= 1 and "Traceback" not in capfd.readouterr().err


def test_a_trickling_body_is_cut_off(model):
    """A body sent a byte now and then, each within timeout_s, is still cut at max(timeout_s, 64 KiB/s):
    otherwise one client could hold a thread for ever."""
    import socket
    import time
    with InferenceServer(JsonPipeline(PIPELINE), model, port=0, timeout_s=1) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
            sock.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab")
            started, answer = time.monotonic(), b""
            while not answer and time.monotonic() - started < 20:
                sock.sendall(b"x")
                time.sleep(0.3)
                sock.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    answer = sock.recv(65536)
                sock.setblocking(True)
        assert statuses(answer) == [400] and b"ended after" in answer and time.monotonic() - started < 10


def test_close_shuts_idle_and_stalled_connections_at_once(model):
    """A client keeping its connection open between requests, or stopping within a body, does not hold
    close() (nor the process) until timeout_s: the idle connection is closed, the cut body answered 400."""
    import socket
    import time
    server = InferenceServer(JsonPipeline(PIPELINE), model, port=0, timeout_s=300).start()
    idle = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    idle.request("GET", "/health")
    assert idle.getresponse().read() and idle.sock is not None  # kept alive
    stalled = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    stalled.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab")
    time.sleep(0.5)  # its handler waiting for the rest
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 10
    assert idle.sock.recv(1) == b""  # the server closed it
    idle.close()
    answer = stalled.recv(65536)
    stalled.close()
    assert statuses(answer) == [400]


def test_a_batcher_keeps_its_intra_op_threads_when_another_sets_fewer():
    """A classifier's batcher (2 intra-op threads) started before a pipeline-only model's (1): torch sets a
    thread's count up at its first parallel op from the count last set anywhere, which left the classifier on
    one core (fastload serve --pipeline p.json --model resnet50 serves both), and the 1 became the default
    of every thread set up later."""
    from fastload.serve import Batcher
    before = torch.get_num_threads()
    batchers = [Batcher(lambda items: [torch.get_num_threads() for _ in items], threads=2)]
    try:
        time.sleep(0.3)  # (its thread has set its count)
        batchers.append(Batcher(lambda items: [torch.get_num_threads() for _ in items], threads=1))
        time.sleep(0.3)
        assert [batcher.submit(0).result(timeout=10) for batcher in batchers] == [2, 1]
        counts = []  # a thread set up after both (a decode thread, a third model's batcher): the default
        fresh = threading.Thread(target=lambda: counts.append(torch.get_num_threads()))
        fresh.start()
        fresh.join()
        assert counts == [before]
    finally:
        for batcher in batchers:
            batcher.close()
        torch.set_num_threads(before)


def test_a_request_cancelled_while_it_waits_does_not_stop_its_model():
    """A Future cancelled in the queue (a gRPC deadline, a client gone) is dropped: answering it raised
    InvalidStateError in the batcher's thread, which died, and every later request to the model hung."""
    release = threading.Event()
    batcher = Batcher(lambda items: release.wait(10) and items, max_batch=1, max_wait_ms=0)
    try:
        first = batcher.submit(1)
        time.sleep(0.2)  # (taken: the batcher waits in process)
        waiting = batcher.submit(2)
        assert waiting.cancel()
        release.set()
        assert first.result(timeout=10) == 1
        assert batcher.submit(3).result(timeout=10) == 3
    finally:
        release.set()
        batcher.close()


def test_a_batch_failing_outside_process_fails_alone():
    """Anything raised in the batcher's loop (here its statistics) answers that batch's requests with the
    error; the thread goes on serving the next ones."""
    from fastload.serve import ModelStats

    class Failing(ModelStats):
        def batch(self, *args):
            if self.executions == 0:
                self.executions = -1
                raise RuntimeError("statistics broke")
            super().batch(*args)

    batcher = Batcher(lambda items: items, max_batch=1, max_wait_ms=0, stats=Failing())
    try:
        with pytest.raises(RuntimeError, match="statistics broke"):
            batcher.submit(1).result(timeout=10)
        assert batcher.submit(2).result(timeout=10) == 2
    finally:
        batcher.close()


def test_a_batcher_thread_that_must_end_hands_its_queue_to_a_new_one():
    """A process that raises SystemExit ends its thread: its batch is answered with the error and a new
    thread serves the queue."""
    calls = []

    def process(items):
        calls.append(items)
        if len(calls) == 1:
            raise SystemExit(3)
        return items

    batcher = Batcher(process, max_batch=1, max_wait_ms=0)
    try:
        with pytest.raises(RuntimeError, match="SystemExit"):
            batcher.submit(1).result(timeout=10)
        assert batcher.submit(2).result(timeout=10) == 2
    finally:
        batcher.close()


def test_the_batcher_queue_is_bounded_and_ranges_are_checked():
    from fastload.serve import QueueFull
    release = threading.Event()
    batcher = Batcher(lambda items: release.wait(10) and items, max_batch=2, max_wait_ms=0, max_queue=3)
    try:
        first = batcher.submit_all([1, 2])
        time.sleep(0.2)  # (taken)
        queued = batcher.submit_all([3, 4, 5])
        with pytest.raises(QueueFull, match="limit is 3"):
            batcher.submit(6)
        release.set()
        assert [f.result(timeout=10) for f in first + queued] == [1, 2, 3, 4, 5]
    finally:
        release.set()
        batcher.close()
    for arguments in ({"max_batch": True}, {"max_batch": 0}, {"max_wait_ms": float("inf")},
                      {"max_wait_ms": float("nan")}, {"max_wait_ms": 1e13}, {"max_queue": 0}):
        with pytest.raises(ValueError):
            Batcher(lambda items: items, **arguments)


def test_a_decode_pool_shut_down_under_the_server_is_replaced(model):
    with InferenceServer(JsonPipeline(PIPELINE), model, port=0) as server:
        server._decoder._pool.shutdown(wait=True)
        status, body = post(server.port, jpeg(2))
        assert status == 200 and len(body["top5"]) == 5


def test_without_models_the_conveniences_answer_404_and_bugs_are_json_500s(model, monkeypatch):
    """/predict and /health of a server whose models were all unloaded: 404 (StopIteration answered 500); a
    bug of ours is a JSON 500 naming the exception's kind, its traceback logged, never sent."""
    with InferenceServer(JsonPipeline(PIPELINE), model, port=0, name="m") as server:
        monkeypatch.setattr(server, "server_metadata", lambda: 1 / 0)
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        connection.request("GET", "/v2")
        response = connection.getresponse()
        body = response.read()
        assert response.status == 500 and "ZeroDivisionError" in json.loads(body)["error"]
        assert b"Traceback" not in body
        server.repository_unload("m")
        status, body = post(server.port, jpeg(1))
        assert status == 404 and "no model is loaded" in body["error"]
        connection.request("GET", "/health")
        response = connection.getresponse()
        assert response.status == 404 and "no model" in json.loads(response.read())["error"]
        connection.close()


def serve_command(arguments: list[str]) -> tuple[subprocess.Popen, int]:
    """``fastload serve`` started with ``arguments``; the process and its HTTP port (from its first line)."""
    process = subprocess.Popen([sys.executable, "-m", "fastload", "serve", *arguments], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    if "http://" not in line:
        process.kill()
        raise AssertionError(f"fastload serve {' '.join(arguments)}: {line}{process.communicate()[1]}")
    return process, int(line.split("http://127.0.0.1:")[1].split()[0])


def stop(process: subprocess.Popen) -> str:
    """SIGTERM, wait (20 s at most); its stderr."""
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0, err
    return err


def test_every_fastload_serve_command_of_the_docs_starts_and_answers(tmp_path):
    """Each `fastload serve` command docs/serving.md shows, on port 0 (a free port), with its p.json and
    pipelines/ made here: it starts, answers /v2/health/ready and stops on SIGTERM (--repository without
    --pipeline failed at once on an unbound name)."""
    import re
    import shlex
    docs = open(os.path.join(os.path.dirname(__file__), "..", "docs", "serving.md")).read()
    commands = [m.group(1) for m in re.finditer(r"^\s*fastload serve (.*?)\s*(?:#.*)?$", docs, re.MULTILINE)]
    assert len(commands) >= 3, commands
    (tmp_path / "pipelines").mkdir()
    for folder in (tmp_path, tmp_path / "pipelines"):
        (folder / "p.json").write_text(json.dumps(PIPELINE))
    for command in commands:
        arguments = []
        for word in shlex.split(command):
            word = {"8000": "0", "8001": "0"}.get(word, word)
            arguments.append(str(tmp_path / word) if word in ("p.json", "pipelines/") else word)
        if "--grpc-port" in arguments:
            pytest.importorskip("tritonclient.grpc")
        process, port = serve_command(arguments)
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", "/v2/health/ready")
            response = connection.getresponse()
            assert response.status == 200 and json.loads(response.read()) == {"ready": True}, command
            connection.close()
        finally:
            stop(process)


def test_a_classifier_with_random_weights_is_warned_about_and_weights_are_served(tmp_path, model):
    """Without --weights the classifier's weights are random: a warning at start says so. With --weights (a
    torchvision state_dict file, loaded with weights_only=True) the answers are that model's."""
    pipeline = tmp_path / "p.json"
    pipeline.write_text(json.dumps(PIPELINE))
    weights = tmp_path / "resnet18.pt"
    trained = load_model("resnet18", seed=11)
    torch.save(trained.state_dict(), weights)
    process, _ = serve_command(["--pipeline", str(pipeline), "--model", "resnet18", "--port", "0"])
    assert "RANDOM weights" in stop(process)
    process, port = serve_command(["--pipeline", str(pipeline), "--model", "resnet18", "--weights", str(weights),
                                   "--port", "0"])
    try:
        status, body = post(port, jpeg(4))
    finally:
        assert "RANDOM" not in stop(process)
    expected = alone(JsonPipeline(PIPELINE), trained, jpeg(4))
    assert status == 200 and [c["class"] for c in body["top5"]] == [c["class"] for c in expected]
    assert alone(JsonPipeline(PIPELINE), model, jpeg(4)) != expected  # (another seed's weights differ)
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    from fastload.cli import main
    with pytest.raises(SystemExit, match="not a state_dict of torchvision's resnet18"):
        main(["serve", "--pipeline", str(pipeline), "--model", "resnet18", "--weights", str(tmp_path / "junk.pt")])
