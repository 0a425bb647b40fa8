"""fastload bench: images/s of fastload, and of torch's DataLoader with the same pipeline, on your data.

Each loader runs in its own process, one after the other, for a warm-up epoch
and ``--epochs`` timed ones, with a progress bar. The table gives images/s,
the ratio to the first loader, CPU cores busy (process CPU time over wall
time, workers included), peak memory (summed PSS of the process and its
workers: shared pages count once) and peak GPU memory; a second table gives
fastload's time per stage. ``--plot`` draws images/s over time, and with
``--sweep-workers`` images/s against the worker count (needs matplotlib:
``pip install 'torch-fastload[plot]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from typing import Callable

from .._version import install_hint
from .common import add_recipe_argument, open_source, parse_device

LOADERS = ("fastload", "torch", "torch-tvio")
LOADER_HELP = ("fastload: fastload.DataLoader on fastload's source; torch: torch's DataLoader on "
               "torchvision's ImageFolder (Pillow); torch-tvio: the same with torchvision.io.decode_jpeg")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", help="an image folder (class sub-folders), a file list, tar shards (a path, "
                        "'train-*.tar', a brace pattern or a URL) or TFRecord files")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    parser.add_argument("--batch-size", type=int, default=64, help="images per batch")
    parser.add_argument("--workers", type=int, default=os.cpu_count(),
                        help="loader threads (fastload) and worker processes (torch); default: the number of cores")
    parser.add_argument("--epochs", type=int, default=1, help="timed epochs after a warm-up epoch")
    parser.add_argument("--compare", default="", help="comma-separated loaders to run after fastload: "
                                                      "torch, torch-tvio. " + LOADER_HELP)
    add_recipe_argument(parser, "resnet50-train")
    parser.add_argument("--plot", metavar="PNG", help="write images/s over time (and the sweep) as a PNG "
                        "(default: no plot)")
    parser.add_argument("--sweep-workers", metavar="N,N,...",
                        help="also run every loader with each of these worker counts (default: --workers only)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--run-one", help=argparse.SUPPRESS)  # internal: measure one loader, print JSON


def make_loader(name: str, data: str, recipe: str, batch_size: int, workers: int, device: str):
    """The loader called ``name`` on ``data`` with the recipe's transform."""
    import torch
    import torchvision

    import fastload
    from ..recipes import by_name
    from ..sources import ByteSource
    transform = by_name(recipe)
    if name == "fastload":
        return fastload.DataLoader(open_source(data, transform), batch_size=batch_size, shuffle=True,
                                   num_workers=workers, drop_last=True, device=device)
    if name not in LOADERS:
        raise SystemExit(f"fastload bench: unknown loader {name!r}; known: {', '.join(LOADERS)}")
    image_loader = _decode_with_torchvision if name == "torch-tvio" else torchvision.datasets.folder.pil_loader
    source = None if os.path.isdir(data) else open_source(data, transform)
    if source is None:
        dataset = torchvision.datasets.ImageFolder(data, transform, loader=image_loader)
    elif isinstance(source, ByteSource):  # samples are bytes (a shard's byte range, a record), not files
        dataset = SourceImages(source, name == "torch-tvio")
    else:
        dataset = SampleList(source.samples, transform, image_loader)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                       drop_last=True, pin_memory=device != "cpu")


class SourceImages:
    """A map-style dataset over a fastload source whose samples are bytes (tar shards, TFRecords):
    its bytes decoded by Pillow (``source.load``) or torchvision.io, then its transform."""

    def __init__(self, source, tvio: bool):
        self.source, self.tvio = source, tvio

    def __len__(self) -> int:
        return len(self.source.samples)

    def __getitem__(self, index: int):
        if not self.tvio:
            return self.source.load(index)
        import torch
        import torchvision.io
        data = torch.frombuffer(bytearray(self.source.read(index)), dtype=torch.uint8)
        image = torchvision.io.decode_image(data, mode=torchvision.io.ImageReadMode.RGB)
        return self.source.transform(image), self.source.samples[index][1]


class SampleList:
    """A map-style dataset over [(path, label)], as torchvision's DatasetFolder loads one sample."""

    def __init__(self, samples, transform, loader):
        self.samples, self.transform, self.loader = samples, transform, loader

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        path, label = self.samples[index]
        return self.transform(self.loader(path)), label


