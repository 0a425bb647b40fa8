"""Per-sample normalization in C against the plain-torch reference and torchvision, with and without flip."""

import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from fastload import cpu_augment
from fastload.kernels.normalize import normalize_reference
from fastload.transforms import compile_plan

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
PLAN = compile_plan(v2.Compose([v2.RandomResizedCrop(8), v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                                v2.Normalize(MEAN, STD)]))

needs_extension = pytest.mark.skipif(cpu_augment._normalize is None,
                                     reason="fastload._normalize was not built (no C compiler)")


@needs_extension
@pytest.mark.parametrize("height, width", [(1, 1), (1, 31), (17, 3), (224, 224), (5, 257)])
@pytest.mark.parametrize("hflip", [False, True])
def test_write_normalized_equals_reference_and_torchvision(height, width, hflip):
    """Same float32 operations in the same order as the reference: bit-equal; torchvision within 1e-5."""
    pixels = torch.randint(0, 256, (height, width, 3), dtype=torch.uint8)
    image = Image.fromarray(pixels.numpy(), "RGB")
    out = torch.full((3, height, width), float("nan"))
    cpu_augment.write_normalized(image, hflip, PLAN, out)
    source = pixels.flip(1) if hflip else pixels
    expected = normalize_reference(source[None], PLAN.scale, PLAN.shift, torch.float32)[0]
    assert torch.equal(out, expected)
    torchvision_out = v2.Normalize(MEAN, STD)(v2.ToDtype(torch.float32, scale=True)(source.permute(2, 0, 1)))
    torch.testing.assert_close(out, torchvision_out, atol=1e-5, rtol=0)


@needs_extension
def test_write_normalized_into_a_row_of_a_batch_leaves_the_others():
    batch = torch.zeros(3, 3, 4, 6)
    cpu_augment.write_normalized(Image.new("RGB", (6, 4), (255, 0, 128)), False, PLAN, batch[1])
    assert batch[0].abs().sum() == 0 and batch[2].abs().sum() == 0
    torch.testing.assert_close(batch[1, :, 0, 0], torch.tensor([(1 - MEAN[0]) / STD[0], -MEAN[1] / STD[1],
                                                                (128 / 255 - MEAN[2]) / STD[2]]))


@needs_extension
def test_normalize_refuses_too_small_buffers():
    with pytest.raises(ValueError, match="too small"):
        cpu_augment._normalize.normalize(bytes(10), torch.empty(3, 2, 2).numpy(), 2, 2, (1, 1, 1), (0, 0, 0), False)


def test_per_sample_path_only_for_float32_plans():
    half = compile_plan(v2.Compose([v2.RandomResizedCrop(8), v2.ToImage(), v2.ToDtype(torch.float16, scale=True)]))
    uint8 = compile_plan(v2.Compose([v2.RandomResizedCrop(8), v2.PILToTensor()]))
    assert not cpu_augment.normalizes_per_sample(half) and not cpu_augment.normalizes_per_sample(uint8)
    assert cpu_augment.normalizes_per_sample(PLAN) == (cpu_augment._normalize is not None)
