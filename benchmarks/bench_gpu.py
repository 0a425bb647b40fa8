"""fastload's device path vs torch's DataLoader, end to end on one GPU, for the ResNet-50 training recipe.

Every loader delivers the same thing to the training loop: a (256, 3, 224,
224) float16 channels_last CUDA batch of RandomResizedCrop(224) +
horizontal flip + ImageNet-normalized images, and its labels on the GPU.

* fastload GPU decode:   fastload.DataLoader(device="cuda"): nvJPEG decode
                         of each batch and the fused augmentation kernel
* fastload CPU decode:   the same with decode_device="cpu": libjpeg-turbo
                         in the reader threads, augmentation on the GPU
* torch + v2:            torch DataLoader, torchvision v2 on PIL images in
                         num_workers processes, pin_memory; the float32
                         batch is copied over and cast on the GPU
* torch + GPU normalize: torch DataLoader whose workers crop and flip into
                         uint8, collated as uint8, pinned; normalize, cast
                         and layout on the GPU one batch ahead on a side
                         stream (timm's PrefetchLoader recipe)
* decode-only ceiling:   the GPU decoder alone on the same files, read
                         into memory first: batched nvJPEG decode of every
                         batch, nothing else

A loader or ceiling name may end in ``:<decoder>`` to force one of
fastload's GPU decoders (``fastload.gpu_decode.DECODER_NAMES``):
"fastload GPU decode:nvimgcodec-hw" is the device path on nvImageCodec's
hardware engines, "decode-only:nvimgcodec-hybrid" the ceiling of its hybrid
backend; without one, the device path chooses (decoder="auto": the fastest
candidate on the first batch, balanced with the CPU) and the ceiling is
torchvision's. ``--decoders a,b`` adds both rows for each decoder named.

Each loader runs in its own process: a warm-up of ``--warmup`` batches,
then ``--batches`` timed ones. Reported: images/s; host CPU cores busy (CPU
time of the process and its workers over wall time); peak host memory
(summed PSS of the process tree, sampled every 0.5 s); peak GPU memory
(torch.cuda.max_memory_allocated); and the ratio to torch + v2 (with the
table of ``fastload bench``). Run with no
folder, it first generates ``--images`` ImageNet-like JPEGs (about 2
minutes for 20,000 on 16 cores).

Without a GPU, ``--device cpu`` runs the torch loaders and fastload's device
path through Triton's interpreter on a few tiny batches (TRITON_INTERPRET=1):
a check that the script works, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
LOADERS = ("fastload GPU decode", "fastload CPU decode", "torch + v2", "torch + GPU normalize", "decode-only")
REFERENCE = "torch + v2"


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants (torch's workers)."""
    from fastload.cli.bench import tree_sum
    return tree_sum(pid, _cpu_ticks) / os.sysconf("SC_CLK_TCK")


class _UInt8Crop:
    """The torch + GPU normalize loader's sample transform: crop and flip in Pillow, then uint8 CHW."""

    def __init__(self, size: int):
        from torchvision.transforms import v2
        self.transform = v2.Compose([v2.RandomResizedCrop(size), v2.RandomHorizontalFlip(), v2.PILToTensor()])

    def __call__(self, image):
        return self.transform(image)


def _prefetched(loader, device, size):
    """timm's PrefetchLoader: the next uint8 batch is normalized, cast and laid out on a side stream."""
    import torch
    stream = torch.cuda.Stream(device) if device.type == "cuda" else None
    mean = torch.tensor([m * 255 for m in MEAN], device=device).view(1, 3, 1, 1)
    std = torch.tensor([s * 255 for s in STD], device=device).view(1, 3, 1, 1)

    def prepare(images, labels):
        images = images.to(device, non_blocking=True).float().sub_(mean).div_(std)
        return images.half().contiguous(memory_format=torch.channels_last), labels.to(device, non_blocking=True)

    pending = None
    for images, labels in loader:
        if stream is not None:
            with torch.cuda.stream(stream):
                ready = prepare(images, labels)
        else:
            ready = prepare(images, labels)
        if pending is not None:
            yield pending
        if stream is not None:
            torch.cuda.current_stream(device).wait_stream(stream)
            for tensor in ready:
                tensor.record_stream(torch.cuda.current_stream(device))
        pending = ready
    if pending is not None:
        yield pending


