"""fastload serve's monitoring: GET /metrics in Prometheus' text exposition format (Triton's metric names), and
a watchdog of the event loop's lag (how long a callback held the loop), which the tests and
benchmarks/fuzz_serve.py run beside hostile requests.
"""

from __future__ import annotations

import asyncio
import collections
import time

# (Triton's metric, its type, its value of a model's ModelStats)
METRICS = [("nv_inference_request_success", "counter", lambda s: s.success[0]),
           ("nv_inference_request_failure", "counter", lambda s: s.fail[0]),
           ("nv_inference_count", "counter", lambda s: s.inferences),
           ("nv_inference_exec_count", "counter", lambda s: s.executions),
           ("nv_inference_request_duration_us", "counter", lambda s: (s.success[1] + s.fail[1]) // 1000),
           ("nv_inference_queue_duration_us", "counter", lambda s: s.queue[1] // 1000),
           ("nv_inference_compute_input_duration_us", "counter", lambda s: s.compute_input[1] // 1000),
           ("nv_inference_compute_infer_duration_us", "counter", lambda s: s.compute[1] // 1000),
           ("nv_inference_compute_output_duration_us", "counter", lambda s: s.compute_output[1] // 1000)]


def label(value: str) -> str:
    """A label value as the text format requires it: backslash, double quote and newline escaped (a model
    name holding ``"\\n`` would otherwise write series of its own into the scrape)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_text(models, inflight_bytes: int, connections: int) -> bytes:
    """The /metrics body: Triton's per-model series for ``models`` (Model objects), then the server's own
    gauges."""
    lines = []
    for metric, kind, value in METRICS:
        lines.append(f"# TYPE {metric} {kind}")
        lines += [f'{metric}{{model="{label(m.name)}",version="{label(m.version)}"}} {value(m.stats)}'
                  for m in models]
    lines += ["# TYPE fastload_inflight_request_bytes gauge", f"fastload_inflight_request_bytes {inflight_bytes}",
              "# TYPE fastload_open_connections gauge", f"fastload_open_connections {connections}"]
    return ("\n".join(lines) + "\n").encode()


class LoopLag:
    """A watchdog on an event loop: a task that sleeps ``tick_s`` again and again and records by how much
    each wake-up came late: ``max_s``, the longest any callback held the loop while it ran, and
    ``held_during(t0, t1)``, the longest the loop was held within a window (a request's, when the server
    shares its process and GIL with a client whose own work would count otherwise). Start and stop it from
    any thread: ``LoopLag(loop).start()`` ... ``.stop()``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tick_s: float = 0.01):
        self.loop, self.tick_s = loop, tick_s
        self.max_s = 0.0
        self.holds: collections.deque = collections.deque(maxlen=4096)  # (due, woke) of each late wake-up
        self._due = None  # when the watchdog should wake next (perf_counter)
        self._task = None

    async def _watch(self) -> None:
        while True:
            self._due = time.perf_counter() + self.tick_s
            await asyncio.sleep(self.tick_s)
            woke = time.perf_counter()
            if woke - self._due > 0.002:
                self.holds.append((self._due, woke))
                self.max_s = max(self.max_s, woke - self._due)

    def held_during(self, t0: float, t1: float) -> float:
        """The longest the loop was held within [t0, t1] (perf_counter times), in seconds: each late wake-up's
        hold clipped to the window, and a hold still going on (the watchdog overdue) up to now."""
        holds = list(self.holds)
        if self._due is not None and time.perf_counter() > self._due:
            holds.append((self._due, time.perf_counter()))
        return max([0.0] + [min(woke, t1) - max(due, t0) for due, woke in holds])

    def start(self) -> "LoopLag":
        async def begin():
            self._task = asyncio.ensure_future(self._watch())
        asyncio.run_coroutine_threadsafe(begin(), self.loop).result()
        return self

    def stop(self) -> float:
        """Stop watching; the longest lag seen, in seconds."""
        async def end():
            self._task.cancel()
        asyncio.run_coroutine_threadsafe(end(), self.loop).result()
        return self.max_s
