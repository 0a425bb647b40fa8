"""Per-sample normalization in C against torchvision, bit for bit, with and without flip."""

import pytest
import torch
from PIL import Image
from torchvision.transforms import v2

from fastload import cpu_augment
from fastload.transforms import compile_plan

from test_normalize_parity import PIPELINES, STATS, torchvision_steps, torchvision_values

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
PLAN = compile_plan(v2.Compose([v2.RandomResizedCrop(8), v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                                v2.Normalize(MEAN, STD)]))

needs_extension = pytest.mark.skipif(cpu_augment._normalize is None,
                                     reason="fastload._normalize was not built (no C compiler)")


@needs_extension
@pytest.mark.parametrize("height, width", [(1, 1), (1, 31), (17, 3), (224, 224), (5, 257)])
@pytest.mark.parametrize("hflip", [False, True])
@pytest.mark.parametrize("kind", ["v1", "v2"])
@pytest.mark.parametrize("mean, std", STATS[:2])
def test_write_normalized_equals_torchvision(height, width, hflip, kind, mean, std):
    """v1's ToTensor (a division) or v2's ToDtype (a multiply), then Normalize: torchvision's bits."""
    plan = compile_plan(v2.Compose([v2.RandomResizedCrop(8)] + torchvision_steps(kind, torch.float32, mean, std)))
    pixels = torch.randint(0, 256, (height, width, 3), dtype=torch.uint8)
    image = Image.fromarray(pixels.numpy(), "RGB")
    out = torch.full((3, height, width), float("nan"))
    cpu_augment.write_normalized(image, hflip, plan, out)
    source = pixels.flip(1) if hflip else pixels
    assert torch.equal(out, torchvision_values(kind, torch.float32, mean, std, source[None])[0])


@needs_extension
def test_write_normalized_into_a_row_of_a_batch_leaves_the_others():
    batch = torch.zeros(3, 3, 4, 6)
    cpu_augment.write_normalized(Image.new("RGB", (6, 4), (255, 0, 128)), False, PLAN, batch[1])
    assert batch[0].abs().sum() == 0 and batch[2].abs().sum() == 0
    torch.testing.assert_close(batch[1, :, 0, 0], torch.tensor([(1 - MEAN[0]) / STD[0], -MEAN[1] / STD[1],
                                                                (128 / 255 - MEAN[2]) / STD[2]]))


@needs_extension
def test_normalize_refuses_too_small_buffers():
    table = bytes(3 * 256 * 4)
    with pytest.raises(ValueError, match="too small"):
        cpu_augment._normalize.normalize(bytes(10), torch.empty(3, 2, 2).numpy(), 2, 2, table, False)
    with pytest.raises(ValueError, match="3 x 256"):
        cpu_augment._normalize.normalize(bytes(12), torch.empty(3, 2, 2).numpy(), 2, 2, table[:-4], False)


@pytest.mark.parametrize("kind, dtype", PIPELINES)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("extension", [True, False])
def test_finish_batch_equals_torchvision(kind, dtype, channels_last, extension, monkeypatch):
    """The staged batch's values, by fastload._normalize's lookup image by image or (without the extension)
    torch's ops: torchvision's bits, into an output of any layout."""
    if not extension:
        monkeypatch.setattr(cpu_augment, "_normalize", None)
    elif cpu_augment._normalize is None:
        pytest.skip("fastload._normalize was not built (no C compiler)")
    mean, std = STATS[1]
    plan = compile_plan(v2.Compose([v2.CenterCrop((9, 13))] + torchvision_steps(kind, dtype, mean, std)))
    staged = torch.randint(0, 256, (3, 9, 13, 3), dtype=torch.uint8)
    out = torch.full((3, 3, 9, 13), float("nan"), dtype=dtype)
    out = out.contiguous(memory_format=torch.channels_last) if channels_last else out
    assert cpu_augment.finish_batch(staged, plan, out=out) is out
    assert torch.equal(out, torchvision_values(kind, dtype, mean, std, staged))
    assert torch.equal(cpu_augment.finish_batch(staged, plan), out)


def test_per_sample_path_only_for_float32_plans():
    half = compile_plan(v2.Compose([v2.RandomResizedCrop(8), v2.ToImage(), v2.ToDtype(torch.float16, scale=True)]))
    uint8 = compile_plan(v2.Compose([v2.RandomResizedCrop(8), v2.PILToTensor()]))
    assert not cpu_augment.normalizes_per_sample(half) and not cpu_augment.normalizes_per_sample(uint8)
    assert cpu_augment.normalizes_per_sample(PLAN) == (cpu_augment._normalize is not None)


