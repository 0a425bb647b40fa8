"""An HTTP inference server: image bytes in, top-5 classes out, requests batched for the model.

What rocAL's backend does inside AMD's inference server, on its own: each
POST /predict carries one encoded image; a ``Batcher`` thread gathers
concurrent requests -- up to ``max_batch``, waiting at most ``max_wait_ms``
after the first -- preprocesses them as one batch with a JSON pipeline
(``fastload.compat.rocal.JsonPipeline``: one fused step for the batch, on the
model's device) and runs the classifier on them as one batch. Preprocessing
and the model take turns rather than running side by side: on a CPU the
model's operators are parallel regions over all cores, and a request thread
decoding beside them stalls every region (bench_serve, 2 cores, concurrency
32, consecutive runs: 13.6 -> 14.7 requests/s, and the unbatched baseline's
6.7 -> 10.8). A bad image or request gets a 4xx with the
reason; GET /health says the server is up. ``close()`` stops taking
connections and answers what is in flight before it returns.

The HTTP stack is the standard library's ``ThreadingHTTPServer`` (a thread per
connection): the model's batches, not the HTTP layer, bound the throughput on
a CPU (benchmarks/bench_serve.py), and it adds no dependency. What it leaves
to its users is done here: a connection idle or stalled for ``timeout_s`` is
closed; a body is taken only with one plain Content-Length (a
Transfer-Encoding is refused, so no proxy can smuggle a second request in the
body) and only when it all arrived; ``Expect: 100-continue`` with a body over
the limit gets its 413 first; HEAD works; errors are JSON; a client that
goes away costs no traceback; and ``close()`` closes the idle keep-alive
connections rather than wait for their clients.
"""

from __future__ import annotations

import contextlib
import json
import queue
import re
import socket
import threading
import time
from concurrent.futures import Future
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlsplit

import torch

from .errors import DecodeError


def load_model(name: str, weights: str | None = None, seed: int = 0) -> torch.nn.Module:
    """A torchvision classifier by name, in eval mode: weights from a local state_dict file, or random
    (seeded); nothing is downloaded."""
    import torchvision
    known = torchvision.models.list_models()
    if name not in known:
        close = [m for m in known if m.startswith(name[:4])]
        raise ValueError(f"unknown torchvision model {name!r}" + (f" (like it: {', '.join(close[:8])})" if close else
                                                                  " (torchvision.models.list_models() lists them)"))
    try:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = torchvision.models.get_model(name, weights=None)
    except ValueError as error:
        raise ValueError(f"unknown torchvision model {name!r} ({error})") from None
    if weights is not None:
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    return model.eval()


def model_input(outputs: list[torch.Tensor]) -> torch.Tensor:
    """Pipeline outputs (height, width, channels each) as the model's float NCHW batch."""
    return torch.stack(outputs).permute(0, 3, 1, 2).float().contiguous(memory_format=torch.channels_last)


def top5(logits: torch.Tensor) -> list[list[dict]]:
    """Per row: the five most likely classes with their softmax probabilities."""
    probabilities = logits.float().softmax(dim=1)
    values, indices = probabilities.topk(min(5, probabilities.shape[1]), dim=1)
    return [[{"class": int(i), "probability": float(v)} for v, i in zip(row_v, row_i)]
            for row_v, row_i in zip(values, indices)]


