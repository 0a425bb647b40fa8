"""fastload serve's gRPC API fuzzed for longer than the test suite does it: the strategies and checks of
tests/test_serve_grpc_fuzz.py (loaded from that file), in rounds of Hypothesis runs with fresh seeds, against
one server on 127.0.0.1, until --seconds have passed. Each round draws requests for every unary RPC (messages
built from the request's descriptor, mutated valid ones, random bytes, near-valid inferences), interleaved;
after each round a model the draws cannot name must answer on both APIs (the repository's models are
loaded again at each round's start: the draws unload them). Prints a summary: requests by RPC
and status, the failures (INTERNAL, UNKNOWN, DEADLINE_EXCEEDED, a model that stopped answering), the event
loop's longest hold while a request was in flight, and the process's peak memory. Exits 1 on any failure or
a hold past the bound.

    .venv/bin/python benchmarks/fuzz_grpc.py --seconds 120 [--examples 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import pathlib
import sys
import tempfile
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load_fuzz_tests():
    """tests/test_serve_grpc_fuzz.py as a module (its strategies, Fuzzer and start_server)."""
    sys.path.insert(0, str(ROOT / "tests"))
    spec = importlib.util.spec_from_file_location("test_serve_grpc_fuzz", ROOT / "tests" / "test_serve_grpc_fuzz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peak_mib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) >> 10


class CollectorPauses:
    """The cyclic garbage collector's passes (gc.callbacks): the longest, and its generation. A full pass holds
    the GIL, and so the server's loop, whichever thread runs it; the client's objects count here too."""

    def __init__(self):
        self.longest, self.generation, self.count, self._started = 0.0, None, 0, 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.count += 1
        if time.perf_counter() - self._started > self.longest:
            self.longest, self.generation = time.perf_counter() - self._started, info["generation"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="how long to fuzz (rounds start until then)")
    parser.add_argument("--examples", type=int, default=300, help="requests drawn in one round")
    parser.add_argument("--seed", type=int, default=0, help="the first round's seed (round i: seed + i)")
    parser.add_argument("--freeze", action="store_true", help="gc.freeze() once the server has started: the "
                        "collector's full passes then skip the objects made so far (torch's, the strategies')")
    args = parser.parse_args()

    fuzz = load_fuzz_tests()
    from hypothesis import HealthCheck, given, seed, settings
    from hypothesis import strategies as st
    from tritonclient.grpc import service_pb2 as pb

    methods = st.sampled_from(fuzz.UNARY + ["ModelInfer"] * 4 + ["RepositoryModelLoad", "RepositoryModelUnload"])
    with tempfile.TemporaryDirectory() as folder:
        server = fuzz.start_server(pathlib.Path(folder))
        fuzzer = fuzz.Fuzzer(server)
        if args.freeze:
            gc.freeze()
        started, memory_before, rounds, broken = time.monotonic(), peak_mib(), 0, []
        pauses = CollectorPauses()
        try:
            while time.monotonic() - started < args.seconds:
                @seed(args.seed + rounds)
                @settings(max_examples=args.examples, deadline=None, database=None, derandomize=False,
                          suppress_health_check=list(HealthCheck))
                @given(st.data())
                def round_(data):
                    method = data.draw(methods)
                    fuzzer.send(method, data.draw(fuzz.requests(method)))

                for name in fuzz.MODELS:  # (the draws unload them too: each round starts with them loaded)
                    fuzzer.send("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name=name)
                                .SerializeToString())
                round_()
                fuzzer.send("ModelStreamInfer", fuzz._valid("ModelInfer"))
                try:
                    fuzzer.serves()
                except Exception as error:  # (kept: the summary reports it)
                    broken.append(f"round {rounds}: the kept model did not answer: {error!r}")
                rounds += 1
            elapsed = time.monotonic() - started
            deadline = time.monotonic() + 5
            while server._inflight_bytes and time.monotonic() < deadline:
                time.sleep(0.01)
            if server._inflight_bytes:
                broken.append(f"{server._inflight_bytes} request bytes still charged after the run")
        finally:
            gc.unfreeze()  # (else the objects frozen are reported leaked at exit by the bindings that count them)
            fuzzer.close()
            server.close()

    total = sum(fuzzer.statuses.values())
    print(f"{total} requests in {rounds} rounds of {args.examples} draws, {elapsed:.0f} s ({total / elapsed:.0f}/s), "
          f"seeds {args.seed}..{args.seed + rounds - 1}")
    by_method: dict[str, Counter] = {}
    for (method, code), count in fuzzer.statuses.items():
        by_method.setdefault(method, Counter())[code] = count
    for method in sorted(by_method):
        print(f"  {method:30s} " + ", ".join(f"{code} {n}" for code, n in by_method[method].most_common()))
    worst, request = fuzzer.worst
    print(f"event loop held at most {worst * 1000:.1f} ms while a request was in flight (bound "
          f"{fuzz.LAG_BOUND_S * 1000:.0f} ms, target 100 ms): {request[:100]}")
    print(f"garbage collector: {pauses.count} passes, the longest {pauses.longest * 1000:.1f} ms (generation "
          f"{pauses.generation})")
    print(f"peak memory of this process (server and client): {memory_before} -> {peak_mib()} MiB")
    failures = fuzzer.failures + broken
    print(f"failures: {len(failures)}")
    for failure in failures[:10]:
        print(f"  {failure[:300]}")
    return 1 if failures or worst >= fuzz.LAG_BOUND_S else 0


if __name__ == "__main__":
    sys.exit(main())
