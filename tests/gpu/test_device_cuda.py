"""The device path on a real GPU: stream order, slot reuse, memory across epochs. Skipped without CUDA."""

import gc

import pytest
import torch

import fastload
from fastload import recipes

from conftest import resident_mib

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA (or ROCm) GPU")

STD = torch.tensor(recipes.IMAGENET_STD).view(1, 3, 1, 1)


def loader(folder, transform=None, **options):
    dataset = fastload.ImageFolder(str(folder), transform=transform or recipes.resnet50_train(32))
    return fastload.DataLoader(dataset, batch_size=4, num_workers=4, seed=7, shuffle=True, **options)


@pytest.mark.parametrize("decode_device", ["auto", "cpu"])
@pytest.mark.parametrize("recipe", [recipes.resnet50_train(32), recipes.resnet50_eval(32, 40)])
def test_cuda_batches_match_the_cpu_path(image_folder, decode_device, recipe):
    cuda = loader(image_folder, recipe, device="cuda", decode_device=decode_device)
    assert cuda.device_path
    batches = [(images.cpu(), labels) for images, labels in cuda]
    assert cuda.stats.decoder != "" and cuda.stats.device_bytes > 0
    if decode_device == "cpu":
        assert cuda.stats.decoder == "cpu"
    for (images, labels), (cpu_images, cpu_labels) in zip(batches, loader(image_folder, recipe, dct_scaling=False)):
        assert labels.is_cuda and torch.equal(labels.cpu(), cpu_labels)
        levels = ((images - cpu_images) * STD * 255).abs()
        if cuda.stats.decoder == "cpu":  # the same decoded pixels: only the kernel's rounding may differ
            assert levels.max() <= 1.001
        else:  # nvJPEG's pixels against libjpeg-turbo's: up to 32 levels at an edge on the H200 (2026-11-26),
            # bounded on average per image as torchvision's test_decode_jpegs_cuda bounds the decoders' (2
            # levels), and at most 64 anywhere: a window off by a pixel or a wrong region breaks one of them
            assert levels.mean(dim=(1, 2, 3)).max() < 2, levels.mean(dim=(1, 2, 3))
            assert levels.max() <= 64, levels.max()


def test_a_slot_is_not_overwritten_while_the_loops_stream_still_reads_it(image_folder):
    """The loop queues a long sleep, then reads the batch, and drops it at once: the loader may reuse the
    slot on the host right away, but its writes must wait for the loop's stream. Checksums taken that way
    equal those of a loop that synchronizes after every batch."""
    def checksums(slow: bool):
        sums = []
        for images, _ in loader(image_folder, device="cuda", device_prefetch=1):
            if slow:
                torch.cuda._sleep(20_000_000)  # ~10 ms of GPU time before the read
            sums.append(images.double().sum())
            del images
            if not slow:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        return torch.stack(sums).cpu()
    assert torch.equal(checksums(slow=True), checksums(slow=False))


def test_device_and_host_memory_are_steady_across_epochs(image_folder):
    """After the first epoch, device memory grows only by output slots the pool had not needed yet (it makes
    them when first needed, up to its count; on the H200 one more appeared in a later epoch): everything else
    the loader holds on the device stays as it was, and the pool never overflows. After two warm-up epochs
    (pinned staging, the decoder's buffers, CUDA's lazy modules) the process's resident host memory stays
    within 16 MiB, as on the CPU path (tests/test_loader.py; this bound has not run on a GPU yet)."""
    cuda = loader(image_folder, device="cuda")
    slots = cuda.path.delivery.slots
    others, host = [], []
    for _ in range(6):
        for _ in cuda:
            pass
        torch.cuda.synchronize()
        gc.collect()
        others.append(torch.cuda.memory_allocated() - slots.nbytes)
        host.append(resident_mib())
    assert max(others[1:]) <= others[0], others
    assert cuda.stats.overflow == 0  # a loop that drops its batches never needs more than the slots
    assert max(host[2:]) - host[1] < 16, host
