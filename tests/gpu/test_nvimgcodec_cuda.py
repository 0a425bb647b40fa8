"""nvImageCodec's backend (fastload.gpu_nvimgcodec) on a real GPU: its pixels against libjpeg-turbo's, region
decode, decoding on the caller's stream, the device path with two lanes and the CPU balance. Skipped without
CUDA or without nvImageCodec (pip install 'torch-fastload[nvimgcodec-cu13]', or -cu12)."""

import io

import pytest
import torch

import fastload
from fastload import gpu_decode, gpu_nvimgcodec, recipes
from fastload.gpu_nvimgcodec import NvImageCodecDecoder

from conftest import decode_on_cpu, make_image, write_folder

pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
              pytest.mark.skipif(not gpu_nvimgcodec.installed(), reason="needs nvImageCodec")]

STD = torch.tensor(recipes.IMAGENET_STD).view(1, 3, 1, 1)


def jpeg(width, height, seed=0, **save) -> bytes:
    out = io.BytesIO()
    make_image(seed, width, height).save(out, "JPEG", quality=90, **save)
    return out.getvalue()


def available(name: str) -> NvImageCodecDecoder:
    backend = NvImageCodecDecoder("cuda", name)
    reason = backend.unavailable()
    if reason is not None:
        pytest.skip(f"{name}: {reason}")
    return backend


@pytest.mark.parametrize("name", ["nvimgcodec", "nvimgcodec-hw", "nvimgcodec-hybrid"])
def test_pixels_within_a_few_levels_of_libjpeg_turbo(name):
    backend = available(name)
    files = [jpeg(640, 480, 1), jpeg(500, 375, 2, subsampling=0), jpeg(333, 517, 3, subsampling=1)]
    images = backend.decode_many([torch.frombuffer(bytearray(f), dtype=torch.uint8) for f in files])
    for data, image in zip(files, images):
        assert image is not None and image.is_cuda and image.dtype == torch.uint8
        expected = decode_on_cpu(0, "x.jpg", data)
        assert image.shape == expected.shape
        off = (image.cpu().float() - expected.float()).abs()
        assert off.mean() < 2 and off.max() <= 64, (name, off.mean().item(), off.max().item())


def test_a_window_decoded_alone_is_the_window_of_the_whole_decode():
    backend = available("nvimgcodec")
    data = torch.frombuffer(bytearray(jpeg(640, 480, 4)), dtype=torch.uint8)
    whole, window = backend.decode_many([data, data], [None, (96, 40, 400, 330)])
    assert window.shape == (3, 290, 304)
    off = (window.float() - whole[:, 40:330, 96:400].float()).abs()
    assert off.max() <= 2, off.max().item()  # the same blocks through the same IDCT


def test_decoded_on_the_callers_stream():
    backend = available("nvimgcodec")
    data = torch.frombuffer(bytearray(jpeg(320, 240, 5)), dtype=torch.uint8)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        [image] = backend.decode_many([data])
        total = image.float().sum()
    side.synchronize()
    expected = decode_on_cpu(0, "x.jpg", bytes(data)).float().sum().item()
    assert abs(total.item() - expected) / image.numel() < 2  # every pixel written before the stream went on


def test_the_hardware_only_configuration_leaves_progressive_files_to_the_cpu():
    backend = available("nvimgcodec-hw")
    assert not backend.accepts(jpeg(256, 256, progressive=True)) and backend.accepts(jpeg(256, 256))


@pytest.mark.parametrize("decoder", ["nvimgcodec", None])
def test_the_device_path_on_nvimgcodec(tmp_path, decoder):
    """Forced (two lanes, no balance) and chosen by the loader (balanced with the CPU): the CPU path's batches
    within nvJPEG's few levels."""
    if decoder is not None:
        available(decoder)
    sizes = [[(640, 480), (500, 375), (375, 500), (96, 80)], [(800, 600), (300, 300), (64, 64), (1024, 768)]]
    folder = write_folder(tmp_path / "folder", sizes)
    dataset = fastload.ImageFolder(str(folder), transform=recipes.resnet50_train(64))
    options = dict(batch_size=4, num_workers=4, seed=9, shuffle=True)
    loader = fastload.DataLoader(dataset, device="cuda", decoder=decoder, **options)
    batches = [(images.cpu(), labels.cpu()) for images, labels in loader]
    if decoder is not None:
        assert loader.stats.decoder.startswith("nvimgcodec") and loader.path.lanes == 2
        assert loader.path.balance is None
    else:
        assert loader.path.balance is not None and loader.path.balance.batches == 2
    expected = list(fastload.DataLoader(dataset, dct_scaling=False, **options))
    for (images, labels), (cpu_images, cpu_labels) in zip(batches, expected, strict=True):
        assert torch.equal(labels, cpu_labels)
        levels = ((images.float() - cpu_images.float()) * STD * 255).abs()
        assert levels.mean(dim=(1, 2, 3)).max() < 2, levels.mean(dim=(1, 2, 3))


def test_choose_decoder_by_name():
    available("nvimgcodec")
    [backend] = gpu_decode.choose_decoder("cuda", "cuda", decoder="nvimgcodec")
    assert isinstance(backend, NvImageCodecDecoder)
