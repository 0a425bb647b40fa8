"""The reliability check: the adversarial probes that once found silent wrong data and hangs, run again.

Each probe is an adversarial case (a 1,500-scan JPEG, a
shard cut short without Content-Length, a shard replaced by one of the same
size, a stuck worker at close(), ...), and the outcome that passes it:
correct data, or a clear error naming the object, within a stated bound.
Most probes are the tests that landed with their fixes (real HTTP and S3
servers on 127.0.0.1, real processes, real files); this script runs them
together in one pytest process, and runs directly the probes whose cost is
the point (the 1,500-scan JPEG through a DataLoader, a stuck worker left
at the default close bound), each under a bound of its own. The report is
one row per probe: pass or fail, the direct probe's seconds and bound, the
number of tests and their seconds (setup included; each test asserts its
own time bounds, e.g. a stalled server's error within 15 s).

    python benchmarks/probes.py [--json probes.json] [--only NAME ...]

Exit status 0 when every probe passes. A test that is skipped (an optional
dependency missing: moto, aiohttp) makes its probe "skipped", not passed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Probe:
    name: str
    probe: str  # what the adversary does
    passes: str  # the outcome that passes
    tests: list[str] = field(default_factory=list)  # pytest node ids, relative to the repository root
    # run in this process: returns (the seconds of the part that is bounded, what it saw); raises if it fails
    direct: Callable[[], tuple[float, str]] | None = None
    bound_s: float | None = None  # seconds that part may take (the tests assert their own bounds)


def _many_scans(scans: int) -> bytes:
    """A progressive JPEG of ``scans`` scans (its last scan repeated)."""
    from PIL import Image
    out = io.BytesIO()
    Image.linear_gradient("L").resize((200, 150)).convert("RGB").save(out, "JPEG", progressive=True)
    data = out.getvalue()
    last = data.rfind(b"\xff\xda")
    return data[:last] + data[last:-2] * (scans - 9) + b"\xff\xd9"  # Pillow writes 10 scans


def _scans_through_a_loader() -> tuple[float, str]:
    import torch

    import fastload
    from fastload import transforms as T
    data = _many_scans(1500)
    with tempfile.TemporaryDirectory() as folder:
        os.makedirs(os.path.join(folder, "a"))
        path = os.path.join(folder, "a", "scans.jpg")
        with open(path, "wb") as out:
            out.write(data)
        source = fastload.ImageFolder(folder, T.Compose([T.RandomResizedCrop(64),
                                                         T.ToDtype(torch.float32, scale=True)]))
        started = time.monotonic()
        try:
            list(fastload.DataLoader(source, batch_size=1, num_workers=1))
        except fastload.DecodeError as error:
            took = time.monotonic() - started
            if "scans.jpg" not in str(error) or "scans" not in str(error).replace("scans.jpg", ""):
                raise AssertionError(f"the error does not name the file and the scans: {error}") from error
            return took, f"{len(data) // 1000} KB, 1,500 scans: DecodeError in {took * 1000:.0f} ms: {error}"
    raise AssertionError("a 1,500-scan JPEG was decoded")


def _stuck_worker_at_the_default_bound() -> tuple[float, str]:
    """A worker stuck forever in __getitem__, an exception in the training loop, timeout=0 (no limit on a
    batch): leaving the loop returns within CLOSE_TIMEOUT (5 s) and warns of the stuck thread, naming the
    sample."""
    import warnings

    import torch

    import fastload
    from fastload import errors, pipeline
    release = threading.Event()

    class Stuck(torch.utils.data.Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, index):
            if index == 5:
                release.wait()
            return torch.tensor(index)
    raised = 0.0
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                for _ in fastload.DataLoader(Stuck(), batch_size=2, num_workers=2):
                    time.sleep(0.2)
                    raised = time.monotonic()  # the bound runs from here: leaving the loop
                    raise FloatingPointError("loss is nan")
            except FloatingPointError:
                pass
        took = time.monotonic() - raised
    finally:
        release.set()
    stuck = [str(w.message) for w in caught if issubclass(w.category, errors.StuckThreadWarning)]
    bound = getattr(pipeline, "CLOSE_TIMEOUT", 5.0)
    if took > bound + 2 or not any("sample 5" in message for message in stuck):
        raise AssertionError(f"left the loop after {took:.1f} s (bound {bound} s); warnings: {stuck}")
    return took, f"left the loop in {took:.1f} s (CLOSE_TIMEOUT {bound} s); {stuck[0]}"


PROBES = [
    Probe("scan-limit", "a ~300 KB progressive JPEG of 1,500 scans, through a DataLoader (it decoded for ~34 s)",
          "DecodeError naming the file and its scans, in well under a second (bound: 2 s)",
          ["tests/test_decode.py::test_a_progressive_jpeg_of_too_many_scans_is_refused_naming_the_file",
           "tests/test_decode.py::test_the_dali_and_rocal_decoders_refuse_too_many_scans"],
          direct=_scans_through_a_loader, bound_s=2.0),
    Probe("serve-budget", "a slow image among others sent to fastload serve; the server full",
          "the slow request fails alone; caps answer 503; trickled headers cut at the timeout",
          ["tests/test_serving_protocol.py::test_a_slow_image_fails_its_request_alone_and_caps_give_503",
           "tests/test_serving_protocol.py::test_trickling_headers_are_cut_at_the_timeout"]),
    Probe("truncated-shard", "a remote shard's body cut short with no Content-Length (streaming)",
          "fetched again, never cached short; one that never arrives whole is an error naming the URL; "
          "each lost sample an error (or reported by on_error='skip')",
          ["tests/test_tarshards.py::test_a_streamed_shard_cut_short_without_content_length_is_fetched_again_"
           "never_cached_short",
           "tests/test_tarshards.py::test_a_short_copy_in_the_cache_is_fetched_again_and_a_cut_refetch_is_each_"
           "samples_error"]),
    Probe("replaced-shard", "a remote shard replaced by one of the same size and other labels, on a server "
          "without ETags (Last-Modified only), with ETags, on S3, on GCS/Azure/local-like filesystems",
          "indexed again by a new source; mid-run an error naming the URL ('changed since it was indexed'), "
          "never the old labels",
          ["tests/test_tarshards.py::test_a_shard_replaced_by_one_of_the_same_size_is_indexed_again",
           "tests/test_tarshards.py::test_a_shard_replaced_mid_run_is_an_error_naming_it_never_wrong_labels",
           "tests/test_shardfiles.py::test_an_s3_object_replaced_mid_run_is_an_error_naming_it_and_a_new_source_"
           "indexes_it_again",
           "tests/test_shardfiles.py::test_an_object_replaced_mid_run_on_other_filesystems_is_an_error_naming_it_"
           "or_indexed_again",
           "tests/test_shardfiles.py::test_a_filesystem_that_reports_no_version_is_warned_of_and_checked_by_size",
           "tests/test_shardfiles.py::test_a_local_shard_replaced_mid_run_is_an_error_naming_it"]),
    Probe("stuck-close", "close(), an exception in the loop, Ctrl-C, interpreter exit, each with a worker stuck "
          "in __getitem__", "each returns within the timeout (default CLOSE_TIMEOUT=5 s) and warns naming "
          "the thread and sample",
          ["tests/test_thread_pool.py::test_close_of_a_stuck_job_returns_within_the_timeout_and_names_the_thread_and_"
           "item",
           "tests/test_thread_pool.py::test_loader_close_with_a_worker_stuck_in_getitem_is_bounded_by_timeout",
           "tests/test_thread_pool.py::test_an_exception_in_the_loop_with_a_stuck_worker_returns_within_the_default_"
           "bound",
           "tests/test_thread_pool.py::test_interpreter_exit_and_ctrl_c_return_within_the_bound_with_a_stuck_worker"],
          direct=_stuck_worker_at_the_default_bound, bound_s=7.0),
    Probe("lock-wait", "the shard cache's lock held by a stopped (SIGSTOP) process",
          "the wait ends at lock_timeout with a LockTimeout naming the holder's pid and host",
          ["tests/test_shardcache.py::test_a_lock_held_by_a_stopped_process_is_a_bounded_wait_and_the_error_"
           "names_the_holder"]),
    Probe("resume-swapped", "resume after one file of the folder was swapped for another (same count), or with "
          "another shuffle; resume after a batch whose error reached the loop",
          "refused, saying what differs; the failed batch counts as consumed",
          ["tests/test_resume.py::test_resume_refuses_other_samples_or_order_settings_saying_which",
           "tests/test_resume.py::test_a_failed_batch_counts_as_consumed_as_under_torch"]),
    Probe("http-errors", "503 then 200 at open and read; 403; 404; 503 forever; a 200 answering a ranged "
          "request; a glob whose listing fails", "503 retried with backoff, 403/404 not ('permanent, not "
          "retried'), a persistent 503 says how many tries; ranged 200 sliced right; listings retried alike",
          ["tests/test_tarshards.py::test_server_errors_are_retried_at_open_and_read_and_403_404_are_permanent",
           "tests/test_tarshards.py::test_a_server_that_ignores_range_still_gives_each_sample_its_own_bytes",
           "tests/test_shardfiles.py::test_a_remote_glob_is_retried_on_transient_errors_and_not_on_permanent_ones"]),
    Probe("long-query", "a presigned URL with a 300-character query, indexed and streaming",
          "cache names under 160 bytes, found again when signed anew (nothing indexed or fetched twice)",
          ["tests/test_tarshards.py::test_a_presigned_url_with_a_long_query_is_cached_under_a_bounded_name",
           "tests/test_shardcache.py::test_cache_names_are_bounded_for_any_url"]),
    Probe("json-pipeline", "JsonPipeline sizes of 10^9, anchors outside the image, NaN/Infinity mean or std, "
          "start_x 1e308 sent to fastload serve, deeply nested or non-UTF-8 files",
          "one error naming file, operation and key; serve answers 400, never 500",
          ["tests/compat/test_rocal_json_pipeline.py::test_values_outside_the_bounds_are_refused_naming_file_"
           "operation_and_key",
           "tests/compat/test_rocal_json_pipeline.py::test_the_bounds_themselves_are_accepted",
           "tests/compat/test_rocal_json_pipeline.py::test_unreadable_files_are_one_clear_error_naming_the_file",
           "tests/test_serving_protocol.py::test_load_with_a_pipeline_the_checks_refuse_is_400"]),
    Probe("bad-list", "fastload inspect --bad-list over files whose names are not UTF-8 or hold tabs and "
          "newlines", "one escaped UTF-8 row each, read back to the same names",
          ["tests/test_cli.py::test_inspect_bad_list_escapes_names_that_are_not_utf8_or_hold_tabs_and_newlines",
           "tests/test_cli.py::test_bad_list_escape_round_trips"]),
    Probe("part-leaks", "a fetch killed mid-way leaves its .part file",
          "deleted when the cache is next tidied (its process dead, or untouched for an hour); live ones kept",
          ["tests/test_shardcache.py::test_part_files_of_killed_fetches_are_deleted_and_live_ones_kept"]),
    Probe("index-rebuild", "a cached index JSON missing 'samples' (or malformed entries), TarShards and rocAL's "
          "webdataset reader", "rebuilt, not a KeyError",
          ["tests/test_tarshards.py::test_a_malformed_cached_index_is_rebuilt",
           "tests/compat/test_rocal_pipeline.py::test_a_malformed_cached_webdataset_index_is_rebuilt"]),
    Probe("filelist-utf8", "a FileList whose list file has a line that is not UTF-8",
          "ValueError naming the list file and the line number",
          ["tests/test_sources.py::test_file_list_that_is_not_utf8_names_the_file_and_line"]),
    Probe("rocal-raw-float", "rocAL's external source, raw uncompressed, given float32 or int64 pixels",
          "refused naming the type, never wrapped to uint8",
          ["tests/compat/test_rocal_pipeline.py::test_raw_uncompressed_pixels_of_another_type_are_never_wrapped"]),
]


def _run_tests(node_ids: list[str]) -> dict[str, tuple[str, float, str]]:
    """Run the tests in one pytest process: node id (as given, parameters folded) -> (outcome, seconds,
    message), the outcome 'passed', 'failed' or 'skipped' (any case failed: failed; all skipped: skipped)."""
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "junit.xml")
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
                        "junit_family=xunit1", f"--junitxml={report}", *node_ids], cwd=ROOT)
        tree = ElementTree.parse(report)
    results: dict[str, list] = {node: ["skipped", 0.0, "not collected"] for node in node_ids}
    seen: set[str] = set()
    for case in tree.iter("testcase"):
        path = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        name = case.get("name", "").partition("[")[0]
        node = f"{path}::{name}"
        if node not in results:
            continue
        entry = results[node]
        if node not in seen:
            seen.add(node)
            entry[:] = ["passed", 0.0, ""]
        entry[1] += float(case.get("time", 0))
        failed = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if failed is not None:
            entry[0], entry[2] = "failed", (failed.get("message") or "")[:300]
        elif skipped is not None and entry[0] != "failed":
            entry[0], entry[2] = "skipped", (skipped.get("message") or "")[:300]
    return {node: tuple(entry) for node, entry in results.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the report here as JSON")
    parser.add_argument("--only", nargs="*", help="run only these probes (names)")
    args = parser.parse_args(argv)
    probes = [p for p in PROBES if not args.only or p.name in args.only]
    sys.path.insert(0, str(ROOT))  # a script in benchmarks/: the checkout's fastload, as the tests import it
    tests = _run_tests([node for probe in probes for node in probe.tests])
    rows = []
    for probe in probes:
        direct_s, tests_s, outcome, notes = None, 0.0, "passed", []
        if probe.direct is not None:
            started = time.monotonic()
            try:
                direct_s, seen = probe.direct()
                notes.append(seen)
            except Exception as error:  # a probe that fails: reported, the others still run
                direct_s, outcome = time.monotonic() - started, "failed"
                notes.append(f"{type(error).__name__}: {error}")
            if outcome == "passed" and probe.bound_s is not None and direct_s > probe.bound_s:
                outcome = "failed"
                notes.append(f"took {direct_s:.1f} s, over its bound of {probe.bound_s} s")
        for node in probe.tests:
            state, took, message = tests[node]
            tests_s += took
            if state == "failed" or (state == "skipped" and outcome == "passed"):
                outcome = state
            if message:
                notes.append(f"{node.rpartition('::')[2]}: {state}: {message}")
        rows.append({"name": probe.name, "probe": probe.probe, "passes_if": probe.passes, "outcome": outcome,
                     "direct_s": None if direct_s is None else round(direct_s, 2), "bound_s": probe.bound_s,
                     "tests_s": round(tests_s, 2), "tests": probe.tests,
                     "direct": probe.direct.__name__ if probe.direct else None, "notes": notes})
    width = max(len(row["name"]) for row in rows)
    print(f"\n| {'probe':<{width}} | outcome | direct s (bound) | tests | tests s |")
    print(f"|{'-' * (width + 2)}|---------|------------------|-------|---------|")
    for row in rows:
        direct = f"{row['direct_s']:.2f} ({row['bound_s']:g})" if row["direct"] else "-"
        print(f"| {row['name']:<{width}} | {row['outcome']:<7} | {direct:>16} | {len(row['tests']):>5} | "
              f"{row['tests_s']:>7.2f} |")
    for row in rows:
        for note in row["notes"]:
            if row["outcome"] != "passed" or row["direct"]:
                print(f"{row['name']}: {note[:300]}")
    passed = sum(row["outcome"] == "passed" for row in rows)
    print(f"\n{passed} of {len(rows)} probes passed (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          f"CPUs)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": {"cpus": os.cpu_count(), "processor": _processor(),
                                   "python": platform.python_version(), "load_average": os.getloadavg()},
                       "probes": rows, "passed": passed, "total": len(rows)}, out, indent=1)
    return 0 if passed == len(rows) else 1


def _processor() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
