"""A served model: a JSON pipeline, optionally followed by a classifier, behind its dynamic batcher (Triton's
knobs), with Triton's statistics. Both of fastload serve's APIs (serve.py's REST server and serve_grpc.py)
run requests through it.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

import torch

from .errors import DecodeError
from .serve_limits import MAX_BATCH_SIZE, MAX_QUEUE, MAX_QUEUE_DELAY_US
from .serve_protocol import DTYPES, RequestError

log = logging.getLogger("fastload.serve")  # (serve.py's logger)


def load_model(name: str, weights: str | None = None, seed: int = 0,
               max_params: int | None = None) -> torch.nn.Module:
    """A torchvision classifier by name, in eval mode: weights from a local state_dict file, or random
    (seeded); nothing is downloaded. Only image classifiers (``torchvision.models``' own namespace: not a
    detection, segmentation, video or optical-flow model). ``max_params``: a classifier with more
    parameters (torchvision's own count, known before it is built) is refused."""
    import torchvision
    known = torchvision.models.list_models(module=torchvision.models)
    if name not in known:
        close = [m for m in known if m.startswith(name[:4])]
        raise ValueError(f"unknown torchvision model {name!r}" + (f" (like it: {', '.join(close[:8])})" if close else
                                                                  " (torchvision.models.list_models() lists them)"))
    if max_params is not None:
        size = max(weights.meta.get("num_params", 0) for weights in torchvision.models.get_model_weights(name))
        if size > max_params:
            raise ValueError(f"torchvision model {name!r} has {size:,} parameters, over the limit of {max_params:,}")
    try:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = torchvision.models.get_model(name, weights=None)
    except ValueError as error:
        raise ValueError(f"unknown torchvision model {name!r} ({error})") from None
    if weights is not None:
        try:  # (weights_only: a state_dict file is tensors; unpickling anything else could run code)
            model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        except OSError:
            raise
        except Exception as error:  # (not a torch file, not a state_dict, or another model's)
            raise ValueError(f"{weights}: not a state_dict of torchvision's {name}: {error}") from None
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


class QueueFull(Exception):
    """A batcher's queue holds max_queue images: the request is answered 503 with Retry-After, not queued."""


class Batcher:
    """One thread that runs ``process`` on batches of the items submitted to it (Triton's dynamic batcher):
    it takes the first waiting item, then more until ``max_batch`` items, or a preferred batch size with
    nothing more waiting, or ``max_wait_ms`` after the first, and answers each item's Future with its element
    of ``process(items)`` (an exception there is raised by that item's Future alone, one raised by ``process``
    by every Future of the batch). ``stats`` records each batch's size, queue and compute times.

    One batch never stops the thread: an item whose Future was cancelled while it waited (a gRPC deadline, a
    client gone) is dropped, any other failure in the loop answers that batch's Futures with it and the thread
    goes on, and a thread that must end (SystemExit out of ``process``) starts its successor first. At most
    ``max_queue`` items wait (``submit_all`` past it: QueueFull), so a burst costs bounded memory.
    """

    def __init__(self, process: Callable[[list], list], max_batch: int = 8, max_wait_ms: float = 5.0,
                 preferred: tuple[int, ...] = (), stats: "ModelStats | None" = None, threads: int | None = None,
                 max_queue: int = MAX_QUEUE):
        if (isinstance(max_batch, bool) or not isinstance(max_batch, int) or not 1 <= max_batch <= MAX_BATCH_SIZE
                or not 0 <= max_wait_ms <= MAX_QUEUE_DELAY_US / 1000
                or any(not 1 <= p <= max_batch for p in preferred)):
            raise ValueError(f"max_batch must be a whole number from 1 to {MAX_BATCH_SIZE}, max_wait_ms from 0 to "
                             f"{MAX_QUEUE_DELAY_US // 1000}, preferred sizes in [1, max_batch]")
        if threads is not None and threads < 1:
            raise ValueError(f"threads={threads}: a positive number of intra-op threads, or None for torch's")
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
            raise ValueError(f"max_queue={max_queue!r}: a positive whole number of waiting items")
        self.process, self.max_batch, self.max_wait = process, max_batch, max_wait_ms / 1000
        self.preferred = frozenset(preferred)
        self.stats = stats
        self.max_queue = max(max_queue, max_batch)  # (a full batch always fits)
        self.batches = 0  # how many batches ran (for tests and /health)
        self.threads = threads  # torch's intra-op threads for ``process`` (None: torch's default)
        self._queue: queue.Queue = queue.Queue()
        self._waiting = 0  # items submitted and not yet taken into a batch
        self._closed, self._closing = False, threading.Lock()
        self._counted = threading.Event()  # the thread has set its intra-op count
        default = torch.get_num_threads()  # this thread's: torch's default, or what the user set
        self._thread = self._start()
        if threads is not None:
            # torch.set_num_threads also sets the count every thread not yet set up starts with (torch sets
            # a thread's up at its first parallel op from the count last set anywhere): put that back, so a
            # pipeline batcher's 1 does not become the classifier's, the decode pool's or the caller's.
            self._counted.wait()
            torch.set_num_threads(default)

    def _start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="fastload-serve-batcher", daemon=True)
        thread.start()
        return thread

    def submit(self, item) -> Future:
        """``item``'s Future; a RuntimeError once closed (nothing would answer it), QueueFull when full."""
        return self.submit_all([item])[0]

    def submit_all(self, items: list) -> list[Future]:
        """A Future for each of ``items`` (one request's), all queued or none: RuntimeError once closed,
        QueueFull if they would take the queue past max_queue."""
        futures = [Future() for _ in items]
        with self._closing:
            if self._closed:
                raise RuntimeError("closed (the model was unloaded)")
            if self._waiting + len(items) > self.max_queue:
                raise QueueFull(f"{self._waiting} images wait for the model, the limit is {self.max_queue}: retry")
            self._waiting += len(items)
            now = time.perf_counter_ns()
            for item, future in zip(items, futures):
                self._queue.put((item, future, now))
        return futures

    def close(self) -> None:
        """Answer everything submitted so far, then stop the thread."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
            self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        try:
            if self.threads is not None:
                torch.get_num_threads()  # (this thread's set-up now: done later, it would overwrite the count)
                torch.set_num_threads(self.threads)
        finally:
            self._counted.set()
        closing = False
        while not closing:
            batch: list = []
            try:
                closing = self._collect(batch)
                if batch:
                    self._answer(batch)
            except BaseException as error:  # a bug of ours, or a broken process: this batch fails, others go on
                log.exception("a batch of %d failed outside its process()", len(batch))
                for _, future, _ in batch:
                    if not future.done():
                        future.set_exception(RuntimeError(f"the batcher failed: {error!r}"))
                if not isinstance(error, Exception):  # (SystemExit: this thread ends, another takes the queue)
                    self._thread = self._start()
                    return

    def _take(self, timeout: float | None):
        """The next queued entry (None: close() was asked), or queue.Empty after ``timeout``."""
        entry = self._queue.get(timeout=timeout)
        if entry is not None:
            with self._closing:
                self._waiting -= 1
        return entry

    def _collect(self, batch: list) -> bool:
        """Fill ``batch`` with the next batch's entries (whose Futures are now running: a cancel comes too
        late); an entry whose Future was cancelled while it waited is dropped. True once close() was asked."""
        deadline = None
        while len(batch) < self.max_batch:
            if batch and len(batch) in self.preferred and self._queue.empty():
                return False
            try:
                entry = self._take(None if deadline is None else max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if entry is None:
                return True
            if entry[1].set_running_or_notify_cancel():
                batch.append(entry)
                deadline = deadline or time.monotonic() + self.max_wait
        return False

    def _answer(self, batch: list) -> None:
        started = time.perf_counter_ns()
        try:
            with torch.inference_mode():
                results = self.process([item for item, _, _ in batch])
            self.batches += 1
        except Exception as error:  # process failed: every request of the batch gets the error
            results = [error] * len(batch)
        if len(results) != len(batch):  # a broken process: no Future may wait forever
            results = [RuntimeError(f"{len(results)} results for a batch of {len(batch)}")] * len(batch)
        if self.stats is not None:
            self.stats.batch(len(batch), sum(started - t for _, _, t in batch), time.perf_counter_ns() - started)
        for (_, future, _), result in zip(batch, results):
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)


class DecodePool:
    """The decode threads of a server (both APIs'), kept working: a pool found shut down or broken by
    anything but ``close()`` is replaced by a new one and the work submitted there, so that no request fails
    and none after it for that."""

    def __init__(self, threads: int):
        self.threads = threads
        self._pool = self._new()
        self._closed = False

    def _new(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(self.threads, thread_name_prefix="fastload-serve-decode")

    def run(self, loop, function, *args):
        """``function(*args)`` in a decode thread, as an asyncio future of ``loop``."""
        try:
            return loop.run_in_executor(self._pool, function, *args)
        except RuntimeError:  # (shut down, or a BrokenExecutor)
            if self._closed:
                raise RequestError(503, "the server is stopping", {"Retry-After": "1"}) from None
            log.error("the decode pool was found shut down: a new one takes its work")
            self._pool = self._new()
            return loop.run_in_executor(self._pool, function, *args)

    def close(self) -> None:
        """Stop the threads, once what they run is done (a decode past its budget is waited for here)."""
        self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class ModelStats:
    """Triton's statistics for one model (nanoseconds): requests answered and failed, images run, batches run,
    and time queued (per image, summed) and computing (per batch). compute_input is a request's decoding (its
    images decoded in the pool: the input tensors made), compute_output the encoding of its answer, each per
    request; both happen per request outside the batch, so batch_stats carry compute_infer alone."""
    success: list = field(default_factory=lambda: [0, 0])  # count, ns (whole request)
    fail: list = field(default_factory=lambda: [0, 0])
    queue: list = field(default_factory=lambda: [0, 0])
    compute: list = field(default_factory=lambda: [0, 0])
    compute_input: list = field(default_factory=lambda: [0, 0])
    compute_output: list = field(default_factory=lambda: [0, 0])
    inferences: int = 0
    executions: int = 0
    last_inference_ms: int = 0
    batches: dict = field(default_factory=dict)  # batch size -> [count, ns]
    lock: threading.Lock = field(default_factory=threading.Lock)

    def batch(self, size: int, queued_ns: int, compute_ns: int) -> None:
        with self.lock:
            self.inferences += size
            self.executions += 1
            self.queue[0] += size
            self.queue[1] += queued_ns
            self.compute[0] += size
            self.compute[1] += compute_ns
            counts = self.batches.setdefault(size, [0, 0])
            counts[0] += 1
            counts[1] += compute_ns
            self.last_inference_ms = int(time.time() * 1000)

    def request(self, ok: bool, ns: int) -> None:
        self._add(self.success if ok else self.fail, ns)

    @contextlib.contextmanager
    def counted(self):
        """A request, from here to the block's end: a success, or a failure if the block raises."""
        started, ok = time.perf_counter_ns(), False
        try:
            yield
            ok = True
        finally:
            self.request(ok, time.perf_counter_ns() - started)

    def made_input(self, ns: int) -> None:
        self._add(self.compute_input, ns)

    def made_output(self, ns: int) -> None:
        self._add(self.compute_output, ns)

    def _add(self, counts: list, ns: int) -> None:
        with self.lock:
            counts[0] += 1
            counts[1] += ns

    def as_json(self, name: str, version: str) -> dict:
        def duration(pair):
            return {"count": pair[0], "ns": pair[1]}
        with self.lock:
            zero = {"count": 0, "ns": 0}
            return {"name": name, "version": version, "last_inference": self.last_inference_ms,
                    "inference_count": self.inferences, "execution_count": self.executions,
                    "inference_stats": {"success": duration(self.success), "fail": duration(self.fail),
                                        "queue": duration(self.queue),
                                        "compute_input": duration(self.compute_input),
                                        "compute_infer": duration(self.compute),
                                        "compute_output": duration(self.compute_output)},
                    "batch_stats": [{"batch_size": size, "compute_input": zero,
                                     "compute_infer": duration(pair), "compute_output": zero}
                                    for size, pair in sorted(self.batches.items())]}


