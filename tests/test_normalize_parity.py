"""The fast path's normalized batches against torch's DataLoader over torchvision's transforms, bit for bit.

torchvision converts a uint8 pixel op by op, each rounded to the tensor's
dtype: v1's ToTensor divides by 255, v2's ToDtype(scale=True) multiplies by
1/255, Normalize subtracts the mean and divides by the std. The fast path
computes exactly those ops (fastload.kernels.normalize), so over the same
pixels (a Resize and CenterCrop: no random draws, no DCT scaling) its
batches are torch's to the bit, in float32 and float16 alike. The helpers
here are the torchvision reference the per-path tests share
(tests/kernels/test_normalize.py, test_augment_kernel.py, test_cpu_augment.py,
test_native_sample.py).
"""

from __future__ import annotations

import pytest
import torch
import torchvision
from torchvision.transforms import transforms as v1
from torchvision.transforms import v2

import fastload
from fastload.kernels.normalize import Normalization
from fastload.transforms import CenterCrop, compile_plan

# Statistics whose float32 division differs from any reciprocal multiply: ImageNet's, awkward digits, a tiny
# std, a std over 1, negative means, one value for all channels.
STATS = [([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
         ([0.123456789, -0.5, 3.0], [1e-3, 0.987654321, 3.0]),
         ([-1.25], [0.3])]
# (first step, output dtype): v1's ToTensor (a division), v2's ToDtype(scale=True) (a multiply), float16 and
# bfloat16 computed in their own dtype, and ToTensor's float32 converted to float16 before Normalize.
PIPELINES = [("v1", torch.float32), ("v2", torch.float32), ("v2", torch.float16), ("v2", torch.bfloat16),
             ("v1", torch.float16)]


def torchvision_steps(kind: str, dtype: torch.dtype, mean, std) -> list:
    """The value part of a torchvision pipeline: v1's ToTensor or v2's ToImage + ToDtype, then Normalize."""
    if kind == "v1":
        steps = [v1.ToTensor()] + ([v2.ToDtype(dtype)] if dtype != torch.float32 else [])
        return steps + [v1.Normalize(mean, std)]
    return [v2.ToImage(), v2.ToDtype(dtype, scale=True), v2.Normalize(mean, std)]


def torchvision_values(kind: str, dtype: torch.dtype, mean, std, images: torch.Tensor) -> torch.Tensor:
    """torchvision's output, image by image, for (N, H, W, 3) uint8 ``images``."""
    compose = v2.Compose(torchvision_steps(kind, dtype, mean, std))
    return torch.stack([compose(image.numpy() if kind == "v1" else image.permute(2, 0, 1)) for image in images])


def plan_values(kind: str, dtype: torch.dtype, mean, std) -> Normalization:
    """The Normalization ``compile_plan`` records for that pipeline."""
    values = compile_plan(v2.Compose([CenterCrop(4)] + torchvision_steps(kind, dtype, mean, std))).values
    assert isinstance(values, Normalization) and values.dtype == dtype
    return values


def assert_same_batches(transform, folder, num_workers: int) -> None:
    dataset = torchvision.datasets.ImageFolder(folder, transform)
    reference = torch.utils.data.DataLoader(dataset, 6, True, generator=torch.Generator().manual_seed(3))
    ours = fastload.DataLoader(dataset, 6, True, num_workers=num_workers, dct_scaling=False,
                               generator=torch.Generator().manual_seed(3))
    assert ours.fast_path
    for (expected, expected_labels), (images, labels) in zip(reference, ours, strict=True):
        assert torch.equal(labels, expected_labels)
        assert images.dtype == expected.dtype and torch.equal(images, expected)


@pytest.mark.parametrize("kind, dtype", [("v1", torch.float32), ("v2", torch.float32), ("v2", torch.float16),
                                         ("v1", torch.float16)])
@pytest.mark.parametrize("mean, std", STATS[:2])
def test_loader_batches_are_torchs_to_the_bit(image_folder, kind, dtype, mean, std):
    """Resize + CenterCrop, then v1's ToTensor or v2's ToDtype and Normalize: float32 goes the native
    FLOAT32_PLANES route (or fastload._normalize after Pillow), float16 the batch finish in torch."""
    resize = [v1.Resize(40), v1.CenterCrop((32, 24))] if kind == "v1" else [v2.Resize(40), v2.CenterCrop((32, 24))]
    transform = (v1.Compose if kind == "v1" else v2.Compose)(resize + torchvision_steps(kind, dtype, mean, std))
    assert_same_batches(transform, image_folder, num_workers=2)


def test_loader_batches_are_torchs_with_one_thread_and_a_flip_free_resize(image_folder):
    """The same on the loop's own thread, a Resize to a fixed size (no crop) and one statistic per channel."""
    mean, std = STATS[2]
    transform = v2.Compose([v2.Resize((29, 35)), v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                            v2.Normalize(mean, std)])
    assert_same_batches(transform, image_folder, num_workers=0)
