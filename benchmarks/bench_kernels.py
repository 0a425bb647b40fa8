"""The fused augmentation kernel vs torchvision v2 on GPU tensors, for the ResNet-50 training recipe.

A batch of ``--batch`` decoded ImageNet-sized uint8 images (CHW, as
torchvision.io.decode_jpeg returns them; sides drawn from ``--sides``)
already on the device goes through RandomResizedCrop to 224, a random
horizontal flip, ToDtype(float32, scale=True), Normalize, float16 and
channels_last, three ways, with the same crop boxes and flips:

* fused:                  fastload.kernels.augment_batch, one launch
* torchvision per-sample: v2.functional per image (resized_crop, hflip,
                          to_dtype, normalize, to float16), then stack
* torchvision batched:    resized_crop per image (boxes differ), then flip,
                          normalize and dtype once on the stacked batch

Each is timed with CUDA events over ``--iters`` runs after a warm-up. The
bytes a batch must move are each source pixel of the crops read once and
each output element written once; each row's achieved bandwidth is those
bytes over its time, and "of copy" compares it with a torch
device-to-device copy of the same bytes (a buffer of half of them copied:
read plus written, the same total), timed the same way. The fused kernel
runs once per ``--tiles`` shape (rows x columns of output a program
computes; the default is the kernel's ``GPU_TILE``), to tune it.

Without a GPU, ``--device cpu`` runs the same code in Triton's interpreter
on a tiny batch (set TRITON_INTERPRET=1): a check that the script works,
not a measurement.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import torch
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

from fastload.cli.bench import machine
from fastload.kernels.augment import GPU_TILE, AugmentParams, augment_batch

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def make_batch(n: int, sides: tuple[int, int], size: int, device: torch.device, seed: int):
    """n random (3, H, W) uint8 images and torchvision's RandomResizedCrop boxes and flips for them."""
    generator = random.Random(seed)
    torch.manual_seed(seed)
    images, boxes, flips = [], [], []
    for _ in range(n):
        height, width = generator.randint(*sides), generator.randint(*sides)
        image = torch.randint(0, 256, (3, height, width), dtype=torch.uint8, device=device)
        images.append(image)
        boxes.append(v2.RandomResizedCrop.get_params(image, scale=[0.08, 1.0], ratio=[3 / 4, 4 / 3]))
        flips.append([generator.random() < 0.5, False])
    return images, boxes, flips


def fused(images, params, size, tile=None):
    scale = [1 / (255 * s) for s in STD]
    shift = [-m / s for m, s in zip(MEAN, STD)]
    return augment_batch(images, params, (size, size), torch.float16, scale, shift, channels_last=True, block=tile)


def per_sample(images, boxes, flips, size):
    rows = []
    for image, box, (hflip, _) in zip(images, boxes, flips):
        x = TF.resized_crop(image, *box, [size, size], antialias=True)
        x = TF.hflip(x) if hflip else x
        x = TF.normalize(TF.to_dtype(x, torch.float32, scale=True), list(MEAN), list(STD))
        rows.append(x.to(torch.float16))
    return torch.stack(rows).contiguous(memory_format=torch.channels_last)


def batched(images, boxes, flips, size):
    crops = torch.stack([TF.resized_crop(image, *box, [size, size], antialias=True)
                         for image, box in zip(images, boxes)])
    flip = torch.tensor([f[0] for f in flips], device=crops.device).view(-1, 1, 1, 1)
    crops = torch.where(flip, crops.flip(-1), crops)
    x = TF.normalize(TF.to_dtype(crops, torch.float32, scale=True), list(MEAN), list(STD))
    return x.to(torch.float16).contiguous(memory_format=torch.channels_last)


def timed(run, iters: int, device: torch.device) -> float:
    """Seconds per call, after one warm-up call (compilation, caches)."""
    run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            run()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000 / iters
    started = time.perf_counter()
    for _ in range(iters):
        run()
    return (time.perf_counter() - started) / iters


