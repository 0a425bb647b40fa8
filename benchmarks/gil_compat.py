"""GIL-held time per image of one of bench_compat.py's loaders, from ``py-spy record --gil``.

Why: a change on a front end's per-batch path (the DALI or rocAL pipeline, its iterator) is stated with its
GIL-held time per image, as bench_scaling.py states the native loader's. This runs the loader (a child
process) for a warm-up epoch, then for a window of seconds in which py-spy, attached to it, samples the
thread holding the GIL; held seconds / images in the window is the figure (all threads together). py-spy
slows the child a little: the images/s printed is the sampled run's, not a throughput to compare.

    .venv/bin/python benchmarks/gil_compat.py DATA --loader fastload.compat.rocal --batch-size 32 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(args) -> None:
    """Run the loader: one warm-up epoch, print "warm", then epochs for ``seconds``; print the window."""
    sys.path.insert(0, HERE)
    import bench_compat
    loader = bench_compat._make_loader(args.loader, args.root, args.batch_size, args.workers)
    for _ in loader:
        pass
    print("warm", flush=True)
    images, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        for _ in loader:
            images += args.batch_size
            if time.perf_counter() - start >= args.seconds:
                break
    print(json.dumps({"images": images, "seconds": time.perf_counter() - start}), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", help="ImageFolder root")
    parser.add_argument("--loader", default="fastload.compat.rocal", help="a bench_compat.py loader name")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=15.0, help="py-spy's window")
    parser.add_argument("--rate", type=int, default=200, help="py-spy's samples per second")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
    if py_spy is None:
        raise SystemExit("gil_compat: needs py-spy (pip install py-spy)")
    command = [sys.executable, os.path.abspath(__file__), args.root, "--loader", args.loader, "--batch-size",
               str(args.batch_size), "--workers", str(args.workers), "--seconds", str(args.seconds + 5), "--child"]
    with tempfile.TemporaryDirectory() as scratch:
        raw = os.path.join(scratch, "gil.raw")
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            if process.stdout.readline().strip() != "warm":
                raise SystemExit(f"gil_compat: the loader ended before its warm-up did (exit {process.wait()})")
            spy = subprocess.run([py_spy, "record", "--gil", "--nonblocking", "-r", str(args.rate), "-d",
                                  str(int(args.seconds)), "--pid", str(process.pid), "--format", "raw", "-o", raw],
                                 capture_output=True, text=True)
            if spy.returncode != 0:
                raise SystemExit(f"gil_compat: py-spy failed: {spy.stderr[-500:]}")
            window = json.loads(process.stdout.readline())
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
        with open(raw) as stacks:
            samples = sum(int(line.rsplit(" ", 1)[1]) for line in stacks if line.strip())
    rate = window["images"] / window["seconds"]
    held = samples / args.rate
    result = {"loader": args.loader, "images_per_s": round(rate), "gil_s": round(held, 3),
              "window_s": int(args.seconds), "gil_us_per_image": round(held / (int(args.seconds) * rate) * 1e6, 1),
              "method": f"py-spy record --gil --rate {args.rate}, {int(args.seconds)} s after a warm-up epoch"}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
