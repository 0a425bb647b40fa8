"""The batch value conversion against torchvision's ToDtype + Normalize, per sample."""

import pytest
import torch
from torchvision.transforms import v2

from fastload.kernels.normalize import normalize_torch

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


# float32 within 1e-5 (same math, reassociated); half types within one ulp at the values' magnitude.
@pytest.mark.parametrize("dtype, atol", [(torch.float32, 1e-5), (torch.float16, 4e-3), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 1, 7), (2, 13, 5)])
def test_matches_torchvision_to_dtype_then_normalize(dtype, atol, shape):
    n, h, w = shape
    images = torch.randint(0, 256, (n, h, w, 3), dtype=torch.uint8)
    scale = [1 / (255 * s) for s in STD]
    shift = [-m / s for m, s in zip(MEAN, STD)]
    ours = normalize_torch(images, scale, shift, dtype)
    reference = v2.Compose([v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
    expected = torch.stack([reference(image.permute(2, 0, 1)) for image in images])
    assert ours.dtype == dtype and ours.shape == (n, 3, h, w) and ours.is_contiguous()
    torch.testing.assert_close(ours.float(), expected, atol=atol, rtol=0)


def test_uint8_identity_is_a_layout_change():
    images = torch.randint(0, 256, (2, 5, 3, 3), dtype=torch.uint8)
    out = normalize_torch(images, None, None, torch.uint8)
    assert torch.equal(out, images.permute(0, 3, 1, 2))


def test_writes_into_a_poisoned_output():
    images = torch.randint(0, 256, (2, 4, 6, 3), dtype=torch.uint8)
    out = torch.full((2, 3, 4, 6), float("nan"))
    normalize_torch(images, [1.0, 2.0, 3.0], [0.5, 0.0, -1.0], torch.float32, out=out)
    expected = images.permute(0, 3, 1, 2).float() * torch.tensor([1.0, 2.0, 3.0]).view(1, 3, 1, 1) \
        + torch.tensor([0.5, 0.0, -1.0]).view(1, 3, 1, 1)
    assert torch.equal(out, expected)
