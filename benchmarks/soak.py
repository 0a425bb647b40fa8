"""Soak: many epochs over the built-in sample with bad files, skips and early breaks.

Prints, per epoch, the process RSS, Python heap (tracemalloc), thread count
and open files, and fails (exit 1) if any of them grew after the first two
epochs by more than a small margin. The test suite runs a test-sized version
(tests/test_errors.py); this one uses the real sample folder and batch size.

    .venv/bin/python benchmarks/soak.py [--epochs 10]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import threading
import tracemalloc

import fastload
from fastload.recipes import resnet50_train
from fastload.sample_data import default_sample_root, make_sample_folder


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--images", type=int, default=2000)
    args = parser.parse_args(argv)
    sample = make_sample_folder(default_sample_root(args.images), num_images=args.images)
    with tempfile.TemporaryDirectory() as scratch:
        root = os.path.join(scratch, "data")
        shutil.copytree(sample, root)
        broken = sorted(os.listdir(os.path.join(root, "class_00")))[:3]
        for name, payload in zip(broken, (b"", b"not a jpeg", open(os.path.join(root, "class_00", broken[2]),
                                                                    "rb").read()[:5000])):
            with open(os.path.join(root, "class_00", name), "wb") as file:
                file.write(payload)
        loader = fastload.DataLoader(fastload.ImageFolder(root, resnet50_train(), shuffle=True), batch_size=64,
                                     num_workers=os.cpu_count(), drop_last=True, on_error="skip")
        tracemalloc.start()
        rows = []
        print(f"{'epoch':>5} {'batches':>7} {'RSS MB':>7} {'heap KB':>8} {'threads':>7} {'files':>5} {'skipped':>7}")
        for epoch in range(args.epochs):
            batches = 0
            for batches, _ in enumerate(loader, 1):
                if epoch % 3 == 2 and batches == len(loader) // 2:
                    break  # an early break every third epoch
            gc.collect()
            row = (rss_mb(), tracemalloc.get_traced_memory()[0] / 1024, threading.active_count(),
                   len(os.listdir("/proc/self/fd")), len(loader.stats.skipped))
            rows.append(row)
            print(f"{epoch:>5} {batches:>7} {row[0]:>7.0f} {row[1]:>8.0f} {row[2]:>7} {row[3]:>5} {row[4]:>7}")
        tracemalloc.stop()
    baseline = rows[1]
    grew = [name for i, name, margin in ((0, "RSS", 64.0), (1, "heap", 512.0), (2, "threads", 0), (3, "files", 0))
            if max(row[i] for row in rows[2:]) > baseline[i] + margin]
    print("no growth after the first epochs" if not grew else f"GREW: {', '.join(grew)}")
    return 1 if grew else 0


if __name__ == "__main__":
    sys.exit(main())