class Batcher:
    """One thread that runs ``process`` on batches of the items submitted to it: it takes the first waiting
    item, then more until ``max_batch`` or ``max_wait_ms`` after the first, and answers each item's Future
    with its element of ``process(items)`` (one per item; an exception there is raised by that item's Future
    alone, one raised by ``process`` by every Future of the batch)."""

    def __init__(self, process: Callable[[list], list], max_batch: int = 8, max_wait_ms: float = 5.0):
        if max_batch < 1 or max_wait_ms < 0:
            raise ValueError("max_batch must be positive and max_wait_ms not negative")
        self.process, self.max_batch, self.max_wait = process, max_batch, max_wait_ms / 1000
        self.batches = 0  # how many batches the model ran (for /health and tests)
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="fastload-serve-batcher", daemon=True)
        self._thread.start()

    def submit(self, item) -> Future:
        future: Future = Future()
        self._queue.put((item, future))
        return future

    def close(self) -> None:
        """Answer everything submitted so far, then stop the thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        closing = False
        while not closing:
            first = self._queue.get()
            if first is None:
                break
            batch, deadline = [first], time.monotonic() + self.max_wait
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    closing = True
                    break
                batch.append(item)
            self._answer(batch)

    def _answer(self, batch: list) -> None:
        try:
            with torch.inference_mode():
                results = self.process([item for item, _ in batch])
            self.batches += 1
        except Exception as error:  # process failed: every request of the batch gets the error
            for _, future in batch:
                future.set_exception(error)
            return
        if len(results) != len(batch):  # a broken process: no Future may wait forever
            error = RuntimeError(f"{len(results)} results for a batch of {len(batch)}")
            results = [error] * len(batch)
        for (_, future), result in zip(batch, results):
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)


class InferenceServer:
    """The server: ``pipeline`` (a JsonPipeline) preprocesses, ``model`` classifies batches.

    Args:
        pipeline: maps a list of encoded images to one (height, width, channels) tensor each, or with
            ``on_error="return"`` the DecodeError of an image it cannot read (``JsonPipeline``), on the
            model's device.
        model: the classifier (float NCHW in, logits out).
        host, port: where to listen (port 0: any free port; ``server.port`` says which).
        max_batch, max_wait_ms: the batching (see ``Batcher``).
        max_bytes: larger request bodies get 413.
        timeout_s: a connection that sends nothing for this long (between requests or within one) is closed
            (None: never).
    """

    def __init__(self, pipeline, model: torch.nn.Module, host: str = "127.0.0.1", port: int = 8000,
                 max_batch: int = 8, max_wait_ms: float = 5.0, max_bytes: int = 20 << 20, name: str = "model",
                 timeout_s: float | None = 30.0):
        if timeout_s is not None and timeout_s <= 0:  # (0 would make the sockets non-blocking)
            raise ValueError(f"timeout_s={timeout_s}: a number of seconds above 0, or None for no timeout")
        self.pipeline, self.model, self.max_bytes, self.name = pipeline, model, max_bytes, name
        self.batcher = Batcher(self._classify, max_batch, max_wait_ms)
        self.requests = 0  # requests taken so far (each one's number names it in errors)
        self.closing = False  # set by close(): answers say Connection: close, idle connections are shut
        self._count = threading.Lock()
        self._connections: set[_Handler] = set()  # the open ones
        handler = type("Handler", (_Handler,), {"server_app": self, "timeout": timeout_s})
        self.httpd = _HTTPServer((host, port), handler)
        self.httpd.daemon_threads = False  # close() waits for the requests in flight
        self.httpd.block_on_close = True
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    def start(self) -> "InferenceServer":
        """Serve in a background thread (returns at once)."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fastload-serve-http", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        """Stop taking connections, answer the requests in flight (those received whole), stop reading
        the others and the idle connections, stop the batcher.

        Every connection's reading side is shut: one waiting for its next request, or for the rest of a
        body trickling in, ends at once (a cut body is answered 400), where it would hold the shutdown until
        its client's timeout; one whose request is with the model still writes its answer."""
        self.httpd.shutdown()
        with self._count:
            self.closing = True
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.connection.shutdown(socket.SHUT_RD)
        self.httpd.server_close()  # joins the request threads (block_on_close)
        self.batcher.close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> "InferenceServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def predict(self, data: bytes) -> tuple[int, dict]:
        """(HTTP status, JSON answer) for one encoded image."""
        with self._count:
            self.requests += 1
            number = self.requests
        try:
            return HTTPStatus.OK, {"top5": self.batcher.submit((number, data)).result()}
        except DecodeError as error:  # the image: "cannot decode: ...", "cannot preprocess: ..."
            return HTTPStatus.BAD_REQUEST, {"error": error.reason}
        except Exception as error:  # the server: the model, or preprocessing failing for the whole batch
            return HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"the server failed: {error}"}

    def _classify(self, requests: list[tuple[int, bytes]]) -> list:
        """A batch of (request number, body): preprocessed as one batch, the readable ones classified as
        one; each request's top-5, or the DecodeError saying why its image cannot be read or preprocessed."""
        images = self.pipeline([body for _, body in requests], on_error="return",
                               names=[f"request {number}" for number, _ in requests])
        good = [image for image in images if not isinstance(image, DecodeError)]
        answers = iter(top5(self.model(model_input(good))) if good else [])
        return [image if isinstance(image, DecodeError) else next(answers) for image in images]


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 1024  # the listen backlog: a burst of connections waits instead of being reset

    def handle_error(self, request, client_address) -> None:
        """A client that went away or went quiet is no server error; anything else is printed."""
        import sys
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


