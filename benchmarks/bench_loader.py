"""fastload vs torch's DataLoader on the same ImageNet-like folder, in one run.

Loaders, each with num_workers = cores and the standard ResNet-50 training
transform (RandomResizedCrop 224, horizontal flip, float32, ImageNet
normalize), batch 64:

* torch + PIL/v1:   torchvision ImageFolder, Pillow decode, transforms v1
* torch + tv.io/v2: torchvision.io.decode_jpeg, transforms v2 on uint8 tensors
* fastload:         fastload.ImageFolder, same transform, fastload.DataLoader

Each runs in its own subprocess for a warm-up epoch and ``--epochs`` timed
ones; the table reports images/s, the ratio to the faster torch loader, and
the peak memory of the loader's process tree: the sum of the proportional set
sizes (PSS) of the process and its worker processes, sampled twice a
second, so pages the workers share with their parent count once (a sum of
RSS would count torch's libraries once per worker). Run with no arguments it
first generates the built-in sample folder (2,000 JPEGs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from fastload.cli.bench import machine, measure, run_in_child

LOADERS = ("torch + PIL/v1", "torch + tv.io/v2", "fastload")
# --loaders fastload-tv,fastload-tv-streams: torchvision's ImageFolder and v1 transforms (the quick start) through
# fastload.DataLoader, with torch's draws (the default there: torch's pixels) or fastload's per-sample streams
TV_DATASET = {"fastload-tv": "torch", "fastload-tv-streams": "fastload"}
# --loaders torch-generic,fastload-generic: a torchvision ImageFolder whose transform fastload does not fuse
# (v1 ColorJitter on PIL images), so fastload runs it on its generic path (threads calling dataset[i]).
GENERIC = ("torch-generic", "fastload-generic")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _decode_with_torchvision(path: str):
    import torchvision.io
    return torchvision.io.decode_jpeg(torchvision.io.read_file(path),
                                      mode=torchvision.io.ImageReadMode.RGB)


def _make_loader(name: str, root: str, batch_size: int, workers: int):
    import torch
    import torchvision
    from torchvision import transforms as v1
    from torchvision.transforms import v2

    import fastload
    if name in GENERIC:
        transform = v1.Compose([v1.RandomResizedCrop(224), v1.RandomHorizontalFlip(), v1.ColorJitter(0.4, 0.4, 0.4),
                                v1.ToTensor(), v1.Normalize(MEAN, STD)])
        dataset = torchvision.datasets.ImageFolder(root, transform)
        make = torch.utils.data.DataLoader if name == "torch-generic" else fastload.DataLoader
        return make(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, drop_last=True)
    if name == "torch + PIL/v1":
        transform = v1.Compose([v1.RandomResizedCrop(224), v1.RandomHorizontalFlip(),
                                v1.ToTensor(), v1.Normalize(MEAN, STD)])
        dataset = torchvision.datasets.ImageFolder(root, transform)
        return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                           num_workers=workers, drop_last=True)
    if name == "torch + tv.io/v2":
        transform = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
                                v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
        dataset = torchvision.datasets.ImageFolder(root, transform, loader=_decode_with_torchvision)
        return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                           num_workers=workers, drop_last=True)
    if name in TV_DATASET:  # the quick start's swap: torch's dataset and transforms, fastload's loader
        transform = v1.Compose([v1.RandomResizedCrop(224), v1.RandomHorizontalFlip(),
                                v1.ToTensor(), v1.Normalize(MEAN, STD)])
        dataset = torchvision.datasets.ImageFolder(root, transform)
        return fastload.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                   drop_last=True, draws=TV_DATASET[name])
    transform = fastload.transforms.Compose([
        fastload.transforms.RandomResizedCrop(224), fastload.transforms.RandomHorizontalFlip(),
        fastload.transforms.ToDtype(torch.float32, scale=True), fastload.transforms.Normalize(MEAN, STD)])
    return fastload.DataLoader(fastload.ImageFolder(root, transform), batch_size=batch_size,
                               shuffle=True, num_workers=workers, drop_last=True)


def run_one(name: str, root: str, batch_size: int, workers: int, epochs: int, progress: bool) -> dict:
    """Time one loader in this process (a warm-up epoch, then ``epochs``); returns its measurements."""
    import warnings
    warnings.filterwarnings("ignore", category=UserWarning, module="torchvision")
    return measure(name, _make_loader(name, root, batch_size, workers), epochs, "cpu", progress)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", help="ImageFolder root (default: the built-in sample)")
    parser.add_argument("--images", type=int, default=2000, help="size of the generated sample")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs after one warm-up epoch")
    parser.add_argument("--loaders", default=",".join(LOADERS))
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one loader, print JSON
    args = parser.parse_args(argv)

    if args.one:
        result = run_one(args.one, args.root, args.batch_size, args.workers, args.epochs, True)
        print(json.dumps(result))
        return 0
    root = args.root
    if root is None:
        from fastload.sample_data import sample_folder
        root = sample_folder(args.images)
    results = []
    for name in args.loaders.split(","):
        command = [sys.executable, os.path.abspath(__file__), root, "--one", name,
                   "--batch-size", str(args.batch_size), "--workers", str(args.workers),
                   "--epochs", str(args.epochs)]
        result = run_in_child(name, command)
        results.append(result)
    best_torch = max((r["images_per_s"] for r in results if not r["name"].startswith("fastload")), default=None)
    print(f"\nmachine: {machine()}")
    print(f"data: {root}; batch {args.batch_size}, num_workers {args.workers}, "
          f"RandomResizedCrop(224) + flip + float32 + normalize; {args.epochs} timed epochs\n")
    print(f"{'loader':<18} {'images/s':>9} {'vs best torch':>14} {'peak memory MB':>15}")
    for r in results:
        ratio = f"{r['images_per_s'] / best_torch:.2f}x" if best_torch else "-"
        print(f"{r['name']:<18} {r['images_per_s']:>9.0f} {ratio:>14} {r['peak_mb']:>15.0f}")
    print("\npeak memory: summed PSS of the loader's process and its workers, sampled every 0.5 s")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": machine(), "results": results}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
