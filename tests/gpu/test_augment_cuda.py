"""The fused kernel compiled for a real GPU: against its reference on the same device. Skipped without CUDA."""

import random

import pytest
import torch

from fastload.kernels.augment import AugmentParams, augment_batch
from fastload.kernels.augment_torch import augment_torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA (or ROCm) GPU")

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
SCALE = [1 / (255 * s) for s in STD]
SHIFT = [-m / s for m, s in zip(MEAN, STD)]


def imagenet_like_batch(n, seed):
    from torchvision.transforms import v2
    generator = random.Random(seed)
    torch.manual_seed(seed)
    images, boxes, ops, factors = [], [], [], []
    for i in range(n):
        channels = 1 if i % 7 == 3 else 3
        image = torch.randint(0, 256, (channels, generator.randint(1, 600), generator.randint(1, 600)),
                              dtype=torch.uint8, device="cuda")
        if i % 5 == 1:  # a strided HWC view, as from a numpy array
            image = image.permute(1, 2, 0).contiguous().permute(2, 0, 1)
        images.append(image)
        boxes.append(v2.RandomResizedCrop.get_params(image, scale=[0.08, 1.0], ratio=[3 / 4, 4 / 3]))
        order = [0, 1, 2, 3]
        generator.shuffle(order)
        ops.append(order + [4 if generator.random() < 0.2 else -1])
        values = [generator.uniform(0.2, 1.8), generator.uniform(0.2, 1.8), generator.uniform(0.2, 1.8),
                  generator.uniform(-0.3, 0.3)]
        factors.append([values[op] for op in order] + [0.0])
    flips = [[generator.random() < 0.5, generator.random() < 0.5] for _ in range(n)]
    return images, AugmentParams.make(boxes, flips, ops, factors, device="cuda")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.uint8])
@pytest.mark.parametrize("channels_last", [False, True])
def test_kernel_on_gpu_matches_reference(dtype, channels_last):
    """The compiled kernel against its reference on the same GPU, first the geometry alone, then with the
    color operations. On the GPU multiply-adds fuse (FMA), so a value on a rounding boundary may land one
    level apart; each later color operation requantizes and scales that flip by its factor (up to 1.8 here),
    so through a chain of four a few values move further. On the H200 (2026-11-26): the geometry within one
    level; with the colors 0.03-0.04% of values more than one level off, at most 11 levels (bounded here
    by 16: 1.8^4 is 10.5, plus requantization) -- and torch's own reference, run on the CPU and on the GPU,
    differed from itself as much (0.02-0.03% of values, 8 levels).
    A wrong operation moves most values, which the fraction bound catches."""
    images, params = imagenet_like_batch(64, seed=random.randrange(2 ** 31))
    scale, shift = (None, None) if dtype == torch.uint8 else (SCALE, SHIFT)
    atol = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2, torch.uint8: 0}[dtype]
    level = 1.0 if dtype == torch.uint8 else max(SCALE)

    def difference(params):
        expected = augment_torch(images, params, (224, 224), dtype, scale, shift)
        out = torch.full((64, 3, 224, 224), 7, dtype=dtype, device="cuda")
        if dtype.is_floating_point:
            out.fill_(float("nan"))
        if channels_last:
            out = out.contiguous(memory_format=torch.channels_last)
        result = augment_batch(images, params, (224, 224), dtype, scale, shift, out=out)
        signed = result.float() - expected.float()
        assert not signed.isnan().any()
        assert signed.mean().abs() <= 0.05 * level  # flips go both ways; a shifted or truncating path does not
        return signed.abs()

    geometry = difference(AugmentParams.make(params.boxes, params.flips, device="cuda"))
    assert geometry.max() <= level + atol
    assert (geometry > atol).float().mean() <= 0.005
    colors = difference(params)
    assert (colors > atol).float().mean() <= 0.01  # a path one level off everywhere fails here
    assert (colors > level + atol).float().mean() <= 0.001
    assert colors.max() <= 16 * level + atol