def _decode_with_torchvision(path: str):
    import warnings

    import torchvision.io
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torchvision 0.29 deprecates torchvision.io decoding
        return torchvision.io.decode_image(torchvision.io.read_file(path), mode=torchvision.io.ImageReadMode.RGB)


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(name: str, loader, epochs: int, device: str, progress: bool) -> dict:
    """Run ``loader`` for a warm-up epoch and ``epochs`` timed ones; returns the measurements."""
    import torch
    from tqdm import tqdm
    on_gpu = device.startswith("cuda")
    timeline, images, seconds, cpu = [], 0, 0.0, 0.0
    delivered = 0  # every epoch's images, warm-up included: the timeline's running count never goes down
    started = time.perf_counter()
    for epoch in range(epochs + 1):  # epoch 0 warms page cache, threads and allocators
        bar = tqdm(total=len(loader) * loader.batch_size, desc=f"{name:10s} epoch {epoch}", unit="img",
                   disable=not progress, file=sys.stderr, leave=False, dynamic_ncols=True)
        epoch_started, cpu_started, count = time.perf_counter(), _cpu_seconds(), 0
        for batch, _labels in loader:
            if on_gpu:
                batch = batch.to(device, non_blocking=True)
            count += batch.shape[0]
            delivered += batch.shape[0]
            bar.update(batch.shape[0])
            timeline.append((time.perf_counter() - started, delivered))
        if on_gpu:
            torch.cuda.synchronize()
        bar.close()
        if epoch:
            images += count
            seconds += time.perf_counter() - epoch_started
            cpu += _cpu_seconds() - cpu_started
    result = {"name": name, "images": images, "seconds": seconds, "images_per_s": images / seconds,
              "cores_busy": cpu / seconds, "timeline": timeline,
              "own_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              "gpu_peak_mb": torch.cuda.max_memory_allocated() / 2**20 if on_gpu else None}
    stats = getattr(loader, "stats", None)
    if stats is not None and stats.images:  # the last timed epoch's, per image in ms
        result["stage_ms"] = {stage: value / stats.images * 1e3 for stage, value in stats.seconds.items()}
    return result


def tree_sum(pid: int, read: Callable[[int], float]) -> float | None:
    """``read(p)`` summed over ``pid`` and its live descendants (a loader's worker processes), from /proc;
    None when ``pid`` itself cannot be read. A descendant that exits meanwhile counts 0."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            total += read(current)
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    pending.extend(int(child) for child in children.read().split())
        except (OSError, StopIteration, ValueError):
            if current == pid:
                return None
    return total


def _pss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        return next(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))


def _tree_pss_mb(pid: int) -> float | None:
    """PSS of ``pid`` and all its descendants in MB, or None where /proc has no smaps_rollup."""
    total = tree_sum(pid, _pss_kb)
    return None if total is None else total / 1024


class PeakMemory:
    """Samples the PSS of a process tree in a thread; ``stop()`` returns the largest sum seen."""

    def __init__(self, pid: int, interval: float = 0.5):
        self.pid, self.interval, self.peak_mb = pid, interval, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-memory", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            sample = _tree_pss_mb(self.pid)
            if sample is not None:
                self.peak_mb = max(self.peak_mb or 0.0, sample)

    def stop(self) -> float | None:
        self._stop.set()
        self._thread.join()
        return self.peak_mb


def run_in_child(name: str, command: list[str]) -> dict:
    """Run a measuring child process; returns its JSON result with ``peak_mb`` of its process tree."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    memory = PeakMemory(child.pid)
    output, _ = child.communicate()
    peak_mb = memory.stop()
    if child.returncode:
        raise SystemExit(f"fastload bench: {name} failed with exit status {child.returncode} (its error is "
                         f"above; for broken or unreadable files, `fastload inspect DATA` lists them all)")
    result = json.loads(output.strip().splitlines()[-1])
    result["peak_mb"] = peak_mb if peak_mb is not None else result["own_peak_rss_mb"]
    return result


def machine() -> str:
    """One line naming the CPU, the GPU and the library versions."""
    import PIL
    import torch
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    pillow = f"Pillow {PIL.__version__}" + (" (SIMD)" if "post" in PIL.__version__ else "")
    return f"{os.cpu_count()} cores ({cpu}), {gpu}, torch {torch.__version__}, {pillow}"


def _cell(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_tables(results: list[dict], reference: str | None = None, out=sys.stdout) -> None:
    """The results table (ratio to ``reference``'s images/s, default the first row), then stages."""
    base = next((r["images_per_s"] for r in results if r["name"] == reference), results[0]["images_per_s"])
    label = reference or results[0]["name"]
    width = max(12, *(len(r["name"]) for r in results))
    print(f"{'loader':<{width}} {'workers':>7} {'images/s':>9} {'vs ' + label:>{len(label) + 4}} "
          f"{'cores busy':>10} {'peak mem MB':>11} {'GPU mem MB':>10}", file=out)
    for r in results:
        print(f"{r['name']:<{width}} {r.get('workers', '-'):>7} {r['images_per_s']:>9.0f} "
              f"{r['images_per_s'] / base:>{len(label) + 3}.2f}x {r['cores_busy']:>10.2f} "
              f"{_cell(r.get('peak_mb'), '.0f'):>11} {_cell(r.get('gpu_peak_mb'), '.0f'):>10}", file=out)
    staged = [r for r in results if "stage_ms" in r]
    if staged:
        stages = list(staged[0]["stage_ms"])
        print(f"\n{'ms per image':<{width}} {'workers':>7} " + " ".join(f"{s:>8}" for s in stages), file=out)
        for r in staged:
            print(f"{r['name']:<{width}} {r.get('workers', '-'):>7} "
                  + " ".join(f"{r['stage_ms'][s]:>8.3f}" for s in stages), file=out)
        print("(thread time summed over threads, per image; wait = the training loop waiting for a batch)",
              file=out)
    print("peak mem: summed PSS of the loader's process and its workers, sampled every 0.5 s", file=out)


def workers_text(count) -> str:
    """"1 worker", "2 workers"."""
    return f"{count} worker{'' if count == 1 else 's'}"


def require_matplotlib() -> None:
    """Refuse ``--plot`` before measuring anything when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit(f"fastload bench --plot needs matplotlib: {install_hint('plot')}") from None


def plot(results: list[dict], path: str, sweep: bool) -> None:
    """images/s over time per loader (left) and, for a sweep, images/s against workers (right)."""
    require_matplotlib()
    import matplotlib
    from matplotlib.ticker import MaxNLocator
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(1, 2 if sweep else 1, figsize=(12 if sweep else 7, 4), squeeze=False)
    over_time = axes[0][0]
    for r in results:
        if not r["timeline"]:
            continue
        times, counts = zip(*r["timeline"])
        width = max(times[-1] / 40, 0.05)  # seconds per bin: ~40 points, steady even when batches come in bursts
        bins = [0] * (int(times[-1] / width) + 1)
        previous = 0
        for t, count in r["timeline"]:
            bins[int(t / width)] += count - previous
            previous = count
        over_time.plot([(i + 0.5) * width for i in range(len(bins))], [b / width for b in bins],
                       label=f"{r['name']} ({workers_text(r.get('workers', '?'))})")
    over_time.set(xlabel="seconds since the warm-up epoch started", ylabel="images/s",
                  title="throughput over time")
    over_time.legend()
    if sweep:
        by_workers = axes[0][1]
        for name in dict.fromkeys(r["name"] for r in results):
            rows = sorted((r["workers"], r["images_per_s"]) for r in results if r["name"] == name)
            by_workers.plot(*zip(*rows), marker="o", label=name)
        by_workers.set(xlabel="num_workers", ylabel="images/s", title="worker sweep")
        by_workers.xaxis.set_major_locator(MaxNLocator(integer=True))  # worker counts are whole
        by_workers.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def child_command(args, name: str, workers: int) -> list[str]:
    command = [sys.executable, "-m", "fastload", "bench", args.data, "--run-one", name,
               "--batch-size", str(args.batch_size), "--workers", str(workers), "--epochs", str(args.epochs),
               "--device", args.device, "--transform", args.transform]
    return command + (["--no-progress"] if args.no_progress else [])


def run(args) -> int:
    parse_device(args.device)
    if args.run_one:
        loader = make_loader(args.run_one, args.data, args.transform, args.batch_size, args.workers, args.device)
        print(json.dumps(measure(args.run_one, loader, args.epochs, args.device, not args.no_progress)))
        return 0
    if args.plot:
        require_matplotlib()
    names = ["fastload"] + [n.strip() for n in args.compare.split(",") if n.strip()]
    unknown = [n for n in names if n not in LOADERS]
    if unknown:
        raise SystemExit(f"fastload bench: unknown loader(s) {', '.join(unknown)}; known: {', '.join(LOADERS)}")
    worker_counts = ([int(w) for w in args.sweep_workers.split(",")] if args.sweep_workers else [args.workers])
    results = []
    for workers in worker_counts:
        for name in names:
            result = run_in_child(name, child_command(args, name, workers))
            result["workers"] = workers
            results.append(result)
    print(f"\nmachine: {machine()}")
    print(f"data: {args.data}; transform {args.transform}, batch {args.batch_size}, device {args.device}, "
          f"{args.epochs} timed epoch(s) after a warm-up\n")
    compared = [r for r in results if r["name"] != "fastload"]
    # the ratio column against the best compared loader, as bench_loader.py's "vs best torch"
    print_tables(results, max(compared, key=lambda r: r["images_per_s"])["name"] if compared else "fastload")
    for workers in worker_counts:
        rows = {r["name"]: r["images_per_s"] for r in results if r["workers"] == workers}
        others = {name: rate for name, rate in rows.items() if name != "fastload"}
        if others:
            best = max(others, key=others.get)
            print(f"{workers_text(workers)}: fastload {rows['fastload'] / others[best]:.2f}x the images/s of "
                  f"{best}")
    short = [r for r in results if r.get("images", 0) < 10 * args.batch_size * args.epochs]
    if short:
        print(f"\nwarning: an epoch here is {short[0]['images'] // max(1, args.epochs)} images, under 10 batches "
              f"of {args.batch_size}: start-up and the last batch weigh on these figures; measure on a larger "
              f"folder (fastload.sample_data.make_sample_folder writes one of any size)")
    if args.plot:
        plot(results, args.plot, sweep=args.sweep_workers is not None)
        print(f"\nplot: {args.plot}")
    return 0
