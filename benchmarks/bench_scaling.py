"""Images/s against the number of threads, beside torch's DataLoader with as many worker processes, and
the GIL-held time per image of fastload's loader.

A thread pool in one process scales with cores only while its threads run
outside the GIL, so this benchmark reports both: throughput at 1, 2, 4, ...
N threads (N = cores; ``--threads`` to choose) for fastload's CPU fast path
(and, with ``--device cuda``, its device path), and torch's DataLoader with
torchvision.io decoding and v2 transforms at the same worker counts; then
the GIL-held seconds per image, from ``py-spy record --gil`` attached to a
1-thread loader after its warm-up epoch (per thread: the loader thread and
the training loop's), or, where py-spy is not installed, from a stated
fallback: the wall time per image of a loader with ``num_workers=0`` (all
work on one thread, nothing waits) less the time its samples spent in
fastload's GIL-free native calls (``loader.stats`` read + decode + augment).

The recipe is the ResNet-50 training one (RandomResizedCrop 224, flip,
float32, normalize), batch 64, on the built-in sample unless a folder is given.
Each measurement runs in its own process: a warm-up epoch, then ``--epochs``.
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

from fastload.cli.bench import machine, measure, run_in_child

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _make(name: str, root: str, batch_size: int, workers: int, device: str, dataset: str = "fastload"):
    import torch

    import fastload
    if name == "fastload" and dataset == "torchvision":  # the quick start's swap: torch's dataset, torch's draws
        import torchvision
        from torchvision import transforms as v1
        transform = v1.Compose([v1.RandomResizedCrop(224), v1.RandomHorizontalFlip(), v1.ToTensor(),
                                v1.Normalize(MEAN, STD)])
        return fastload.DataLoader(torchvision.datasets.ImageFolder(root, transform), batch_size=batch_size,
                                   shuffle=True, num_workers=workers, drop_last=True,
                                   device=None if device == "cpu" else device)
    if name == "torch":
        import torchvision
        from torchvision.transforms import v2

        def decode(path: str):
            import torchvision.io
            return torchvision.io.decode_jpeg(torchvision.io.read_file(path), mode=torchvision.io.ImageReadMode.RGB)

        transform = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
                                v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
        dataset = torchvision.datasets.ImageFolder(root, transform, loader=decode)
        return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                           drop_last=True, pin_memory=device != "cpu")
    from fastload import transforms as T
    transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                           T.Normalize(MEAN, STD)])
    return fastload.DataLoader(fastload.ImageFolder(root, transform), batch_size=batch_size, shuffle=True,
                               num_workers=workers, drop_last=True, device=None if device == "cpu" else device)


def _one(args) -> int:
    """Child: measure one loader and print its JSON."""
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning, module="torchvision")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="torchvision")
    loader = _make(args.one, args.root, args.batch_size, args.threads_one, args.device, args.dataset)
    result = measure(args.one, loader, args.epochs, args.device, progress=False)
    result.pop("timeline", None)
    print(json.dumps(result))
    return 0


def _gil_child(args) -> int:
    """Child: a 1-thread fastload loader; after a warm-up epoch it says "ready" and runs for --seconds, then
    prints the images and seconds of that window (py-spy samples the same window)."""
    loader = _make("fastload", args.root, args.batch_size, args.threads_one, args.device, args.dataset)
    for _ in loader:  # warm-up epoch
        pass
    print("ready", flush=True)
    images, started = 0, time.perf_counter()
    while time.perf_counter() - started < args.seconds:
        for batch, _ in loader:
            images += batch.shape[0]
            if time.perf_counter() - started >= args.seconds:
                break
    print(json.dumps({"images": images, "seconds": time.perf_counter() - started}), flush=True)
    return 0


def _fallback_child(args) -> int:
    """Child: GIL-held time per image without py-spy: num_workers=0 (one thread does everything, nothing
    waits), wall time per image less the samples' time inside GIL-free native calls (their read, decode and
    augment seconds: one call, ``fastload._jpeg.load_sample``, on the RandomResizedCrop route)."""
    loader = _make("fastload", args.root, args.batch_size, 0, args.device)
    for _ in loader:
        pass
    images, native, started = 0, 0.0, time.perf_counter()
    for _ in range(args.epochs):
        for batch, _ in loader:
            images += batch.shape[0]
        native += sum(loader.stats.seconds[stage] for stage in ("read", "decode", "augment"))
    wall = time.perf_counter() - started
    print(json.dumps({"images": images, "wall_us": wall / images * 1e6, "native_us": native / images * 1e6,
                      "gil_us": (wall - native) / images * 1e6}), flush=True)
    return 0


def _paths_child(args) -> int:
    """Child: the per-image GIL time of the paths' Python, one thread, nothing waiting (the fallback
    method, so an upper bound: what the timed code does without the GIL is counted unless subtracted).

    - CPU fast path: a 1-thread loader with its native call per sample replaced by a no-op (what is left
      is Python, all threads);
    - device path, reader stage (a sample made ready for the batched GPU decode: read, header, draw, the
      decoder's ``accepts``, the encoded tensor): ``_Prepare`` tasks run in a loop with a stand-in GPU
      decoder that takes every JPEG (nothing is decoded), less the file reads (GIL-free; ``stats``);
    - generic path bookkeeping (a map-style dataset through the thread pool and default_collate): a
      dataset returning a stored (tensor, label), ``num_workers=0``, less the dataset's own time.
    """
    import types

    import torch

    import fastload
    from fastload import device as device_stage
    from fastload import native_sample
    from fastload.gpu_decode import TorchvisionGpuDecoder
    loader = _make("fastload", args.root, args.batch_size, 1, "cpu")
    device_stage.KERNEL_DEVICE_TYPES = ("cuda", "cpu")  # let device="cpu" build the device path
    stand_in = TorchvisionGpuDecoder("cpu", probe=lambda device: None)
    loader = fastload.DataLoader(loader.dataset, batch_size=args.batch_size, device="cpu", decoder=stand_in)
    path = loader.path
    path._choose()
    order = loader.make_order()
    ctx = path.context(0, order)
    positions = [pair for batch in order.batches(0) for pair in batch]
    for position, index in positions[:256]:  # warm-up: page cache, scratch
        device_stage._Prepare(path, position, index, ctx)(device_stage._ignore)
    path.stats.reset()
    started = time.perf_counter()
    for position, index in positions:
        device_stage._Prepare(path, position, index, ctx)(device_stage._ignore)
    wall = time.perf_counter() - started
    reads = path.stats.seconds["read"]
    device = {"wall_us": wall / len(positions) * 1e6, "gil_us": (wall - reads) / len(positions) * 1e6}

    class Stored(torch.utils.data.Dataset):
        def __init__(self, size):
            self.item, self.size = (torch.zeros(3, 8, 8), 1), size

        def __len__(self):
            return self.size

        def __getitem__(self, index):
            return self.item

    dataset = Stored(len(positions))
    started = time.perf_counter()
    for index in range(len(dataset)):
        dataset[index]
    own = time.perf_counter() - started
    generic = fastload.DataLoader(dataset, batch_size=args.batch_size, num_workers=0)
    for _ in generic:  # warm-up epoch
        pass
    started = time.perf_counter()
    for _ in generic:
        pass
    wall = time.perf_counter() - started
    # the CPU fast path's Python around its one native call per sample: that call replaced by a no-op, a
    # 1-thread loader's wall time per image is every thread's Python (loader thread, training loop, per
    # batch work), all of it GIL time; the native call itself holds the GIL to parse its arguments (~1-2 us)
    fast = _make("fastload", args.root, args.batch_size, 1, "cpu")
    for _ in fast:  # warm-up epoch
        pass
    real, native_sample._jpeg = native_sample._jpeg, types.SimpleNamespace(load_sample=lambda *a: (0.0, 0.0, 0.0))
    try:
        images, started = 0, time.perf_counter()
        for _, labels in fast:
            images += len(labels)
        stubbed = (time.perf_counter() - started) / images * 1e6
    finally:
        native_sample._jpeg = real
    print(json.dumps({"cpu fast path, Python around the native call": {"wall_us": stubbed, "gil_us": stubbed},
                      "device path reader stage": device,
                      "generic path bookkeeping": {"wall_us": wall / len(dataset) * 1e6,
                                                   "gil_us": (wall - own) / len(dataset) * 1e6}}), flush=True)
    return 0


def path_overheads(args) -> dict:
    command = [sys.executable, os.path.abspath(__file__), args.root, "--paths-child", "--batch-size",
               str(args.batch_size)]
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()[-1])


def gil_with_py_spy(args, py_spy: str, rate: int = 400) -> dict:
    """GIL-held microseconds per image per thread, from py-spy attached after the warm-up."""
    command = [sys.executable, os.path.abspath(__file__), args.root, "--gil-child", "--seconds", str(args.seconds),
               "--batch-size", str(args.batch_size), "--device", args.device, "--dataset", args.dataset]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    with tempfile.TemporaryDirectory() as folder:
        raw = os.path.join(folder, "gil.txt")
        spy = subprocess.run([py_spy, "record", "--pid", str(child.pid), "--gil", "--threads", "--rate", str(rate),
                              "--duration", str(int(args.seconds)), "--format", "raw", "-o", raw, "--nonblocking"],
                             capture_output=True, text=True)
        window = json.loads(child.stdout.readline())
        child.wait()
        if spy.returncode or not os.path.exists(raw):
            raise RuntimeError(f"py-spy failed: {spy.stderr[-500:]}")
        per_thread: dict[str, int] = {}
        with open(raw) as lines:
            for line in lines:
                stack, _, count = line.rstrip().rpartition(" ")
                thread = stack.split(";", 1)[0]
                name = thread.split(": ", 1)[1] if ": " in thread else "unnamed"
                kind = "loader threads" if name.startswith("fastload-") else name
                per_thread[kind] = per_thread.get(kind, 0) + int(count)
    images = window["images"] * min(1.0, int(args.seconds) / window["seconds"])  # images in py-spy's window
    result = {kind: samples / rate / images * 1e6 for kind, samples in per_thread.items()}
    result["all threads"] = sum(per_thread.values()) / rate / images * 1e6
    result["method"] = f"py-spy record --gil --rate {rate}, {int(args.seconds)} s after a warm-up epoch, 1 thread"
    return result


def gil_fallback(args) -> dict:
    command = [sys.executable, os.path.abspath(__file__), args.root, "--fallback-child", "--epochs", str(args.epochs),
               "--batch-size", str(args.batch_size), "--device", args.device]
    found = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    return {"all threads": found["gil_us"], "method": "fallback: num_workers=0 wall time per image "
            f"({found['wall_us']:.0f} us) less GIL-free native time ({found['native_us']:.0f} us)"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", help="an ImageFolder root (default: the built-in sample)")
    parser.add_argument("--threads", help="comma-separated thread counts (default: 1, 2, 4, ... up to the cores)")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after a warm-up epoch")
    parser.add_argument("--batch-size", type=int, default=64, help="images per batch")
    parser.add_argument("--images", type=int, default=2000, help="size of the generated sample")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda for fastload's device path")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the GIL measurement")
    parser.add_argument("--no-torch", action="store_true", help="measure fastload alone")
    parser.add_argument("--dataset", choices=("fastload", "torchvision"), default="fastload",
                        help="fastload's loader over fastload.ImageFolder (its own draws), or over torchvision's "
                             "ImageFolder and v1 transforms (the quick start: torch's draws)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one loader, print JSON
    parser.add_argument("--threads-one", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--gil-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fallback-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--paths-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        return _one(args)
    if args.gil_child:
        return _gil_child(args)
    if args.fallback_child:
        return _fallback_child(args)
    if args.paths_child:
        return _paths_child(args)

    if args.root is None:
        from fastload.sample_data import sample_folder
        args.root = sample_folder(args.images)
    cores = os.cpu_count() or 1
    counts = ([int(n) for n in args.threads.split(",")] if args.threads
              else sorted({1 << i for i in range(cores.bit_length()) if 1 << i <= cores} | {cores}))
    rows = []
    for threads in counts:
        row = {"threads": threads}
        for name in ("fastload",) + (() if args.no_torch else ("torch",)):
            command = [sys.executable, os.path.abspath(__file__), args.root, "--one", name, "--threads-one",
                       str(threads), "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
                       "--device", args.device, "--dataset", args.dataset]
            row[name] = run_in_child(name, command)["images_per_s"]
        rows.append(row)
        print(f"{threads} threads: " + ", ".join(f"{k} {v:.0f} img/s" for k, v in row.items() if k != "threads"),
              file=sys.stderr, flush=True)
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
    gil = gil_with_py_spy(args, py_spy) if py_spy else gil_fallback(args)
    paths = path_overheads(args)

    print(f"\nmachine: {machine()}")
    print(f"data: {args.root}; ResNet-50 train recipe, batch {args.batch_size}, device {args.device}, "
          f"{args.epochs} timed epochs after a warm-up\n")
    base = rows[0]["fastload"]
    print(f"{'threads':>7} {'fastload img/s':>15} {'vs 1 thread':>12}" + ("" if args.no_torch else
          f" {'torch img/s':>12} {'fastload/torch':>15}"))
    for row in rows:
        line = f"{row['threads']:>7} {row['fastload']:>15.0f} {row['fastload'] / base:>11.2f}x"
        if not args.no_torch:
            line += f" {row['torch']:>12.0f} {row['fastload'] / row['torch']:>14.2f}x"
        print(line)
    print(f"\nGIL held per image ({gil['method']}):")
    for kind, value in gil.items():
        if kind != "method":
            print(f"  {kind:<16} {value:8.1f} us")
    print("GIL held per image by the paths' Python (fallback method, one thread; see _paths_child):")
    for kind, found in paths.items():
        print(f"  {kind:<28} {found['gil_us']:8.1f} us")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": machine(), "rows": rows, "gil_us_per_image": gil, "other_paths": paths}, out,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