def make_batches(name: str, root: str, args, device):
    """An endless iterator of (images, labels) on ``device`` as the training loop would get them."""
    import torch
    import torchvision
    from torchvision.transforms import v2

    import fastload
    import fastload.device
    from fastload import recipes
    size, batch, workers = args.size, args.batch_size, args.workers
    name, _, decoder = name.partition(":")
    if name.startswith("fastload"):
        if device.type == "cpu":  # the smoke test: the device path's kernel in Triton's interpreter
            fastload.device.KERNEL_DEVICE_TYPES = ("cuda", "cpu")
        transform = recipes.resnet50_train(size, torch.float16)
        loader = fastload.DataLoader(fastload.ImageFolder(root, transform), batch_size=batch, shuffle=True,
                                     num_workers=workers, drop_last=True, device=device,
                                     memory_format=torch.channels_last,
                                     decode_device="cpu" if "CPU" in name else "auto", decoder=decoder or None)
        if device.type == "cuda" and "GPU" in name and getattr(loader.path, "decoder_name", "cpu") == "cpu":
            raise SystemExit("no GPU JPEG decoder here")  # every GPU backend's probe decode failed
        epochs = iter(int, 1)
        return (batch for _ in epochs for batch in loader), loader
    common = dict(batch_size=batch, shuffle=True, num_workers=workers, drop_last=True,
                  pin_memory=device.type == "cuda", persistent_workers=workers > 0)
    if name == "torch + v2":
        transform = v2.Compose([v2.RandomResizedCrop(size), v2.RandomHorizontalFlip(), v2.ToImage(),
                                v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
        loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(root, transform), **common)

        def to_device(images, labels):
            images = images.to(device, non_blocking=True).half().contiguous(memory_format=torch.channels_last)
            return images, labels.to(device, non_blocking=True)
        return (to_device(*b) for _ in iter(int, 1) for b in loader), loader
    loader = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(root, _UInt8Crop(size)), **common)
    return (b for _ in iter(int, 1) for b in _prefetched(loader, device, size)), loader


def decode_only(root: str, args, device, decoder_name: str | None = None) -> dict:
    """Batched GPU decode of the folder's files, already in memory: the ceiling of any GPU-decode loader
    (``decoder_name``'s, default torchvision's)."""
    import torch
    import torchvision
    from fastload.gpu_decode import choose_decoder
    files = [path for path, _ in torchvision.datasets.ImageFolder(root).samples]
    encoded = []
    for path in files[: args.batch_size * (args.warmup + args.batches)]:
        with open(path, "rb") as f:
            encoded.append(torch.frombuffer(bytearray(f.read()), dtype=torch.uint8))
    on_gpu = device.type == "cuda"
    decoder = choose_decoder("cuda" if on_gpu else "cpu", device,
                             decoder=(decoder_name or "torchvision") if on_gpu else None)[0]
    batches = [encoded[i:i + args.batch_size] for i in range(0, len(encoded), args.batch_size)]
    decode = decoder.decode_many if device.type == "cuda" else (
        lambda batch: [torchvision.io.decode_jpeg(data, mode=torchvision.io.ImageReadMode.RGB) for data in batch])
    if not batches:
        raise SystemExit(f"decode-only: no images under {root}")
    cycled = (batch for _ in iter(int, 1) for batch in batches)  # a folder smaller than the run is read again
    result = _timed("decode-only", (decode(b) for b in cycled), args, device, count=len)
    result["decoder"] = getattr(decoder, "description", decoder.name) if on_gpu else "torchvision.io (cpu)"
    return result


