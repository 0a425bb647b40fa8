"""An inference server on the Open Inference Protocol (KServe v2, as Triton speaks it), on aiohttp.

Models are rocAL JSON preprocessing pipelines (``JsonPipeline``), each optionally followed by a torchvision
classifier. A model takes one input, ``images`` (BYTES, shape [N]: one encoded image an element), and gives
``output`` (the pipeline's NHWC batch: UINT8, or FP16/FP32 where the pipeline's ``output_dtype`` asks) or,
with a classifier, ``probabilities`` (FP32 [N, classes], the softmax of the logits; Triton's classification
extension -- an output's ``"classification": k`` parameter -- turns that into the top k as BYTES
``"probability:class"`` strings, as tritonclient's ``class_count`` asks).

The REST API (https://github.com/kserve/open-inference-protocol, Triton's docs/protocol):
GET /v2/health/live, /v2/health/ready, /v2 (server metadata), /v2/models/{m}[/versions/{v}] (model
metadata), .../ready, .../stats (Triton's statistics extension), POST .../infer (JSON tensors, and Triton's
binary tensor data extension: an ``Inference-Header-Content-Length`` header, the JSON header, then each
binary tensor; BYTES elements as a 4-byte little-endian length and the bytes), POST /v2/repository/index,
/v2/repository/models/{m}/load (``{"parameters": {"model": "pipeline.json", "batch": 8}}``, rocAL
``workerLoad``'s equivalent; optional ``"classifier"``), .../unload; GET /metrics (Prometheus text, Triton's
metric names); POST /predict (one image's bytes in, top-5 out: a convenience). Errors are ``{"error": ...}``
with 400 (the request or its images), 404 (no such model or path), 405, 413, 503 (full: with Retry-After).
``grpc_port`` adds the protocol's gRPC API (fastload/serve_grpc.py) on the same loop, models and limits.

How a request runs: its body is read under a deadline and a budget of bytes in flight; its images are
decoded in a thread pool under a per-request time budget (a request whose images take longer gets 400
and delays no one else more than its share of the pool); the decoded images go to the model's dynamic
batcher (Triton's knobs: max_batch_size, max_queue_delay in microseconds, preferred batch sizes) which
runs the pipeline's fused step and the classifier on batches, one batch at a time: on a CPU the model's
operators use every core, and a request thread running beside them stalls them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import pathlib
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable

import torch
from aiohttp import web

from .errors import DecodeError
from .serve_limits import MAX_CLASSIFICATION, MAX_CLASSIFIER_PARAMS, MAX_MODELS, MAX_QUEUE
from .serve_metrics import prometheus_text
from .serve_model import (Batcher, DecodePool, Model, ModelStats, QueueFull, load_model,  # noqa: F401  (public here)
                          model_input, top5)
from .serve_protocol import (DTYPES, JSON_CHUNK, ONE_INPUT, PROTOCOL_EXTENSIONS, RequestError,  # noqa: F401
                             answer_body, check_model_name, encode_output, flag, images_input, integer, load_json,
                             load_parameters, parameters_of, parse_bytes_tensor, parse_infer_request, raw_tensor)

log = logging.getLogger("fastload.serve")
_CHARGED = "fastload.charged"  # a request's key: the bytes of its chunked body charged to the bytes in flight


class InferenceServer:
    """The server: ``models`` by name, answered on the Open Inference Protocol (see the module's docstring).

    ``InferenceServer(pipeline, classifier, ...)`` serves one classifier (``name``) behind one pipeline, as
    before; ``models=[Model, ...]`` or ``repository`` (a folder of ``*.json`` pipelines, each a
    preprocessing model named by its file name without ``.json``) serve more.

    Args:
        host, port: where to listen (port 0: any free port; ``server.port`` says which).
        max_batch, max_wait_ms: the default model's max_batch_size and max queue delay.
        max_bytes: larger request bodies get 413.
        timeout_s: a connection that sends no request for this long is closed; a body must arrive within
            max(timeout_s, its size at 64 KiB/s) or is answered 400 (None: never).
        max_connections: a request on a connection past this many gets 503 with Retry-After.
        max_inflight_bytes: request bodies being read or run, in bytes, at most; past it 503 + Retry-After.
        decode_threads, decode_budget_s: the decode pool's size and one request's time for its images.
        access_log: log one line per request (``fastload.serve.access``).
        grpc_port: also serve the protocol's gRPC API there (``fastload.serve_grpc``; 0: any free port,
            ``server.grpc_port`` says which; None: HTTP alone), on the same loop, models and limits.
        pipeline_loader: what makes a pipeline of a repository's file, called as ``pipeline_loader(path,
            batch=batch)``; needed with ``repository`` (``fastload serve`` passes
            ``fastload.compat.rocal.JsonPipeline``: the server itself knows no front end's format).
        max_models: models loaded at once at most (each holds a batcher thread); a repository load past it is
            answered 429 (gRPC's RESOURCE_EXHAUSTED: a quota, free one by unloading a model).
        max_queue: images waiting in the batcher of each model it makes (the default model's, the repository's)
            at most; past it: 503 + Retry-After.

    The limits policy (every bound a request's numbers meet, and the caps) is fastload/serve_limits.py.
    """

    def __init__(self, pipeline=None, model: torch.nn.Module | None = None, host: str = "127.0.0.1",
                 port: int = 8000, max_batch: int = 8, max_wait_ms: float = 5.0, max_bytes: int = 20 << 20,
                 name: str = "model", timeout_s: float | None = 30.0, *, models: list[Model] = (),
                 repository: str | None = None, max_connections: int = 512, max_inflight_bytes: int = 256 << 20,
                 decode_threads: int | None = None, decode_budget_s: float = 10.0, access_log: bool = False,
                 preferred_batch_size: tuple[int, ...] = (), grpc_port: int | None = None,
                 pipeline_loader: Callable[..., Any] | None = None, max_models: int = MAX_MODELS,
                 max_queue: int = MAX_QUEUE):
        if repository is not None and pipeline_loader is None:
            raise ValueError("a model repository needs pipeline_loader, what makes a pipeline of its files "
                             "(fastload.compat.rocal.JsonPipeline for rocAL's JSON pipelines)")
        self.pipeline_loader = pipeline_loader
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f"timeout_s={timeout_s}: a number of seconds above 0, or None for no timeout")
        self.host, self.port, self.max_bytes, self.timeout_s = host, port, max_bytes, timeout_s
        self.grpc_port, self._grpc = grpc_port, None
        self.max_connections, self.max_inflight_bytes = max_connections, max_inflight_bytes
        self.decode_budget_s, self.access_log, self.repository = decode_budget_s, access_log, repository
        if isinstance(max_models, bool) or not isinstance(max_models, int) or max_models < 1:
            raise ValueError(f"max_models={max_models!r}: a positive whole number of models")
        self.max_models, self.max_queue = max_models, max_queue
        self.models: dict[str, Model] = {}
        self.name = name
        if pipeline is not None:
            self.models[name] = Model(name, pipeline, model, max_batch, max_wait_ms * 1000, preferred_batch_size,
                                      max_queue)
        for m in models:
            self.models[m.name] = m
        try:
            if repository is not None:
                for file in sorted(os.listdir(repository)):
                    if file.endswith(".json") and file[:-5] not in self.models:
                        if len(self.models) >= max_models:
                            raise ValueError(f"{repository} holds more pipelines than max_models={max_models}")
                        self._load(file[:-5], {"model": file, "batch": max_batch})
        except BaseException as error:
            for m in self.models.values():  # (their batcher threads)
                m.close()
            if isinstance(error, RequestError):  # (a repository file the checks refuse, at start)
                raise ValueError(f"{repository}: {error.reason}") from None
            raise
        self.requests = 0  # infer requests taken so far
        self._inflight_bytes = 0
        self._decoder = DecodePool(decode_threads or min(8, (os.cpu_count() or 2) * 2))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._unloading: list[threading.Thread] = []  # models unloaded, answering what they hold

    @property
    def batcher(self) -> Batcher:
        """The first model's batcher (what the one-model server's tests look at)."""
        return next(iter(self.models.values())).batcher

    # -- life cycle

    def start(self) -> "InferenceServer":
        """Listen, and serve in a background thread (returns once listening)."""
        ready: Future = Future()
        self._thread = threading.Thread(target=self._serve, args=(ready,), name="fastload-serve-http", daemon=True)
        self._thread.start()
        ready.result()
        return self

    def _serve(self, ready: Future) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._start())
        except BaseException as error:
            ready.set_exception(error)
            return
        ready.set_result(None)
        self._loop.run_forever()
        self._loop.close()

    async def _start(self) -> None:
        self._closing = asyncio.Event()  # set by close(): bodies still arriving are answered 400 at once
        app = web.Application(client_max_size=self.max_bytes, middlewares=[self._guard])
        routes = web.RouteTableDef()
        routes.get("/v2/health/live")(self._live)
        routes.get("/v2/health/ready")(self._ready)
        routes.get("/v2")(self._server_metadata)
        for prefix in ("/v2/models/{model}", "/v2/models/{model}/versions/{version}"):
            routes.get(prefix)(self._model_metadata)
            routes.get(prefix + "/ready")(self._model_ready)
            routes.get(prefix + "/stats")(self._model_stats)
            routes.post(prefix + "/infer", expect_handler=self._expect)(self._infer)
        routes.get("/v2/models/stats")(self._model_stats)
        routes.post("/v2/repository/index")(self._index)
        routes.post("/v2/repository/models/{model}/load")(self._repository_load)
        routes.post("/v2/repository/models/{model}/unload")(self._repository_unload)
        routes.get("/metrics")(self._metrics)
        routes.post("/predict", expect_handler=self._expect)(self._predict)
        routes.get("/health")(self._health)
        routes.get("/v2/openapi.json")(self._openapi)
        app.add_routes(routes)
        access = None
        if self.access_log:
            access = logging.getLogger("fastload.serve.access")
            if not access.handlers:
                access.addHandler(logging.StreamHandler())
            access.setLevel(logging.INFO)
        keepalive = self.timeout_s if self.timeout_s is not None else 3630
        self._runner = web.AppRunner(app, access_log=access, handle_signals=False, keepalive_timeout=keepalive,
                                     shutdown_timeout=10, max_line_size=8190, max_field_size=8190,
                                     lingering_time=1.0)  # (reading an unread body past its answer: 10 s by default)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        self._site = site
        self.port = site._server.sockets[0].getsockname()[1]
        if self.grpc_port is not None:
            from .serve_grpc import start_grpc
            try:
                self._grpc, self.grpc_port = await start_grpc(self, self.host, self.grpc_port)
            except BaseException:
                await self._runner.cleanup()
                raise

    async def _stop(self) -> None:
        """Both APIs stop taking requests and answer those in flight, together, within 10 s."""
        await asyncio.gather(self._runner.cleanup(), *([self._grpc.stop(10)] if self._grpc is not None else []))

    def close(self) -> None:
        """Stop taking connections, answer the requests in flight (up to 10 s), stop the batchers."""
        if self._stopped:
            return
        self._stopped = True
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._closing.set)
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        for m in list(self.models.values()):
            m.close()
        for closing in self._unloading:
            closing.join()
        self._decoder.close()

    def __enter__(self) -> "InferenceServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- limits

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        """503 + Retry-After past the connection or bytes-in-flight cap; every error as {"error": ...}, a bug
        of ours too (500, its traceback logged, never sent)."""
        length = request.content_length or 0
        connections = len(self._runner.server.connections)
        if connections > self.max_connections:
            return _error(503, f"{connections} connections open, the limit is {self.max_connections}: retry",
                          {"Retry-After": "1", "Connection": "close"})
        if length > self.max_bytes:
            return _error(413, f"{length} bytes: the limit is {self.max_bytes}", {"Connection": "close"})
        try:
            with self.in_flight(length):
                return await handler(request)
        except RequestError as error:
            return _error(error.status, error.reason, error.headers)
        except web.HTTPException as error:
            if error.status < 400:
                raise
            headers = {k: v for k, v in error.headers.items() if k in ("Allow", "Retry-After")}
            if error.status == 413:
                return _error(413, f"{request.content_length} bytes: the limit is {self.max_bytes}", headers)
            if error.status == 404:
                return _error(404, f"no {request.path}: see GET /v2 and the Open Inference Protocol", headers)
            if error.status == 405:
                return _error(405, f"{request.method} {request.path}: use {error.headers.get('Allow')}", headers)
            return _error(error.status, error.text or error.reason, headers)
        except Exception as error:
            log.exception("%s %s failed", request.method, request.path)
            return _error(500, f"the server failed: {type(error).__name__}")
        finally:
            self._inflight_bytes -= request.get(_CHARGED, 0)

    @contextlib.contextmanager
    def in_flight(self, size: int):
        """``size`` request bytes charged to the bytes in flight (both protocols') until the block ends; past
        the cap: 503."""
        if self._inflight_bytes + size > self.max_inflight_bytes:
            raise self._full()
        self._inflight_bytes += size
        try:
            yield
        finally:
            self._inflight_bytes -= size

    async def _expect(self, request: web.Request):
        """Expect: 100-continue: a body over the limit is refused before the client sends it; any other
        expectation is 417 (as aiohttp answers it, but in JSON)."""
        expect = request.headers.get("Expect", "")
        if expect.lower() != "100-continue":
            return _error(417, f"Expect: {expect[:60]!r}: only 100-continue is known", {"Connection": "close"})
        if (request.content_length or 0) > self.max_bytes:
            return _error(413, f"{request.content_length} bytes: the limit is {self.max_bytes}",
                          {"Connection": "close"})
        await _continue(request)

    async def _body(self, request: web.Request) -> bytes:
        """The whole body, within max(timeout_s, its size at 64 KiB/s): else (or when the client stops
        sending, or the server closes) 400 and the connection closed."""
        length = request.content_length
        deadline = None if self.timeout_s is None else max(self.timeout_s, (length or 0) / (64 << 10))
        # (a compressed body is read as a chunked one is: piece by piece as aiohttp inflates it, each piece
        # charged, so that its inflated size, not the Content-Length, meets max_bytes and the bytes in flight)
        plain = length is not None and request.headers.get("Content-Encoding", "identity") == "identity"
        reading = asyncio.ensure_future(request.read() if plain else self._chunked(request))
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            done, _ = await asyncio.wait({reading, closing}, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closing.cancel()
        if reading in done and reading.exception() is None:
            return reading.result()
        if reading in done and isinstance(reading.exception(), (RequestError, web.HTTPException)):
            raise reading.exception()  # (ours, or aiohttp's 413 past client_max_size)
        reading.cancel()
        why = ("the server is closing" if self._closing.is_set() else "the client stopped sending" if reading in done
               else f"not within {deadline:g} s")
        raise RequestError(400, f"the body ended after {request.content.total_bytes} of the {length} bytes its "
                                f"Content-Length promised ({why})", {"Connection": "close"})

    def _full(self) -> RequestError:
        """The answer past the bytes-in-flight cap: 503, retry in a second."""
        return RequestError(503, f"{self._inflight_bytes} request bytes in flight, the limit is "
                                 f"{self.max_inflight_bytes}: retry", {"Retry-After": "1", "Connection": "close"})

    async def _chunked(self, request: web.Request) -> bytes:
        """A body without Content-Length (chunked) or compressed (Content-Encoding), each piece charged to the
        bytes in flight as it arrives, inflated (the guard has charged nothing for a chunked body, its size
        unknown, and a compressed body's Content-Length only), so such bodies cannot get past the cap: 503 +
        Retry-After when a piece would, 413 past max_bytes. The guard gives the charge back."""
        pieces, total = [], 0
        while piece := await request.content.readany():
            total += len(piece)
            if total > self.max_bytes:
                raise RequestError(413, f"a chunked or compressed body of over {self.max_bytes} bytes (inflated): "
                                        f"the limit", {"Connection": "close"})
            if self._inflight_bytes + len(piece) > self.max_inflight_bytes:
                raise self._full()
            self._inflight_bytes += len(piece)
            request[_CHARGED] = request.get(_CHARGED, 0) + len(piece)
            pieces.append(piece)
        return b"".join(pieces)

    # -- the protocol

    def find_model(self, name: str, version: str | None = None) -> Model:
        """The model ``name`` (``version``: None or "" for its one version); 404 if there is none."""
        model = self.models.get(name)
        if model is None:
            raise RequestError(404, f"no model {name!r} (loaded: {', '.join(self.models) or 'none'})")
        if version not in (None, "", model.version):
            raise RequestError(404, f"model {name!r} has no version {version!r} (versions: {model.version})")
        return model

    def server_metadata(self) -> dict:
        from ._version import __version__
        return {"name": "fastload", "version": __version__, "extensions": PROTOCOL_EXTENSIONS}

    def statistics(self, name: str | None = None, version: str | None = None) -> list[dict]:
        """Triton's statistics of model ``name`` (None or "": of every model)."""
        models = [self.find_model(name, version)] if name else list(self.models.values())
        return [m.stats.as_json(m.name, m.version) for m in models]

    def _model(self, request: web.Request) -> Model:
        return self.find_model(request.match_info.get("model"), request.match_info.get("version"))

    async def _live(self, request):
        return web.json_response({"live": True})

    async def _ready(self, request):
        return web.json_response({"ready": True})

    async def _server_metadata(self, request):
        return web.json_response(self.server_metadata())

    async def _model_metadata(self, request):
        return web.json_response(self._model(request).metadata())

    async def _model_ready(self, request):
        self._model(request)
        return web.json_response({"name": request.match_info["model"], "ready": True})

    async def _model_stats(self, request):
        return web.json_response({"model_stats": self.statistics(request.match_info.get("model"),
                                                                 request.match_info.get("version"))})

    async def _decode(self, model: Model, images: list[bytes], first: int) -> list:
        """The images decoded in the pool, within the request's budget: (name, tensor) each."""
        loop = asyncio.get_running_loop()
        names = [f"request {first}" + (f" image {i}" if len(images) > 1 else "") for i in range(len(images))]
        futures = [self._decoder.run(loop, model.pipeline._decode, data, i, name)
                   for i, (data, name) in enumerate(zip(images, names))]
        try:
            decoded = await asyncio.wait_for(asyncio.gather(*futures), self.decode_budget_s)
        except asyncio.TimeoutError:
            raise RequestError(400, f"decoding the request's images took over its budget of "
                                    f"{self.decode_budget_s:g} s") from None
        for image in decoded:
            if isinstance(image, DecodeError):
                raise RequestError(400, image.reason if len(images) == 1 else f"{image.path}: {image.reason}")
        return list(zip(names, decoded))

    async def run(self, model: Model, images: list[bytes]) -> list:
        """A request's images through ``model``, on either protocol: decoded in the pool within the request's
        budget, then run by the model's batcher; its result for each image (errors as RequestError)."""
        self.requests += 1
        if not images:
            raise RequestError(400, "no images: send at least one")
        if len(images) > model.max_batch_size:
            raise RequestError(400, f"{len(images)} images in one request: model {model.name!r}'s "
                                    f"max_batch_size is {model.max_batch_size}")
        decoding = time.perf_counter_ns()
        decoded = await self._decode(model, images, self.requests)
        model.stats.made_input(time.perf_counter_ns() - decoding)
        try:
            futures = [asyncio.wrap_future(future) for future in model.batcher.submit_all(decoded)]
        except QueueFull as full:
            raise RequestError(503, f"model {model.name!r}: {full}", {"Retry-After": "1"}) from None
        except RuntimeError:
            raise RequestError(404, f"model {model.name!r} was unloaded while its request was decoded") from None
        results = await asyncio.gather(*futures, return_exceptions=True)
        for result in results:
            if isinstance(result, DecodeError):
                raise RequestError(400, result.reason)
            if isinstance(result, ValueError):
                raise RequestError(400, str(result))
            if isinstance(result, BaseException):
                raise RequestError(500, f"the server failed: {result}")
        return results

    async def _infer(self, request: web.Request):
        model = self._model(request)
        with model.stats.counted():
            body = await self._body(request)
            parse = functools.partial(parse_infer_request, body, request.headers.get("Inference-Header-Content-Length"),
                                      model.max_batch_size)
            # (a large body in a thread: json.loads and base64 of 20 MB take ~70 ms; there the loop runs between)
            infer, images = await asyncio.get_running_loop().run_in_executor(None, parse) if len(body) > 1 << 20 \
                else parse()
            results = await self.run(model, images)
            encoding = time.perf_counter_ns()
            if len(results) * results[0].numel() > JSON_CHUNK:  # (a thread: a large JSON answer takes long)
                answer = await asyncio.get_running_loop().run_in_executor(None, self._infer_answer, model, infer,
                                                                          results)
            else:
                answer = self._infer_answer(model, infer, results)
            model.stats.made_output(time.perf_counter_ns() - encoding)
            return answer

    def _infer_answer(self, model: Model, infer: dict, results: list) -> web.Response:
        """The answer's JSON header and binary parts (``infer``'s fields were checked by parse_infer_request)."""
        default = flag(parameters_of(infer, "the request"), "binary_data_output")
        wanted = infer.get("outputs") or []
        parameters = [parameters_of(r, "an output") for r in wanted]
        answers = model.answer(results, [(r["name"], integer(p.get("classification", 0), "classification", 0,
                                                              MAX_CLASSIFICATION)) for r, p in zip(wanted, parameters)])
        outputs, binary = [], []
        for (name, dtype, shape, tensor), params in zip(answers, parameters or [{}]):
            out, data = encode_output(name, dtype, tensor, flag(params, "binary_data", default), shape)
            outputs.append(out)
            binary.append(data)
        header = {"model_name": model.name, "model_version": model.version, "outputs": outputs}
        if "id" in infer:
            header["id"] = infer["id"]
        text = answer_body(header)
        if not any(binary):
            return web.Response(body=text, content_type="application/json")
        return web.Response(body=b"".join([text, *binary]), content_type="application/octet-stream",
                            headers={"Inference-Header-Content-Length": str(len(text))})

    async def _predict(self, request: web.Request):
        """POST /predict: one image's bytes, the first model's answer (top-5 with a classifier)."""
        model = self._first_model()
        body = await self._body(request)
        if not body:
            raise RequestError(400, "an empty body: send the image's bytes")
        (result,) = await self.run(model, [body])
        if model.classifier is None:
            return web.json_response({"shape": list(result.shape), "datatype": model.output[1]})
        values, indices = result.topk(min(5, result.shape[0]))
        return web.json_response({"top5": [{"class": int(i), "probability": float(v)}
                                           for v, i in zip(values, indices)]})

    def _first_model(self) -> Model:
        """The model /predict and /health answer for: the first loaded; 404 when every model was unloaded (the
        protocol's answer for a model it does not hold; a 5xx would say the server failed)."""
        for model in self.models.values():
            return model
        raise RequestError(404, "no model is loaded: load one (POST /v2/repository/models/{name}/load)")

    async def _openapi(self, request):
        """GET /v2/openapi.json: the REST API's OpenAPI 3 description (fastload/serve_openapi.json)."""
        return web.Response(body=_openapi_text(), content_type="application/json")

    async def _health(self, request):
        model = self._first_model()
        return web.json_response({"status": "ok", "model": model.name, "batches": model.batcher.batches,
                                  "output_shape": list(model.pipeline.output_shape)})

    # -- the repository

    def _load(self, name: str, parameters: dict, swap: bool = True) -> Model:
        """Model ``name`` made of a repository file; ``parameters`` as serve_protocol.load_parameters checks
        them (every number range-checked before use: 400 naming it)."""
        check_model_name(name)
        parameters = load_parameters(name, parameters)
        file = parameters["model"]
        if self.repository is None:
            raise RequestError(400, "this server has no model repository (--repository) to load from")
        root = os.path.realpath(self.repository)
        path = os.path.realpath(os.path.join(root, file))
        if os.path.commonpath([root, path]) != root:
            raise RequestError(400, f"{file!r} is outside the model repository")
        if not os.path.isfile(path):
            raise RequestError(400, f"no pipeline {file!r} in the model repository")
        try:
            pipeline = self.pipeline_loader(path, batch=parameters["batch"])
            classifier = parameters["classifier"]
            if classifier is not None:
                classifier = load_model(classifier, max_params=MAX_CLASSIFIER_PARAMS)
                log.warning("model %r: classifier %s has random weights (a repository load gives no weights)",
                            name, parameters["classifier"])
            model = Model(name, pipeline, classifier, parameters["batch"], parameters["max_queue_delay_us"],
                          max_queue=self.max_queue)
        except RequestError:
            raise
        except (ValueError, OSError) as error:  # (a pipeline or classifier the checks refuse; a file unreadable)
            raise RequestError(400, str(error)) from None
        if swap:
            self._swap(name, model)
        return model

    def _room_for(self, name: str) -> None:
        """429 if loading ``name`` would hold more than max_models models (a reload replaces its model)."""
        if name not in self.models and len(self.models) >= self.max_models:
            raise RequestError(429, f"{len(self.models)} models are loaded, the limit (max_models) is "
                                    f"{self.max_models}: unload one first")

    def _swap(self, name: str, model: Model | None) -> None:
        """``model`` (None: no model) served as ``name``; the one it replaces answers what it holds, then stops."""
        old = self.models.pop(name, None)
        if model is not None:
            self.models[name] = model
        if old is not None:
            closing = threading.Thread(target=old.close, name="fastload-serve-unload")
            closing.start()  # (those done are forgotten: a server reloading for months keeps no list of them)
            self._unloading = [thread for thread in self._unloading if thread.is_alive()] + [closing]

    async def repository_load(self, name: str, parameters: dict) -> None:
        """Load (or reload) model ``name`` from the repository: ``parameters`` as ``_load`` takes them; 400 for
        a bad name or parameter, 429 past max_models."""
        check_model_name(name)
        load_parameters(name, parameters)  # (checked before a thread is asked for)
        self._room_for(name)
        model = await asyncio.get_running_loop().run_in_executor(None, self._load, name, parameters, False)
        try:
            self._room_for(name)  # (again: another load may have finished meanwhile)
        except RequestError:
            model.close()
            raise
        self._swap(name, model)  # (in the loop's thread, as every reader of self.models)

    def repository_unload(self, name: str) -> None:
        if name not in self.models:
            raise RequestError(404, f"no model {name!r} loaded")
        self._swap(name, None)

    def repository_index(self) -> list[dict]:
        """Every model: loaded (READY), or a repository file not loaded (UNAVAILABLE)."""
        index = [{"name": name, "version": m.version, "state": "READY"} for name, m in self.models.items()]
        if self.repository is not None:
            index += [{"name": f[:-5], "state": "UNAVAILABLE", "reason": "unloaded"}
                      for f in sorted(os.listdir(self.repository)) if f.endswith(".json") and f[:-5] not in self.models]
        return index

    async def _repository_load(self, request):
        body = await self._body(request)
        load = load_json(body, "the load request") if body else {}
        if not isinstance(load, dict):
            raise RequestError(400, "expected {\"parameters\": {\"model\": ..., \"batch\": ...}}")
        await self.repository_load(request.match_info["model"], parameters_of(load, "the load request"))
        return web.json_response({})

    async def _repository_unload(self, request):
        self.repository_unload(request.match_info["model"])
        return web.json_response({})

    async def _index(self, request):
        return web.json_response(self.repository_index())

    async def _metrics(self, request):
        body = prometheus_text(list(self.models.values()), self._inflight_bytes, len(self._runner.server.connections))
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


async def _continue(request: web.Request) -> None:
    from aiohttp.web_urldispatcher import _default_expect_handler
    await _default_expect_handler(request)


@functools.lru_cache(maxsize=1)
def _openapi_text() -> bytes:
    return (pathlib.Path(__file__).parent / "serve_openapi.json").read_bytes()


def _error(status: int, reason: str, headers: dict | None = None) -> web.Response:
    return web.json_response({"error": reason}, status=status, headers=headers)


with contextlib.suppress(Exception):  # aiohttp logs each client that goes away; it is no server error
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
