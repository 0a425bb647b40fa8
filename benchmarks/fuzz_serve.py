"""fastload serve's REST API fuzzed for longer than the suite does: the checks of tests/test_serve_fuzz.py
(loaded from that file: one definition of the checks), in rounds of Schemathesis cases from the OpenAPI
description and drawn binary tensor bodies, until ``--seconds`` or ``--examples`` run out.

Each round is seeded (``--seed`` + its number: a failure is replayed by running that round again), three of
Schemathesis' cases to one binary body. Failures are collected rather than shrunk, so that one does not stop
the run. The summary: requests, status counts, the longest the server's event loop was held while a request
was in flight (and by which; replayed twice, the least of the three, as the test confirms it), failures
(distinct, the first 20).

    python benchmarks/fuzz_serve.py --seconds 150
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent


def load_checks():
    """tests/test_serve_fuzz.py as a module (it needs pytest, schemathesis and hypothesis: the test extra)."""
    spec = importlib.util.spec_from_file_location("serve_fuzz_checks", HERE.parent / "tests" / "test_serve_fuzz.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=150, help="stop starting rounds after this long")
    parser.add_argument("--examples", type=int, default=0, help="stop after this many requests (0: by time)")
    parser.add_argument("--round", type=int, default=200, help="Schemathesis cases a round (and a third as many "
                                                               "binary bodies)")
    parser.add_argument("--seed", type=int, default=0, help="the first round's seed")
    args = parser.parse_args(argv)
    import warnings

    import schemathesis
    from hypothesis import given, seed, settings

    from fastload.cli.bench import machine
    warnings.filterwarnings("ignore", message="a [A-Z]+ image in a rocAL pipeline")
    checks = load_checks()
    schema = schemathesis.openapi.from_path(checks.SCHEMA)
    cases, bodies = checks.schema_cases(schema), checks.binary_infer_requests()
    folder = tempfile.TemporaryDirectory()
    server = checks.start_server(pathlib.Path(folder.name))
    probe = checks.Probe(server, raise_failures=False)
    base = dict(deadline=None, database=None, suppress_health_check=list(checks.HealthCheck), derandomize=False)
    started, rounds = time.monotonic(), 0
    print(f"fastload serve fuzzing on {machine()}", flush=True)
    try:
        while time.monotonic() - started < args.seconds:
            if args.examples and sum(probe.statuses.values()) >= args.examples:
                break
            number = args.seed + rounds

            @seed(number)
            @settings(max_examples=args.round, **base)
            @given(case=cases)
            def schema_round(case):
                probe.case(case)

            @seed(number)
            @settings(max_examples=max(1, args.round // 3), **base)
            @given(request=bodies)
            def binary_round(request):
                path, body, headers = request
                probe.raw("POST", path, body, headers)

            schema_round()
            binary_round()
            rounds += 1
            print(f"  round {number}: {sum(probe.statuses.values())} requests, {len(probe.failures)} failures, "
                  f"{time.monotonic() - started:.0f} s", flush=True)
        confirmed = probe.worst_confirmed()
    finally:
        overall = probe.close()
        server.close()
        folder.cleanup()
    elapsed = time.monotonic() - started
    total = sum(probe.statuses.values())
    print(f"{total} requests in {elapsed:.0f} s ({rounds} rounds, seeds {args.seed}-{args.seed + rounds - 1}), "
          f"{total / elapsed:.0f} req/s")
    print("statuses: " + ", ".join(f"{status}: {count}" for status, count in sorted(probe.statuses.items())))
    print(f"event loop held at most {probe.worst[0] * 1000:.1f} ms while a request was in flight ({probe.worst[1]}; "
          f"{confirmed * 1000:.1f} ms at the least of it and two replays); {overall * 1000:.1f} ms at any time (this "
          f"process's fuzzer shares the GIL)")
    holds = sorted(probe.holds)
    print(f"loop holds during requests: median {holds[len(holds) // 2] * 1000:.1f} ms, 99th percentile "
          f"{holds[int(len(holds) * 0.99)] * 1000:.1f} ms, the five longest "
          + ", ".join(f"{h * 1000:.0f}" for h in holds[-5:]) + " ms")
    distinct = list(dict.fromkeys(failure.split("\n")[0][:300] for failure in probe.failures))
    print(f"failures: {len(probe.failures)} ({len(distinct)} distinct)")
    for failure in distinct[:20]:
        print("  " + failure)
    return 1 if probe.failures or confirmed >= checks.LAG_BOUND_S else 0


if __name__ == "__main__":
    sys.exit(main())