_DIGITS = re.compile(r"[0-9]{1,18}")  # ASCII digits only: str.isdigit() also takes "²"
_ROUTES = {"/predict": "POST", "/health": "GET, HEAD"}


class _Handler(BaseHTTPRequestHandler):
    server_app: InferenceServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        app = self.server_app
        with app._count:
            app._connections.add(self)
            if app.closing:  # accepted just before close(): its reading side shut, as the others'
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RD)

    def finish(self) -> None:
        with self.server_app._count:
            self.server_app._connections.discard(self)
        with contextlib.suppress(OSError):
            super().finish()

    def handle_one_request(self) -> None:
        super().handle_one_request()
        if self.server_app.closing:
            self.close_connection = True

    def log_message(self, format, *args) -> None:  # quiet: one line per request would swamp a terminal
        pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (a malformed request line, 414, 431, an unknown method's
        501, 505, ...) as JSON like the others, closing the connection as it does; with a status line even
        where the request line was too broken to say HTTP/1.x (the standard library then sends the bare body)."""
        self.close_connection = True
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"
        self._answer(code, {"error": f"{int(code)} {message or HTTPStatus(code).phrase}"},
                     head=getattr(self, "command", None) == "HEAD")

    def _answer(self, status: int, body: dict, allow: str | None = None, head: bool = False) -> None:
        """A JSON answer; the connection closes after it where it must (or the server is closing)."""
        if self.server_app.closing:
            self.close_connection = True
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            if allow:
                self.send_header("Allow", allow)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if not head:
                self.wfile.write(data)
            self.wfile.flush()
        except (ConnectionError, TimeoutError):  # the client went away before its answer
            self.close_connection = True

    def _route(self) -> str | None:
        """The path without its query, or None after answering 404."""
        path = urlsplit(self.path).path
        if path not in _ROUTES:
            self._answer(HTTPStatus.NOT_FOUND, {"error": f"no {path}: POST /predict, GET /health"},
                         head=self.command == "HEAD")
        return path if path in _ROUTES else None

    def _not_allowed(self, path: str) -> None:
        self._answer(HTTPStatus.METHOD_NOT_ALLOWED,
                     {"error": "POST the image's bytes to /predict" if path == "/predict" else
                      f"{self.command} {path}: use {_ROUTES[path]}"}, allow=_ROUTES[path], head=self.command == "HEAD")

    def do_GET(self, head: bool = False) -> None:
        if self.headers.get("Content-Length", "0").strip() != "0" or "Transfer-Encoding" in self.headers:
            self.close_connection = True  # a body is not read: it must not be taken for the next request
        path = self._route()
        if path == "/predict":
            self._not_allowed(path)
        elif path == "/health":
            app = self.server_app
            self._answer(HTTPStatus.OK, {"status": "ok", "model": app.name, "batches": app.batcher.batches,
                                         "output_shape": list(app.pipeline.output_shape)}, head=head)

    def do_HEAD(self) -> None:
        self.do_GET(head=True)

    def _other_method(self) -> None:
        self.close_connection = True  # its body, if any, is not read
        path = self._route()
        if path is not None:
            self._not_allowed(path)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _other_method

    def do_POST(self) -> None:
        length = self._body_length()
        if length is None:
            return
        path = urlsplit(self.path).path
        if path != "/predict" or length > self.server_app.max_bytes:
            self._discard(length)  # read past it, so the client sees the answer, not a reset
            self._refuse(path, length)
            return
        if length == 0:
            self._answer(HTTPStatus.BAD_REQUEST, {"error": "an empty body: send the image's bytes"})
            return
        data, complete = self._read(length)
        if not complete:  # the client stopped sending (closed, or quiet past the timeout)
            self.close_connection = True
            self._answer(HTTPStatus.BAD_REQUEST, {"error": f"the body ended after {len(data)} of the {length} "
                                                           f"bytes its Content-Length promised"})
            return
        self._answer(*self.server_app.predict(data))

    def _body_length(self) -> int | None:
        """The body's length from its one Content-Length, or None after answering why it has none."""
        if "Transfer-Encoding" in self.headers:  # chunked bodies are not read; with a Content-Length beside
            self.close_connection = True  # it, a proxy may frame the message otherwise (request smuggling)
            self._answer(HTTPStatus.NOT_IMPLEMENTED, {"error": "a Transfer-Encoding is not supported: send the "
                                                               "image with a Content-Length"})
            return None
        values = self.headers.get_all("Content-Length") or []
        if not values:
            self.close_connection = True
            self._answer(HTTPStatus.LENGTH_REQUIRED, {"error": "send the image with a Content-Length"})
            return None
        values = [value.strip(" \t") for value in values]
        if len(set(values)) != 1 or not _DIGITS.fullmatch(values[0]):
            self.close_connection = True
            self._answer(HTTPStatus.BAD_REQUEST, {"error": f"Content-Length {', '.join(values)!r}: one number of "
                                                           f"bytes expected"})
            return None
        return int(values[0])

    def handle_expect_100(self) -> bool:
        """Answer before the client sends a body that will not be read: 404 or 405 off POST /predict, 413
        over the limit, the header's error; else 100 Continue."""
        path = urlsplit(self.path).path
        if self.command != "POST":
            return super().handle_expect_100()
        if path != "/predict":
            self.close_connection = True
            self._refuse(path, 0)
            return False
        length = self._body_length()
        if length is None:
            return False
        if length > self.server_app.max_bytes:
            self.close_connection = True
            self._refuse(path, length)
            return False
        return super().handle_expect_100()

    def _refuse(self, path: str, length: int) -> None:
        """The answer to a POST not taken (``length`` bytes to ``path``): 404 or 405 off /predict, else 413."""
        if path == "/predict":
            self._answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                         {"error": f"{length} bytes: the limit is {self.server_app.max_bytes}"})
        elif path in _ROUTES:
            self._not_allowed(path)
        else:
            self._route()

    def _read(self, length: int, keep: bool = True) -> tuple[bytes, bool]:
        """Up to ``length`` body bytes (``keep=False``: read and dropped, b"" returned), in pieces of at most
        1 MiB, and whether all came: fewer where the client closes, goes quiet past the timeout, or sends
        so slowly that the body would take longer than the timeout or 64 KiB/s (a trickle of a byte now
        and then would hold the connection's thread as long as it liked)."""
        pieces, got = [], 0
        deadline = time.monotonic() + (max(self.timeout, length / (64 << 10)) if self.timeout else float("inf"))
        try:
            while got < length and time.monotonic() < deadline:
                piece = self.rfile.read1(min(length - got, 1 << 20))  # what came: a timeout loses none
                if not piece:
                    break
                got += len(piece)
                if keep:
                    pieces.append(piece)
        except (ConnectionError, TimeoutError):
            pass
        return b"".join(pieces), got == length

    def _discard(self, length: int) -> None:
        """Read a body not used; one over 256 MiB is not read. The connection closes unless all of it was."""
        if length > 256 << 20:
            self.close_connection = True
            return
        if not self._read(length, keep=False)[1]:
            self.close_connection = True
