"""The device path (fastload.device) on the CPU: the fused kernel through Triton's interpreter, GPU decoding
through a stand-in that behaves like nvJPEG, and the ROCm-style fallback (CPU decode, device augment)."""

import functools

import pytest
import torch

import fastload
from fastload import gpu_decode
from fastload import paths as paths_module
from fastload import recipes
from fastload.buffers import BufferPool
from fastload.errors import DecodeError

from conftest import TESTDATA, FakeGpuDecoder, decode_on_cpu

STD = torch.tensor(recipes.IMAGENET_STD).view(1, 3, 1, 1)


@pytest.fixture
def fake_gpu_decoder():
    """The nvJPEG stand-in, for ``decoder=``."""
    return FakeGpuDecoder(torch.device("cpu"))


def levels_apart(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a - b| of two normalized ImageNet batches, in uint8 levels."""
    return ((a.float() - b.float()) * STD * 255).abs()


def cpu_batches(dataset, **options):
    return list(fastload.DataLoader(dataset, dct_scaling=False, **options))


@pytest.mark.parametrize("gpu_decode", [False, True])
def test_device_path_matches_the_cpu_path(small_folder, kernel_on_cpu, request, gpu_decode):
    """Same seeds, same crops and flips: the fused kernel's batches are the CPU path's within one level
    (the kernel resamples as torchvision's tensor resize, the CPU path as Pillow)."""
    fake = request.getfixturevalue("fake_gpu_decoder") if gpu_decode else None
    dataset = fastload.ImageFolder(str(small_folder), transform=recipes.resnet50_train(32))
    options = dict(batch_size=5, num_workers=2, seed=11, shuffle=True)
    loader = fastload.DataLoader(dataset, device="cpu", decoder=fake, **options)
    assert loader.device_path
    batches = list(loader)
    assert loader.stats.decoder == ("torchvision (nvjpeg)" if gpu_decode else "cpu")
    if gpu_decode:
        assert sum(fake.calls) == len(dataset) - 0  # every file went to the GPU stand-in
    expected = cpu_batches(dataset, **options)
    assert len(batches) == len(expected) == 3
    for (images, labels), (cpu_images, cpu_labels) in zip(batches, expected):
        assert images.shape == cpu_images.shape and images.dtype == torch.float32
        assert torch.equal(labels, cpu_labels)
        assert levels_apart(images, cpu_images).max() <= 1.001


def test_evaluation_recipe_on_the_device_path(small_folder, kernel_on_cpu):
    """Resize(20) then CenterCrop(16): the kernel resizes the whole image and writes the centered window."""
    dataset = fastload.ImageFolder(str(small_folder), transform=recipes.resnet50_eval(16, 20))
    options = dict(batch_size=8, num_workers=2)
    loader = fastload.DataLoader(dataset, device="cpu", **options)
    assert loader.device_path
    for (images, labels), (cpu_images, cpu_labels) in zip(loader, cpu_batches(dataset, **options)):
        assert torch.equal(labels, cpu_labels)
        assert levels_apart(images, cpu_images).max() <= 1.001


def test_color_recipe_on_the_device_path(small_folder, kernel_on_cpu):
    """SimCLR's jitter and grayscale in the kernel, against the CPU path's plain-torch chain from a
    Pillow resize: a one-level resize difference can grow through contrast and saturation."""
    dataset = fastload.ImageFolder(str(small_folder), transform=recipes.simclr(24))
    options = dict(batch_size=8, num_workers=2, seed=5)
    batches = list(fastload.DataLoader(dataset, device="cpu", **options))
    for (images, _), (cpu_images, _) in zip(batches, cpu_batches(dataset, **options)):
        apart = levels_apart(images, cpu_images)
        assert apart.mean() < 0.5 and (apart > 4.001).float().mean() < 0.01


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_rotation_on_the_device_path(small_folder, kernel_on_cpu, mode):
    """A rotation after ToImage (torchvision's tensor semantics on both paths), flips on either side of it:
    the kernel samples the resized batch through each sample's map as the CPU path's reference does, so the
    batches are the CPU path's within the resize's one level. Without a rotation no warp is compiled in."""
    T = fastload.transforms
    transform = T.Compose([T.ToImage(), T.RandomResizedCrop((20, 24)), T.RandomHorizontalFlip(),
                           T.RandomRotation(45, mode, fill=(255, 0, 128)), T.RandomVerticalFlip(),
                           T.ToDtype(torch.float32, scale=True),
                           T.Normalize(recipes.IMAGENET_MEAN, recipes.IMAGENET_STD)])
    dataset = fastload.ImageFolder(str(small_folder), transform=transform)
    options = dict(batch_size=8, num_workers=2, seed=3)
    loader = fastload.DataLoader(dataset, device="cpu", **options)
    assert loader.device_path and loader.path.warp is not None
    for (images, labels), (cpu_images, cpu_labels) in zip(loader, cpu_batches(dataset, **options), strict=True):
        assert torch.equal(labels, cpu_labels)
        assert levels_apart(images, cpu_images).max() <= 1.001
    plain = fastload.DataLoader(fastload.ImageFolder(str(small_folder), transform=recipes.resnet50_train(16)),
                                batch_size=8, device="cpu")
    assert plain.device_path and plain.path.warp is None


def test_a_bilinear_rotation_of_pil_images_stays_on_the_cpu_path(small_folder, kernel_on_cpu):
    """Pillow's rule at a rotated border is not the kernel's (up to 175 levels apart there): a bilinear
    rotation before ToImage takes the CPU fast path, whose pixels are torchvision's own."""
    from torchvision.transforms import InterpolationMode
    T = fastload.transforms
    transform = T.Compose([T.RandomResizedCrop(16), T.RandomRotation(30, InterpolationMode.BILINEAR), T.ToImage(),
                           T.ToDtype(torch.float32, scale=True)])
    loader = fastload.DataLoader(fastload.ImageFolder(str(small_folder), transform=transform), batch_size=4,
                                 device="cpu")
    assert loader.fast_path and not loader.device_path
    assert "PIL image" in fastload.paths.device_refusal(fastload.paths.fast_path_inputs(loader.dataset, 4),
                                                        loader.options.device)


@pytest.mark.skipif(not (TESTDATA / "jpeg_zoo").is_dir(), reason="shared test data not present")
def test_every_zoo_file_through_the_device_path(tmp_path, kernel_on_cpu, fake_gpu_decoder):
    """Real odd and broken JPEGs: each is decoded on the GPU stand-in, on the CPU, or skipped with its
    file named; nothing else is lost, and a failing file never takes its batch's neighbours with it."""
    paths = sorted(p for p in (TESTDATA / "jpeg_zoo").iterdir() if p.suffix == ".jpg")
    listing = tmp_path / "zoo.txt"
    listing.write_text("".join(f"{p} {i}\n" for i, p in enumerate(paths)))
    # a center crop: no resize, whose filter the interpreter would run for minutes on the 8-megapixel files
    transform = fastload.transforms.Compose([fastload.transforms.CenterCrop(16),
                                             fastload.transforms.ToImage()])
    dataset = fastload.FileList(str(listing), transform=transform, shuffle=False)
    loader = fastload.DataLoader(dataset, batch_size=8, num_workers=2, device="cpu", on_error="skip",
                                 decoder=fake_gpu_decoder)
    delivered = [label for _, labels in loader for label in labels.tolist()]
    skipped = {path for _, _, path, _ in loader.stats.skipped}
    assert len(delivered) == len(paths)
    for i, path in enumerate(paths):
        if str(path) in skipped:  # only files that neither decoder can read are skipped
            with pytest.raises((DecodeError, RuntimeError)):
                decode_on_cpu(i, str(path), path.read_bytes())
                FakeGpuDecoder().decode_many([torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.uint8)])
        else:
            assert i in delivered, path
    assert skipped and len(skipped) < len(paths) // 2
    # on_error="raise": the first bad file is named
    with pytest.raises(DecodeError) as error:
        list(fastload.DataLoader(dataset, batch_size=8, num_workers=2, device="cpu", decoder=fake_gpu_decoder))
    assert error.value.path in skipped


def test_rocm_style_fallback_decodes_on_the_cpu_and_augments_on_the_device(small_folder, kernel_on_cpu,
                                                                          monkeypatch):
    """Where no GPU decoder works (its probe decode fails: a torchvision without nvJPEG or rocJPEG), "auto"
    decodes on the CPU, still on the device path; asking for GPU decoding says why it cannot."""
    def fails(device):
        raise RuntimeError("decode_jpegs_cuda: torchvision not compiled with nvJPEG support")
    backends = [functools.partial(gpu_decode.TorchvisionGpuDecoder, probe=fails),
                functools.partial(gpu_decode.TorchCodecDecoder, probe=fails)]
    monkeypatch.setattr(paths_module, "choose_decoder", functools.partial(gpu_decode.choose_decoder, backends=backends))
    dataset = fastload.ImageFolder(str(small_folder), transform=recipes.resnet50_train(16))
    loader = fastload.DataLoader(dataset, batch_size=8, num_workers=2, device="cpu")
    assert loader.device_path and len(list(loader)) == 2 and loader.stats.decoder == "cpu"
    # the probe runs on first use, so the reason comes with the first iteration
    with pytest.raises(RuntimeError, match="cannot decode JPEGs on a GPU"):
        iter(fastload.DataLoader(dataset, batch_size=8, device="cpu", decode_device="cuda"))
    with pytest.raises(RuntimeError, match="decoder='torchcodec' is not available"):
        iter(fastload.DataLoader(dataset, batch_size=8, device="cpu", decoder="torchcodec"))


def test_gpu_decoding_asked_for_where_the_device_path_cannot_run(image_folder, monkeypatch):
    dataset = fastload.ImageFolder(str(image_folder), transform=recipes.resnet50_train(16))
    with pytest.raises(ValueError, match="device is not a CUDA device"):
        fastload.DataLoader(dataset, batch_size=8, decode_device="cuda")
    bicubic = fastload.ImageFolder(str(image_folder), transform=fastload.transforms.Compose([
        fastload.transforms.RandomResizedCrop(16, interpolation=fastload.transforms.InterpolationMode.BICUBIC),
        fastload.transforms.ToDtype(torch.float32, scale=True)]))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # (the plan is refused before any GPU is used)
    with pytest.raises(ValueError, match="not bilinear"):
        fastload.DataLoader(bicubic, batch_size=8, device="cuda", decoder="nvjpeg")
    monkeypatch.undo()
    for bad in (dict(decode_device="gpu"), dict(decoder="dali"), dict(device_prefetch=0),
                dict(memory_format=torch.preserve_format)):
        with pytest.raises(ValueError):
            fastload.DataLoader(dataset, batch_size=8, **bad)


def test_output_slots_are_reused_only_when_the_loop_has_dropped_them():
    slots = BufferPool(2, (4, 3, 2, 2), torch.float16, torch.device("cpu"))  # the device path's output slots
    first, a = slots.take(4, None)
    second, b = slots.take(3, None)
    assert (a, b) == (0, 1) and second.shape == (3, 3, 2, 2)
    assert slots.nbytes == 2 * 4 * 3 * 2 * 2 * 2
    third, c = slots.take(4, None)  # both held: a fresh batch, counted
    assert c is None and slots.overflow == 1
    row = second[1]  # a view keeps its slot in use
    del second
    assert slots.take(4, None)[1] is None
    del row
    again, d = slots.take(4, None)
    assert d == 1
    assert slots.overflow == 2


def test_batches_held_by_the_loop_stay_valid_and_resume_is_exact(small_folder, kernel_on_cpu):
    """Keeping every batch (list(loader)) forces fresh outputs beyond the slots: none is overwritten.
    A mid-epoch state_dict resumes with the same pixels."""
    dataset = fastload.ImageFolder(str(small_folder), transform=recipes.resnet50_train(16))
    options = dict(batch_size=3, num_workers=2, seed=3, shuffle=True, device="cpu", device_prefetch=1)
    loader = fastload.DataLoader(dataset, **options)
    kept = list(loader)
    assert loader.stats.overflow > 0
    streamed = [images.clone() for images, _ in fastload.DataLoader(dataset, **options)]
    assert all(torch.equal(a, b) for (a, _), b in zip(kept, streamed))
    resumed = fastload.DataLoader(dataset, **options)
    iterator = iter(resumed)
    next(iterator), next(iterator)
    state = resumed.state_dict()
    iterator.close()
    fresh = fastload.DataLoader(dataset, **options)
    fresh.load_state_dict(state)
    rest = [images for images, _ in fresh]
    assert len(rest) == len(kept) - 2
    assert all(torch.equal(a, b) for a, (b, _) in zip(rest, kept[2:]))


def test_channels_last_output_on_both_paths(small_folder, kernel_on_cpu):
    dataset = fastload.ImageFolder(str(small_folder), transform=recipes.resnet50_train(16, torch.float16))
    options = dict(batch_size=8, num_workers=2, seed=1, memory_format=torch.channels_last)
    for device in ("cpu", None):
        loader = fastload.DataLoader(dataset, device=device, **options)
        assert loader.device_path == (device == "cpu")
        images, _ = next(iter(loader))
        assert images.dtype == torch.float16 and images.is_contiguous(memory_format=torch.channels_last)
        loader.close()


def test_no_threads_and_a_target_transform(small_folder, kernel_on_cpu):
    """num_workers=0 runs every stage in the loop's thread; labels of any type are collated as torch does."""
    dataset = fastload.ImageFolder(str(small_folder), transform=recipes.resnet50_train(16),
                                   target_transform=lambda label: {"class": label, "name": f"c{label}"})
    batches = list(fastload.DataLoader(dataset, batch_size=8, device="cpu", num_workers=0))
    assert [images.shape[0] for images, _ in batches] == [8, 4]
    labels = batches[0][1]
    assert labels["class"].dtype == torch.int64 and len(labels["name"]) == 8


def test_break_and_close_join_the_device_stage(small_folder, kernel_on_cpu):
    dataset = fastload.ImageFolder(str(small_folder), transform=recipes.resnet50_train(16))
    loader = fastload.DataLoader(dataset, batch_size=2, num_workers=2, device="cpu")
    for _ in loader:
        break
    iterator = iter(loader)
    next(iterator)
    loader.close()  # the autouse fixture checks that no fastload thread (the finisher included) survives


def test_with_two_gpu_backends_the_first_batch_picks_the_faster(small_folder, kernel_on_cpu):
    import time

    class Slow(FakeGpuDecoder):
        name = "torchvision"

        def decode_many(self, encoded):
            time.sleep(0.5)  # far beyond the GIL waits a busy 2-core machine adds to the fast one's timing
            return super().decode_many(encoded)

    class Fast(FakeGpuDecoder):
        name = description = "torchcodec"

    slow, fast = Slow(), Fast()
    dataset = fastload.ImageFolder(str(small_folder), transform=recipes.resnet50_train(16))
    loader = fastload.DataLoader(dataset, batch_size=8, num_workers=2, device="cpu", decoder=[slow, fast])
    list(loader)
    assert loader.stats.decoder == "torchcodec"
    assert loader.path.decoder is fast  # kept, by the path, for the next epochs
    slow_calls = len(slow.calls)
    list(loader)
    assert loader.stats.decoder == "torchcodec"
    assert len(slow.calls) == slow_calls  # not chosen or measured again


def test_encoded_bytes_on_the_device_path(small_folder, kernel_on_cpu, fake_gpu_decoder):
    """A source of your own encoded bytes takes the device path as a folder does: the same batches."""
    reference = fastload.ImageFolder(str(small_folder), transform=recipes.resnet50_train(16))
    items = [(open(path, "rb").read(), label) for path, label in reference.samples]
    options = dict(batch_size=8, num_workers=2, seed=5, device="cpu", decoder=fake_gpu_decoder)
    encoded = fastload.DataLoader(fastload.Encoded(items, transform=recipes.resnet50_train(16)), **options)
    assert encoded.device_path
    got = list(encoded)  # one at a time: Triton's interpreter runs one kernel launch at a time
    for (images, labels), (ref_images, ref_labels) in zip(got, fastload.DataLoader(reference, **options),
                                                          strict=True):
        assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)
