"""Train a torchvision model with fastload or torch's DataLoader and report how long data keeps the step waiting.

    python examples/train_resnet50.py --data /data/imagenet/train --cpus 4            # fastload
    python examples/train_resnet50.py --data /data/imagenet/train --cpus 4 --loader torch
    python examples/train_resnet50.py --synthetic --cpus 4                             # no data loading at all

A real loop: torchvision's resnet50 (``--arch resnet18`` and others), SGD
with momentum, channels_last, bf16 autocast, the ResNet-50 training recipe
(RandomResizedCrop, flip, normalize). ``--cpus N`` restricts the whole
process -- loader threads or worker processes included -- to N cores, as on
an 8-GPU node where each GPU gets an eighth of them. ``--synthetic`` feeds
one fixed batch already on the device, so the step time is the model's
alone. The ratio of a loader's step time to the synthetic one is what a
user cares about: 1.0 means the GPU never waits for data.

Without --data it trains on the built-in sample. On a CPU-only machine it
runs on the CPU (slowly; the tests use resnet18 at 64 pixels).
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torchvision

import fastload
from fastload.recipes import resnet50_train
from fastload.sample_data import default_sample_root, make_sample_folder


def restrict_to_cpus(count: int) -> list[int]:
    """Pin this process (and the worker processes it starts) to its first ``count`` allowed cores."""
    allowed = sorted(os.sched_getaffinity(0))
    if count > len(allowed):
        raise SystemExit(f"--cpus {count}: only {len(allowed)} cores are available to this process")
    cores = allowed[:count]
    os.sched_setaffinity(0, cores)
    torch.set_num_threads(count)
    return cores


def make_loader(kind: str, root: str, image_size: int, batch_size: int, workers: int, device: torch.device):
    transform = resnet50_train(size=image_size)
    if kind == "fastload":
        source = fastload.ImageFolder(root, transform, shuffle=True, drop_last=True)
        # on a GPU: decoded (nvJPEG) and augmented there, written channels_last by the fused kernel
        loader = fastload.DataLoader(source, batch_size=batch_size, num_workers=workers, drop_last=True,
                                     device=device if device.type == "cuda" else None,
                                     memory_format=torch.channels_last)
        return loader, len(source.classes)
    dataset = torchvision.datasets.ImageFolder(root, transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                         drop_last=True, pin_memory=device.type == "cuda",
                                         persistent_workers=workers > 0)
    return loader, len(dataset.classes)


def batches(loader, device: torch.device):
    """Endless (images, labels) on the device, epoch after epoch."""
    while True:
        for images, labels in loader:
            yield (images.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last),
                   labels.to(device, non_blocking=True))


def synthetic(batch_size: int, image_size: int, classes: int, device: torch.device):
    images = torch.randn(batch_size, 3, image_size, image_size, device=device).contiguous(
        memory_format=torch.channels_last)
    labels = torch.randint(0, classes, (batch_size,), device=device)
    while True:
        yield images, labels


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="an image folder (default: the built-in sample)")
    parser.add_argument("--loader", choices=["fastload", "torch"], default="fastload")
    parser.add_argument("--synthetic", action="store_true", help="one fixed device batch: no data loading")
    parser.add_argument("--arch", default="resnet50", help="a torchvision.models name (resnet18, ...)")
    parser.add_argument("--cpus", type=int, help="cores for the whole process (default: all)")
    parser.add_argument("--workers", type=int, help="loader threads or processes (default: --cpus or all)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=50, help="timed steps, after --warmup")
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args(argv)

    cores = restrict_to_cpus(args.cpus) if args.cpus else sorted(os.sched_getaffinity(0))
    workers = args.workers if args.workers is not None else len(cores)
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    root = args.data or make_sample_folder(default_sample_root())
    if args.synthetic:
        classes = len([entry for entry in os.scandir(root) if entry.is_dir()])
        stream, source = synthetic(args.batch_size, args.image_size, classes, device), "synthetic"
    else:
        loader, classes = make_loader(args.loader, root, args.image_size, args.batch_size, workers, device)
        stream, source = batches(loader, device), args.loader

    model = getattr(torchvision.models, args.arch)(num_classes=classes)
    model = model.to(device, memory_format=torch.channels_last).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    criterion = torch.nn.CrossEntropyLoss()

    def step() -> None:
        images, labels = next(stream)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = criterion(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    sync()
    started = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    seconds = (time.perf_counter() - started) / args.steps
    stream.close()  # stops the loader's threads or worker processes now
    stats = None if args.synthetic else getattr(loader, "stats", None)
    if stats is not None and stats.decoder:  # fastload's device path: which decoder it chose
        source = f"{source}, decoder {stats.decoder}"
    result = {"data": source, "arch": args.arch, "cpus": len(cores), "workers": workers,
              "device": str(device), "batch_size": args.batch_size, "step_ms": seconds * 1e3,
              "images_per_s": args.batch_size / seconds}
    print(f"{args.arch} on {device}, {len(cores)} cores, data: {source}"
          f"{'' if args.synthetic else f' ({workers} workers)'}: {seconds * 1e3:.1f} ms/step, "
          f"{args.batch_size / seconds:.1f} images/s")
    return result


if __name__ == "__main__":
    main()