def _classes(classifier: torch.nn.Module, pipeline) -> int:
    """How many classes ``classifier`` gives for the pipeline's output; a ValueError if it cannot take that
    output (ViT wants 224x224 exactly, Inception at least 75x75) or gives no (batch, classes) logits."""
    try:
        with torch.inference_mode():
            logits = classifier(model_input([torch.zeros(pipeline.output_shape).to(pipeline.device)]))
        if not isinstance(logits, torch.Tensor) or logits.ndim != 2:
            raise TypeError(f"it gives {type(logits).__name__}, not (batch, classes) logits")
    except Exception as error:
        raise ValueError(f"the classifier cannot take the pipeline's {list(pipeline.output_shape)} output: "
                         f"{error}") from None
    return logits.shape[1]


class Model:
    """A served model: a JsonPipeline, optionally followed by a classifier, behind its dynamic batcher.

    Args:
        name: the model's name in the API.
        pipeline: a ``JsonPipeline``.
        classifier: a torch module (float NCHW in, logits out), or None for the pipeline alone.
        max_batch_size, max_queue_delay_us, preferred_batch_size: Triton's dynamic batching knobs (a request
            of more images than max_batch_size is refused, as Triton does); bounds in serve_limits.py.
        max_queue: images waiting for the batcher at most (past it: 503 with Retry-After).
    """

    version = "1"

    def __init__(self, name: str, pipeline, classifier: torch.nn.Module | None = None, max_batch_size: int = 8,
                 max_queue_delay_us: float = 5000, preferred_batch_size: tuple[int, ...] = (),
                 max_queue: int = MAX_QUEUE):
        self.name, self.pipeline, self.classifier, self.max_batch_size = name, pipeline, classifier, max_batch_size
        self.stats = ModelStats()
        # A pipeline alone runs small per-image ops beside the decode threads: on one intra-op thread (fanned
        # out, they wait on each other for cores the decoders hold). A classifier keeps torch's default.
        threads = 1 if classifier is None and torch.device(pipeline.device).type == "cpu" else None
        if classifier is None:
            self.output = ("output", DTYPES.get(pipeline.output_dtype, "FP32"), [-1, *pipeline.output_shape])
        else:
            self.output = ("probabilities", "FP32", [-1, _classes(classifier, pipeline)])
        self.batcher = Batcher(self._process, max_batch_size, max_queue_delay_us / 1000, preferred_batch_size,
                               self.stats, threads, max_queue)  # (last: nothing after it may fail, or it would leak)

    def metadata(self) -> dict:
        name, dtype, shape = self.output
        return {"name": self.name, "versions": [self.version], "platform": "fastload_json_pipeline" +
                ("+torchvision" if self.classifier is not None else ""),
                "inputs": [{"name": "images", "datatype": "BYTES", "shape": [-1]}],
                "outputs": [{"name": name, "datatype": dtype, "shape": shape}]}

    def answer(self, results: list, wanted: list[tuple[str | None, object]]) -> list[tuple[str, str, list, object]]:
        """A request's outputs, on either protocol: ``results`` (the batcher's, one an image) as each requested
        output (``wanted``: its name and its ``classification`` parameter, 0 for none; empty: the model's
        output), as (name, datatype, shape, the batch or, with classification k, the top k of each row as
        BYTES ``"probability:class"`` strings)."""
        name, dtype, shape = self.output
        batch = results[0][None] if len(results) == 1 else torch.stack(results)  # (one image: no copy)
        answers = []
        for requested, k in wanted or [(name, 0)]:
            if requested != name:
                raise RequestError(400, f"model {self.name!r} has one output, {name!r}")
            if k:
                if self.classifier is None or isinstance(k, bool) or not isinstance(k, int) or k < 1:
                    raise RequestError(400, "classification: a positive class count, on a classifier's output")
                values, indices = batch.topk(min(k, batch.shape[1]), dim=1)
                strings = [f"{v:f}:{i}".encode() for row_v, row_i in zip(values.tolist(), indices.tolist())
                           for v, i in zip(row_v, row_i)]
                answers.append((name, "BYTES", [len(results), values.shape[1]], strings))
            else:
                answers.append((name, dtype, [len(results), *shape[1:]], batch))
        return answers

    def _process(self, items: list[tuple[str, torch.Tensor]]) -> list:
        """(name, decoded image) each: the pipeline's output (or probabilities) each, or its DecodeError."""
        outputs = self.pipeline._process([(i, name, image) for i, (name, image) in enumerate(items)])
        if self.classifier is None:
            return outputs
        good = [out for out in outputs if not isinstance(out, DecodeError)]
        probabilities = iter(self.classifier(model_input(good)).float().softmax(dim=1).cpu() if good else [])
        return [out if isinstance(out, DecodeError) else next(probabilities) for out in outputs]

    def close(self) -> None:
        self.batcher.close()