def copy_bandwidth(device: torch.device, nbytes: int, iters: int = 10) -> float:
    """Bytes read plus written per second by a device-to-device copy moving ``nbytes`` in all (half read, half
    written)."""
    source = torch.empty(nbytes // 2, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    seconds = timed(lambda: target.copy_(source), iters, device)
    return 2 * source.numel() / seconds


def tile_shape(text: str) -> tuple[int, int]:
    rows, cols = text.lower().split("x")
    return int(rows), int(cols)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--sides", type=int, nargs=2, default=(333, 500),
                        help="range of image heights and widths (ImageNet's median is about 500x375)")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiles", type=tile_shape, nargs="+", default=None, metavar="ROWSxCOLS",
                        help=f"output tiles of the fused kernel to time, powers of two (default: {GPU_TILE[0]}x"
                             f"{GPU_TILE[1]} on a GPU, one tile per image interpreted)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_kernels: no GPU here; run it on a GPU machine, or check the script with "
              "TRITON_INTERPRET=1 ... --device cpu --batch 2 --size 16 --sides 20 40", file=sys.stderr)
        return 2
    images, boxes, flips = make_batch(args.batch, tuple(args.sides), args.size, device, args.seed)
    params = AugmentParams.make(boxes, flips)  # on the host, as the loader passes them (device.py)
    reference = per_sample(images, boxes, flips, args.size)
    result = fused(images, params, args.size)
    # The kernel rounds the resized image to uint8 as torchvision does on the GPU; on the CPU torchvision's
    # fixed-point uint8 resampler can differ by one level: 1/(255*0.225) plus a float16 ulp.
    difference = (result.float() - reference.float()).abs().max().item()
    if difference > 1 / (255 * min(STD)) + 4e-3:
        print(f"bench_kernels: the fused kernel differs from torchvision by {difference}", file=sys.stderr)
        return 1
    tiles = args.tiles or [None]
    rows = [(f"fused kernel {'x'.join(map(str, tile))}" if tile else "fused kernel",
             timed(lambda tile=tile: fused(images, params, args.size, tile), args.iters, device)) for tile in tiles]
    base_row = len(rows)
    rows += [("torchvision per-sample", timed(lambda: per_sample(images, boxes, flips, args.size), args.iters, device)),
             ("torchvision batched", timed(lambda: batched(images, boxes, flips, args.size), args.iters, device))]
    read = sum(3 * h * w for _, _, h, w in boxes)
    written = args.batch * 3 * args.size * args.size * 2
    same_bytes = copy_bandwidth(device, read + written, args.iters)
    print(f"machine: {machine()}")
    print(f"batch {args.batch} of images {args.sides[0]}-{args.sides[1]} px a side -> {args.size}x{args.size} "
          f"float16 channels_last; max |fused - torchvision| = {difference:.4f}")
    print(f"bytes a batch must move: {read / 1e6:.2f} MB read (each crop pixel once) + {written / 1e6:.2f} MB "
          f"written = {(read + written) / 1e6:.2f} MB")
    shrink = torch.tensor([(h / args.size, w / args.size) for _, _, h, w in boxes]).clamp(min=1.0)
    taps = (2 * shrink).floor() + 2  # the antialiased filter's taps per axis, as the kernel counts them
    print(f"mean shrink factor (rows, columns) {shrink[:, 0].mean():.2f}, {shrink[:, 1].mean():.2f}; mean taps "
          f"{taps[:, 0].mean():.1f}, {taps[:, 1].mean():.1f}")
    print(f"copy bandwidth, a torch copy of the same bytes (read + write): {same_bytes / 1e9:.1f} GB/s")
    if device.type == "cuda":  # at a size no cache holds, for context
        print(f"copy bandwidth, a torch copy of 1 GiB (read + write): {copy_bandwidth(device, 1 << 31) / 1e9:.1f} GB/s")
    print(f"{'':24} {'ms/batch':>9} {'images/s':>10} {'vs per-sample':>13} {'GB/s':>7} {'of copy':>7}")
    base = rows[base_row][1]
    for name, seconds in rows:
        achieved = (read + written) / seconds
        print(f"{name:24} {seconds * 1e3:9.2f} {args.batch / seconds:10.0f} {base / seconds:12.1f}x "
              f"{achieved / 1e9:7.1f} {achieved / same_bytes:7.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
