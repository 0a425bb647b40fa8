"""fastload preview: a PNG grid of augmented samples exactly as the loader produces them.

Picks ``--n`` samples spread over the dataset (by ``--seed``), runs them
through fastload.DataLoader with the chosen recipe, undoes the
normalization, and draws each with its label and file name, so you can see
that crops, flips and colors are right.
"""

from __future__ import annotations

import argparse
import math
import os
import random

from .common import add_recipe_argument, open_source

CAPTION = 30  # pixels of text under each sample
GAP = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data", help="an image folder (class sub-folders), a file list, tar shards (a path, "
                        "'train-*.tar', a brace pattern or a URL) or TFRecord files")
    parser.add_argument("-o", "--output", default="preview.png", help="the PNG to write")
    add_recipe_argument(parser, "resnet50-train")
    parser.add_argument("--n", type=int, default=16, help="number of samples")
    parser.add_argument("--seed", type=int, default=0, help="which samples and which augmentations")
    parser.add_argument("--size", type=int, default=224, help="output size of the recipe")


def _normalization(transform):
    """(mean, std) of the last Normalize in a (possibly nested) Compose as (3, 1, 1) tensors, or None."""
    import torch
    found = None
    for step in getattr(transform, "transforms", [transform]):
        inner = _normalization(step) if hasattr(step, "transforms") else None
        if inner is not None:
            found = inner
        elif hasattr(step, "mean") and hasattr(step, "std"):
            found = torch.tensor(step.mean).view(3, 1, 1), torch.tensor(step.std).view(3, 1, 1)
    return found


def to_pil(image, normalization):
    """A (3, H, W) loader output back to an RGB picture: undo Normalize and ToDtype's scaling."""
    import torch
    from PIL import Image
    image = image.detach().cpu()
    if image.is_floating_point():
        image = image.float()
        if normalization is not None:
            mean, std = normalization
            image = image * std + mean
        image = (image * 255).clamp(0, 255).round()
    return Image.fromarray(image.to(torch.uint8).permute(1, 2, 0).numpy(), "RGB")


def grid_size(n: int, size: int) -> tuple[int, int]:
    """(width, height) of the PNG for ``n`` samples of ``size`` pixels."""
    columns = math.ceil(math.sqrt(n))
    rows = math.ceil(n / columns)
    return columns * (size + GAP) + GAP, rows * (size + CAPTION + GAP) + GAP


def picked(source, indices: list[int], transform):
    """Some samples of a source, read by that source's own read stage (a file, a shard's byte range, a
    record): a fastload source of their own."""
    from ..sources import ByteSource

    class Picked(ByteSource):
        def read(self, index: int) -> bytes:
            return source.read(indices[index])

    return Picked([source.samples[i] for i in indices], transform, shuffle=False, rank=0, world_size=1)


def run(args) -> int:
    from PIL import Image, ImageDraw, ImageFont

    import fastload
    from ..recipes import by_name
    transform = by_name(args.transform, size=args.size)
    everything = open_source(args.data)
    if not everything.samples:
        raise SystemExit(f"fastload preview: no images found in {args.data}")
    n = min(args.n, len(everything.samples))
    chosen = sorted(random.Random(args.seed).sample(range(len(everything.samples)), n))
    samples = [everything.samples[i] for i in chosen]
    source = picked(everything, chosen, transform)
    loader = fastload.DataLoader(source, batch_size=n, num_workers=min(4, os.cpu_count() or 1), seed=args.seed)
    with loader:
        images, labels = next(iter(loader))
    classes = getattr(everything, "classes", None)
    normalization = _normalization(transform)
    width, height = grid_size(n, args.size)
    grid = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(grid)
    font = ImageFont.load_default()
    columns = math.ceil(math.sqrt(n))
    for i, ((path, _), image, label) in enumerate(zip(samples, images, labels.tolist())):
        x = GAP + (i % columns) * (args.size + GAP)
        y = GAP + (i // columns) * (args.size + CAPTION + GAP)
        grid.paste(to_pil(image, normalization).resize((args.size, args.size)), (x, y))
        name = classes[label] if classes else str(label)
        fits = max(8, args.size // 6)  # characters of the default font that fit under a sample
        draw.text((x + 2, y + args.size + 2), f"{label}: {name}"[:fits], fill=(0, 0, 0), font=font)
        draw.text((x + 2, y + args.size + 15), os.path.basename(path)[:fits], fill=(90, 90, 90), font=font)
    grid.save(args.output)
    print(f"wrote {args.output}: {n} samples of {args.data}, transform {args.transform}, seed {args.seed}, "
          f"{width}x{height} pixels")
    return 0