@pytest.mark.parametrize("nearest", [False, True])
def test_warp_on_gpu_matches_torchvision(nearest):
    """A rotation after the resize, compiled for the GPU: from the kernel's own resized batch, torchvision's
    rotate of the CUDA tensors (grid_sample, its fill mask) and flips -- equal but for float rounding flips of
    a sampling coordinate at a tie, FMA included (at most 0.5% of values; bilinear: 1 level)."""
    from torchvision.transforms.v2 import functional as TF
    from torchvision.transforms.v2.functional._geometry import _get_inverse_affine_matrix
    from fastload.kernels.augment import Warp
    seed = random.randrange(2 ** 31)
    images, params = imagenet_like_batch(16, seed)
    generator = random.Random(seed)
    angles = [generator.uniform(-180, 180) for _ in images]
    matrices = [_get_inverse_affine_matrix([112.0, 112.0], -angle, [0.0, 0.0], 1.0, [0.0, 0.0]) for angle in angles]
    fill = (30.0, 250.0, 7.0)
    boxes, flips = params.boxes, params.flips
    warped = augment_batch(images, AugmentParams.make(boxes, flips, matrices=matrices, device="cuda"), (224, 224),
                           torch.uint8, warp=Warp((224, 224), nearest, fill)).float()
    resized = augment_batch(images, AugmentParams.make(boxes, device="cuda"), (224, 224), torch.uint8)
    mode = TF.InterpolationMode.NEAREST if nearest else TF.InterpolationMode.BILINEAR
    expected = torch.stack([TF.rotate(resized[i], angle, mode, fill=list(fill)).flip(
        [d for d, on in ((-1, flips[i, 0]), (-2, flips[i, 1])) if on]) for i, angle in enumerate(angles)]).float()
    diff = (warped - expected).abs()
    assert (diff > 0).float().mean() <= 0.005, f"seed {seed}"
    assert nearest or diff.max() <= 1, f"seed {seed}"


@pytest.mark.parametrize("antialias", [True, False])
def test_taps_kernel_on_gpu_is_the_reference(antialias):
    """The resize's taps as the GPU computes them (``taps_kernel``, once per image and axis) are
    ``taps_torch``'s on the CPU to the bit: its divisions round to nearest (``div_rn``, not Triton's
    default approximate division) and its steps have no multiply-add to fuse."""
    from fastload.kernels.augment import _taps, _taps_width, taps_torch
    images, params = imagenet_like_batch(32, seed=random.randrange(2 ** 31))
    params = params.with_windows((224, 224))
    ours = _taps(params, (224, 224), antialias, _taps_width(params, antialias))
    expected = taps_torch(params.to("cpu"), (224, 224), antialias)
    for got, want, what in zip(ours, expected, ("starts", "sizes", "weights")):
        assert torch.equal(got.cpu(), want), f"{what}: {(got.cpu() != want).sum()} values differ"


def test_tile_shapes_on_gpu_agree():
    """The separable resize gives the same bits whatever the output tile a program computes (a zero-weighted
    row adds an exact zero, and each pixel's sums run in the same order), so a tile shape tuned for speed
    cannot change results: ``GPU_TILE`` against others, with flips and the colors but contrast (whose mean
    is summed per tile)."""
    from fastload.kernels.augment import CONTRAST, GPU_TILE, NONE
    images, params = imagenet_like_batch(32, seed=random.randrange(2 ** 31))
    params = AugmentParams(params.boxes, params.flips, torch.where(params.ops == CONTRAST, NONE, params.ops),
                           params.factors)
    results = [augment_batch(images, params, (224, 224), torch.float16, SCALE, SHIFT, block=tile)
               for tile in (GPU_TILE, (4, 128), (16, 32), (1, 256))]
    for tile, result in zip(((4, 128), (16, 32), (1, 256)), results[1:]):
        assert torch.equal(result, results[0]), f"{tile}: {(result != results[0]).sum()} values differ"


def test_plain_bilinear_on_gpu_matches_reference():
    """antialias=False (rocAL's LINEAR resize) compiled for the GPU, whose tiles skip the source rows a
    shrinking filter does not reach: against the reference, within one level but for rare flips."""
    images, params = imagenet_like_batch(32, seed=random.randrange(2 ** 31))
    params = AugmentParams.make(params.boxes, params.flips, device="cuda")
    ours = augment_batch(images, params, (224, 224), torch.uint8, antialias=False).float()
    expected = augment_torch(images, params, (224, 224), torch.uint8, antialias=False).float()
    diff = (ours - expected).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() <= 0.005
