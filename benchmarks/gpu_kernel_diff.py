"""Where the compiled augmentation kernel departs from its reference on a GPU: a diagnostic, not a test.

    python3 benchmarks/gpu_kernel_diff.py      # on the GPU machine, fastload importable

For two seeds of tests/gpu's ImageNet-like batch (64 images, awkward sizes, strided views, gray ones, four
color operations each in random order): torch's reference on the CPU against the same on the GPU; the
kernel against the GPU reference with everything, and with the geometry alone; and, for each image off by
more than one level, each of its color operations alone. Its output on an H200 is
benchmarks/results/kernel_diff_h200.txt (the uint8 output; one level is 1).
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gpu"))
from test_augment_cuda import imagenet_like_batch  # noqa: E402

from fastload.kernels.augment import AugmentParams, augment_batch  # noqa: E402
from fastload.kernels.augment_torch import augment_torch  # noqa: E402


def main() -> None:
    for seed in (1, 2):
        images, p = imagenet_like_batch(64, seed)

        def both(params, imgs=images):
            k = augment_batch(imgs, params, (224, 224), torch.uint8).float()
            r = augment_torch(imgs, params, (224, 224), torch.uint8).float()
            return (k - r).abs().flatten(1)
        d = both(p)
        on_cpu = AugmentParams(*[None if t is None else t.cpu()
                                 for t in (p.boxes, p.flips, p.ops, p.factors, p.windows, p.matrices)])
        rc = augment_torch([i.cpu() for i in images], on_cpu, (224, 224), torch.uint8).float()
        rg = augment_torch(images, p, (224, 224), torch.uint8).float().cpu()
        print(f"seed {seed}: ref cpu vs gpu max {(rc - rg).abs().max().item()}, "
              f"frac {((rc - rg).abs() > 0).float().mean().item():.5f}")
        geo = both(AugmentParams.make(p.boxes, p.flips, device="cuda"))
        print(f"seed {seed}: full max {d.max().item()} frac>1 {(d > 1).float().mean().item():.5f}; "
              f"geometry-only max {geo.max().item()} frac>0 {(geo > 0).float().mean().item():.5f}")
        for i in (d.amax(1) > 1).nonzero().flatten().tolist()[:8]:
            im = images[i]
            print(f"  img {i} shape {tuple(im.shape)} stride {im.stride()} box {p.boxes[i].tolist()} "
                  f"flips {p.flips[i].tolist()} ops {p.ops[i].tolist()} "
                  f"f {[round(x, 3) for x in p.factors[i].tolist()]} max {d[i].max().item()} "
                  f"n>1 {(d[i] > 1).sum().item()}")
            for s in range(p.ops.shape[1]):
                keep = torch.full_like(p.ops[i:i + 1], -1)
                keep[0, s] = p.ops[i, s]
                one = both(AugmentParams.make(p.boxes[i:i + 1], p.flips[i:i + 1], keep, p.factors[i:i + 1],
                                              device="cuda"), [im])
                print(f"    only slot {s} op {p.ops[i, s].item()}: max {one.max().item()} "
                      f"n>1 {(one > 1).sum().item()}")


if __name__ == "__main__":
    main()
