"""The batch value conversion against torchvision's ToTensor / ToDtype + Normalize, bit for bit."""

import pytest
import torch

from fastload.kernels.normalize import Affine, Normalization, normalize_torch, table_bytes

from test_normalize_parity import PIPELINES, STATS, plan_values, torchvision_values


@pytest.mark.parametrize("kind, dtype", PIPELINES)
@pytest.mark.parametrize("mean, std", STATS)
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 1, 7), (2, 13, 5), (1, 33, 65)])
def test_normalize_torch_equals_torchvision(kind, dtype, mean, std, shape):
    n, h, w = shape
    images = torch.randint(0, 256, (n, h, w, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(h * w))
    ours = normalize_torch(images, plan_values(kind, dtype, mean, std))
    assert ours.dtype == dtype and ours.shape == (n, 3, h, w) and ours.is_contiguous()
    assert torch.equal(ours, torchvision_values(kind, dtype, mean, std, images))


@pytest.mark.parametrize("kind, dtype", PIPELINES)
@pytest.mark.parametrize("mean, std", STATS)
def test_table_is_every_level_as_torchvision_computes_it(kind, dtype, mean, std):
    values = plan_values(kind, dtype, mean, std)
    levels = torch.arange(256, dtype=torch.uint8).view(1, 1, 256, 1).expand(1, 1, 256, 3).contiguous()
    expected = torchvision_values(kind, dtype, mean, std, levels)[0, :, 0, :].float()
    assert torch.equal(values.table(), expected)
    assert table_bytes(values) == expected.numpy().tobytes()


def test_the_folded_affine_map_would_differ():
    """Why the ops are kept: x * (1 / (255 std)) - mean / std is an ulp off torchvision in many values."""
    mean, std = STATS[0]
    folded = Affine(tuple(1 / (255 * s) for s in std), tuple(-m / s for m, s in zip(mean, std)))
    exact = plan_values("v2", torch.float32, mean, std)
    assert (folded.table() != exact.table()).float().mean() > 0.2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_affine_is_float32_multiply_add_rounded_once(dtype):
    """DALI's and rocAL's map (fastload.compat): x * scale + shift in float32, then the dtype."""
    images = torch.randint(0, 256, (2, 4, 6, 3), dtype=torch.uint8)
    out = normalize_torch(images, Affine((1.0, 2.0, 1 / 3), (0.5, 0.0, -1.0), dtype))
    expected = (images.permute(0, 3, 1, 2).float() * torch.tensor([1.0, 2.0, 1 / 3]).view(1, 3, 1, 1)
                + torch.tensor([0.5, 0.0, -1.0]).view(1, 3, 1, 1)).to(dtype)
    assert torch.equal(out, expected)


def test_uint8_identity_is_a_layout_change():
    images = torch.randint(0, 256, (2, 5, 3, 3), dtype=torch.uint8)
    out = normalize_torch(images, None)
    assert torch.equal(out, images.permute(0, 3, 1, 2))


@pytest.mark.parametrize("kind, dtype", [("v1", torch.float32), ("v2", torch.float16), ("v1", torch.float16)])
def test_writes_into_a_poisoned_output(kind, dtype):
    mean, std = STATS[1]
    images = torch.randint(0, 256, (2, 4, 6, 3), dtype=torch.uint8)
    out = torch.full((2, 3, 4, 6), float("nan"), dtype=dtype)
    result = normalize_torch(images, plan_values(kind, dtype, mean, std), out=out)
    assert result is out and torch.equal(out, torchvision_values(kind, dtype, mean, std, images))


def test_a_unit_it_does_not_know_is_refused():
    with pytest.raises(ValueError, match="unit"):
        Normalization("round", torch.float32)