def _timed(name: str, batches, args, device, count=lambda batch: batch[0].shape[0]) -> dict:
    import torch
    from tqdm import tqdm
    on_gpu = device.type == "cuda"
    for _ in range(args.warmup):
        next(batches)
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    started, cpu_started, images = time.perf_counter(), _tree_cpu_seconds(os.getpid()), 0
    for _ in tqdm(range(args.batches), desc=f"{name:22s}", unit="batch", file=sys.stderr, leave=False):
        batch = next(batches)
        images += count(batch)  # the decode-only ceiling: a list of images, the last one of a pass short
    if on_gpu:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    return {"name": name, "images": images, "seconds": seconds, "images_per_s": images / seconds,
            "cores_busy": (_tree_cpu_seconds(os.getpid()) - cpu_started) / seconds,
            "gpu_peak_mb": torch.cuda.max_memory_allocated() / 2**20 if on_gpu else None,
            "workers": 0 if name == "decode-only" else args.workers,
            "own_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_one(name: str, root: str, args) -> dict:
    import warnings

    import torch
    warnings.filterwarnings("ignore", category=UserWarning, module="torchvision")
    device = torch.device(args.device)
    if name.partition(":")[0] == "decode-only":
        result = decode_only(root, args, device, name.partition(":")[2] or None)
        result["name"] = name
        return result
    batches, loader = make_batches(name, root, args, device)
    result = _timed(name, batches, args, device)
    stats = getattr(loader, "stats", None)
    if stats is not None and stats.decoder:
        result["decoder"], result["loader_device_mb"] = stats.decoder, stats.device_bytes / 2**20
        path = loader.path
        if getattr(path, "balance", None) is not None:  # the CPU's share of the GPU-decodable images
            result["cpu_share"] = round(path.balance.share, 3)
        result["lanes"] = getattr(path, "lanes", 1)
    if hasattr(loader, "close"):
        loader.close()
    return result


def summary(folder: str) -> str:
    """The table gpu_checks.sh prints last, from what its steps left in ``folder``: each step's outcome and
    time (steps.tsv), the images/s of every loader and ceiling (loader.json, ceilings.json), the other JSON
    results as they are, and the training runs' result lines (train.log)."""
    from pathlib import Path
    root, lines = Path(folder), []
    steps = root / "steps.tsv"
    if steps.exists():
        lines.append(f"{'step':10s} {'outcome':18s} {'s':>5s}  command")
        for row in steps.read_text().splitlines():
            step, outcome, seconds, command = (row.split("\t") + ["", "", "", ""])[:4]
            lines.append(f"{step:10s} {outcome:18s} {seconds:>5s}  {command[:90]}")
    for name in ("ceilings", "loader"):
        path = root / f"{name}.json"
        if not path.exists():
            continue
        run = json.loads(path.read_text())
        args = run.get("args", {})
        lines.append(f"\n{name}: batch {args.get('batch_size')}, {args.get('batches')} timed batches, "
                     f"{args.get('workers')} threads/workers, {args.get('images')} images in the folder")
        lines.append(f"{'':34s} {'images/s':>9s} {'cores':>6s} {'GPU MB':>7s}  decoder")
        for r in run.get("results", []):
            extra = "".join(f", {k} {r[k]}" for k in ("cpu_share", "lanes") if k in r)
            gpu = f"{r['gpu_peak_mb']:7.0f}" if r.get("gpu_peak_mb") is not None else f"{'-':>7s}"
            lines.append(f"{r['name']:34s} {r['images_per_s']:9.0f} {r['cores_busy']:6.1f} {gpu}  "
                         f"{r.get('decoder', '')}{extra}")
    for name in ("scaling", "serve"):
        path = root / f"{name}.json"
        if path.exists():
            text = json.dumps(json.loads(path.read_text()).get("results", json.loads(path.read_text())))
            lines.append(f"\n{name}: {text[:1500]}")
    train = root / "train.log"
    if train.exists():
        lines.append("\ntrain:")
        lines += [line for line in train.read_text().splitlines()
                  if line.startswith("==") or "ms/step" in line or "img/s" in line][-40:]
    return "\n".join(lines) or f"nothing in {folder}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", help="ImageFolder root (default: a generated ImageNet-like folder)")
    parser.add_argument("--images", type=int, default=20000, help="size of the generated folder (recorded)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--warmup", type=int, default=10, help="batches before timing")
    parser.add_argument("--batches", type=int, default=60, help="timed batches")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--loaders", default=",".join(LOADERS),
                        help="comma-separated; 'fastload GPU decode:<decoder>' or 'decode-only:<decoder>' forces one")
    parser.add_argument("--decoders", default="",
                        help="comma-separated GPU decoders (torchvision, nvimgcodec, nvimgcodec-hw, ...): adds "
                             "'fastload GPU decode:<d>' and 'decode-only:<d>' for each")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one loader, print JSON
    parser.add_argument("--summary", metavar="FOLDER", help="print gpu_checks.sh's table of FOLDER's results")
    args = parser.parse_args(argv)

    if args.summary:
        print(summary(args.summary))
        return 0
    if args.one:
        print(json.dumps(run_one(args.one, args.root, args)))
        return 0
    from fastload.cli.bench import machine, print_tables, run_in_child
    root = args.root
    if root is None:
        from fastload.sample_data import default_sample_root, make_sample_folder
        root = str(default_sample_root().with_name(f"bench-imagenet-{args.images}"))
        print(f"folder: {root} ({args.images} ImageNet-like JPEGs; generated once)", flush=True)
        make_sample_folder(root, num_images=args.images, num_classes=100)
    names = args.loaders.split(",")
    for decoder in filter(None, args.decoders.split(",")):
        names += [f"fastload GPU decode:{decoder}", f"decode-only:{decoder}"]
    results = []

    def save() -> None:  # after every loader: a run cut short by a time limit keeps what it measured
        if args.json:
            with open(args.json + ".tmp", "w") as out:
                json.dump({"machine": machine(), "args": vars(args), "results": results}, out, indent=2)
            os.replace(args.json + ".tmp", args.json)
    for name in names:
        command = [sys.executable, os.path.abspath(__file__), root, "--one", name]
        for option in ("batch_size", "size", "workers", "warmup", "batches", "device"):
            command += [f"--{option.replace('_', '-')}", str(getattr(args, option))]
        try:
            results.append(run_in_child(name, command))
        except SystemExit as failure:
            print(f"{name}: skipped ({failure})", flush=True)
        save()
    print(f"\nmachine: {machine()}")
    print(f"data: {root}; batch {args.batch_size}, RandomResizedCrop({args.size}) + flip + normalize, "
          f"float16 channels_last on {args.device}; {args.batches} timed batches "
          f"({args.batches * args.batch_size} images per loader), {args.workers} threads/workers\n")
    if not results:
        print("no loader ran (each one's error is above)")
        return 1
    print_tables(results, REFERENCE)
    ceiling = next((r["images_per_s"] for r in results if r["name"] == "decode-only"), None)
    fastest = next((r["images_per_s"] for r in results if r["name"] == "fastload GPU decode"), None)
    if ceiling and fastest:
        print(f"\nfastload GPU decode reaches {fastest / ceiling:.0%} of the decode-only ceiling")
    print("GPU mem: peak torch.cuda allocation of the loader's process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