# ------------------------------------------------------------------ rotation and affine maps after the resize

def warp_sources():
    """Generated images of awkward sizes, gray among them, and (where the shared test data is) real photos."""
    from fastload.sample_data import make_image
    from conftest import TESTDATA
    images = [make_image(i, w, h, grayscale=i == 2) for i, (w, h) in enumerate([(97, 71), (1, 1), (31, 17), (40, 300)])]
    photos = sorted((TESTDATA / "photos" / "hymenoptera_subset" / "val").rglob("*.jpg"))[:5]
    return images + [Image.open(p).convert("RGB") for p in photos]


WARPS = [lambda mode: v2.RandomRotation(40, mode, fill=(10, 200, 30)),
         lambda mode: v2.RandomRotation(180, mode, center=(3, 5), fill=None),
         lambda mode: v2.RandomRotation((90, 90), mode, expand=True, fill=100),
         lambda mode: v2.RandomRotation((30, 30), mode, expand=True),
         lambda mode: v2.RandomAffine(20, (0.1, 0.2), (0.8, 1.2), (-10, 10, -5, 5), mode, fill=7)]


def warped_samples(warp, mode, on_tensor):
    """(ours, torchvision's) per sample and draw, for RandomResizedCrop, a horizontal flip, ``warp``, a
    vertical flip, with the plan's draws; torchvision's from the same Pillow-resized image."""
    from torchvision.transforms.v2 import functional as F
    from fastload.decode import Decoded
    from fastload.rng import SampleRandom
    import numpy as np
    t = warp(mode)
    steps = [v2.RandomResizedCrop((24, 30)), v2.RandomHorizontalFlip(), t, v2.RandomVerticalFlip(), v2.ToImage()]
    plan = compile_plan(v2.Compose(([steps.pop()] if on_tensor else []) + steps))
    assert plan.affine.pil != on_tensor
    for i, image in enumerate(warp_sources()):
        for draw in range(3):
            geometry = plan.sample(image.width, image.height, SampleRandom(1, draw, i))
            stream = SampleRandom(1, draw, i)
            plan.geometry.sample(image.width, image.height, stream)
            params = plan.affine.draw(stream)
            ours = cpu_augment.transform_image(Decoded(image, 1), geometry, plan.resample, affine=plan.affine)
            left, top, right, bottom = geometry.crop
            x = F.resized_crop(image.convert("RGB"), top, left, bottom - top, right - left, [24, 30])
            x = F.pil_to_tensor(x) if on_tensor else x
            x = F.hflip(x) if geometry.pre_flips[0] else x
            if isinstance(t, v2.RandomRotation):
                x = F.rotate(x, params["angle"], t.interpolation, t.expand, t.center, t.fill)
            else:
                x = F.affine(x, **params, interpolation=t.interpolation, fill=t.fill)
            x = F.vflip(x) if geometry.vflip else x
            yield torch.from_numpy(np.array(ours)).permute(2, 0, 1), F.pil_to_tensor(x) if not on_tensor else x


@pytest.mark.parametrize("mode", [v2.InterpolationMode.NEAREST, v2.InterpolationMode.BILINEAR])
@pytest.mark.parametrize("warp", WARPS, ids=["rotate", "center", "expand-90", "expand-30", "affine"])
def test_rotation_on_pil_images_is_torchvisions(warp, mode):
    """On a PIL image torchvision hands Pillow the matrix the plan keeps: the same pixels, exactly."""
    for ours, expected in warped_samples(warp, mode, on_tensor=False):
        assert torch.equal(ours, expected)


@pytest.mark.parametrize("mode", [v2.InterpolationMode.NEAREST, v2.InterpolationMode.BILINEAR])
@pytest.mark.parametrize("warp", WARPS, ids=["rotate", "center", "expand-90", "expand-30", "affine"])
def test_rotation_on_tensors_is_torchvisions(warp, mode):
    """After ToImage torchvision grid-samples the tensor (zeros outside, its fill mask); so does the CPU path,
    through the kernel's reference: from the same resized image equal but for a float32 rounding flip of a
    bilinear weight (1 level, in at most 0.5% of values; measured 0.03%) -- nearest equal."""
    pairs = list(warped_samples(warp, mode, on_tensor=True))
    difference = torch.cat([(ours.int() - expected.int()).abs().flatten() for ours, expected in pairs])
    assert difference.max() <= (0 if mode == v2.InterpolationMode.NEAREST else 1)
    assert (difference > 0).float().mean() <= 0.005
