"""What DCT scaling gains: fastload with dct_scaling=True vs False, on ImageNet-sized and on large photos.

For each image size (default 500x375, ImageNet's typical, and 3000x2000, a
phone photo) it generates a folder of JPEGs (quality 90, 4:2:0) once, then
times fastload's loader for the training recipe (RandomResizedCrop 224 +
flip + float32 normalize) and the evaluation recipe (Resize 256 + CenterCrop
224) with DCT scaling off and on, and torch's DataLoader (torchvision
ImageFolder, same transform, v1 on PIL) beside them, in this one process,
one after the other: a warm-up epoch, then ``--epochs`` timed ones.
``dct_scaling="auto"`` (the default) is "on" for the training recipe and
"off" for the evaluation recipe.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from fastload.cli.bench import machine


def make_folder(root: str, width: int, height: int, count: int) -> str:
    from fastload.sample_data import make_image
    folder = os.path.join(root, f"{width}x{height}")
    if not os.path.isdir(folder):
        os.makedirs(os.path.join(folder, "class_0"))
        for i in range(count):
            make_image(i, width, height).save(os.path.join(folder, "class_0", f"{i:04d}.jpg"), quality=90)
    return folder


def images_per_s(loader, epochs: int) -> float:
    for _ in loader:  # warm-up: page cache, threads, buffers
        pass
    started, count = time.perf_counter(), 0
    for _ in range(epochs):
        for images, _ in loader:
            count += images.shape[0]
    return count / (time.perf_counter() - started)


def main(argv=None) -> int:
    import torch
    import torchvision
    from torchvision import transforms as v1

    import fastload
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500x375,3000x2000")
    parser.add_argument("--images", type=int, default=256, help="per size")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--root", default=os.path.join(tempfile.gettempdir(), "fastload-bench-dct"))
    args = parser.parse_args(argv)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    recipes = {"train": [v1.RandomResizedCrop(224), v1.RandomHorizontalFlip()],
               "eval": [v1.Resize(256), v1.CenterCrop(224)]}
    print(f"machine: {machine()}\n")
    print(f"{'images':<10} {'recipe':<6} {'torch':>7} {'dct off':>8} {'dct on':>8} {'on/off':>7}")
    for size in args.sizes.split(","):
        width, height = map(int, size.split("x"))
        folder = make_folder(args.root, width, height, args.images)
        for recipe, geometry in recipes.items():
            transform = v1.Compose(geometry + [v1.ToTensor(), v1.Normalize(mean, std)])
            dataset = torchvision.datasets.ImageFolder(folder, transform)
            common = dict(batch_size=32, shuffle=True, num_workers=args.workers, drop_last=True)
            torch_rate = images_per_s(torch.utils.data.DataLoader(dataset, **common), args.epochs)
            off = images_per_s(fastload.DataLoader(dataset, dct_scaling=False, **common), args.epochs)
            on = images_per_s(fastload.DataLoader(dataset, dct_scaling=True, **common), args.epochs)
            print(f"{size:<10} {recipe:<6} {torch_rate:>7.0f} {off:>8.0f} {on:>8.0f} {on / off:>6.2f}x", flush=True)
    print(f"\nimages/s; {args.images} JPEGs per size, batch 32, num_workers {args.workers}, "
          f"{args.epochs} timed epochs after a warm-up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
