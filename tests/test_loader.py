import collections
import os
import shutil

import pytest
import torch
import torchvision
from PIL import Image
from torchvision import transforms as v1
from torchvision.transforms import v2

import fastload
from fastload import transforms as T

from conftest import TESTDATA, resident_mib

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
TRAIN = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                   T.Normalize(MEAN, STD)])


def test_drop_in_on_torchvision_image_folder_gives_torchs_batches(image_folder):
    """Same constructor call as torch's; eval transform; shuffled with the same generator."""
    transform = v1.Compose([v1.Resize(40), v1.CenterCrop(32), v1.ToTensor(), v1.Normalize(MEAN, STD)])
    dataset = torchvision.datasets.ImageFolder(image_folder, transform)
    ref = torch.utils.data.DataLoader(dataset, 5, True, generator=torch.Generator().manual_seed(0))
    ours = fastload.DataLoader(dataset, 5, True, num_workers=2, dct_scaling=False,
                               generator=torch.Generator().manual_seed(0))
    assert ours.fast_path and len(ours) == len(ref) == 5
    batches = list(ours)
    for (ref_images, ref_labels), (images, labels) in zip(ref, batches, strict=True):
        assert torch.equal(labels, ref_labels)
        torch.testing.assert_close(images, ref_images, atol=1e-6, rtol=0)
    assert isinstance(batches[0], list)  # default_collate turns (image, label) tuples into lists


def test_train_transform_matches_torchvision_functional(image_folder):
    """Each fast-path sample equals torchvision's resized_crop + hflip with the plan's parameters."""
    from PIL import Image
    import torchvision.transforms.functional as F
    from fastload.rng import SampleRandom
    from fastload.transforms import compile_plan
    source = fastload.ImageFolder(image_folder, TRAIN)
    images, labels = next(iter(fastload.DataLoader(source, batch_size=23, dct_scaling=False, seed=4)))
    plan = compile_plan(TRAIN)
    for index, (path, label) in enumerate(source.samples):
        with Image.open(path) as image:
            image = image.convert("RGB")
        geometry = plan.sample(image.width, image.height, SampleRandom(4, 0, index))
        left, top, right, bottom = geometry.crop
        expected = F.resized_crop(image, top, left, bottom - top, right - left, [32, 32])
        expected = F.normalize(F.to_tensor(F.hflip(expected) if geometry.hflip else expected), MEAN, STD)
        torch.testing.assert_close(images[index], expected, atol=1e-5, rtol=0)
        assert labels[index] == label


def test_a_sample_drawn_again_is_augmented_anew_as_under_torch(image_folder):
    """WeightedRandomSampler with replacement: each copy of a sample in the epoch gets its own crop and flip
    (torch's transforms draw anew per call), from its stream keyed by how often it came before; the first
    copy keeps the stream it has alone. A resumed epoch gives every copy the same again."""
    from PIL import Image
    import torchvision.transforms.functional as F
    from fastload.rng import SampleRandom
    from fastload.transforms import compile_plan
    dataset = torchvision.datasets.ImageFolder(image_folder, TRAIN)

    def loader():
        sampler = torch.utils.data.WeightedRandomSampler([1.0] * 3 + [0.0] * 20, 12, replacement=True,
                                                         generator=torch.Generator().manual_seed(1))
        return fastload.DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=2, dct_scaling=False,
                                   seed=4, draws="fastload")

    first = loader()
    assert first.fast_path
    batches = [images for images, _ in first]
    images = torch.cat(batches)
    drawn = list(torch.utils.data.WeightedRandomSampler([1.0] * 3 + [0.0] * 20, 12, replacement=True,
                                                        generator=torch.Generator().manual_seed(1)))
    assert len(set(drawn)) < len(drawn)
    assert len({tuple(image.flatten().tolist()) for image in images}) == len(drawn)  # every copy its own
    plan, before = compile_plan(TRAIN), collections.Counter()
    for position, index in enumerate(drawn):
        with Image.open(dataset.samples[index][0]) as image:
            image = image.convert("RGB")
        geometry = plan.sample(image.width, image.height, SampleRandom(4, 0, index, before[index]))
        before[index] += 1
        left, top, right, bottom = geometry.crop
        expected = F.resized_crop(image, top, left, bottom - top, right - left, [32, 32])
        expected = F.normalize(F.to_tensor(F.hflip(expected) if geometry.hflip else expected), MEAN, STD)
        torch.testing.assert_close(images[position], expected, atol=1e-5, rtol=0)
    interrupted = loader()
    iterator = iter(interrupted)
    next(iterator), next(iterator)
    state = interrupted.state_dict()
    interrupted.close()
    resumed = loader()
    resumed.load_state_dict(state)
    assert torch.equal(torch.cat([images for images, _ in resumed]), torch.cat(batches[2:]))


@pytest.mark.parametrize("quantized", [True, False])
def test_color_transforms_match_torchvision_functional(image_folder, quantized):
    """ColorJitter, grayscale and flips on the fast path equal torchvision v2 functional with the plan's draws."""
    from PIL import Image
    import torchvision.transforms.v2.functional as F
    from fastload.kernels.augment import BRIGHTNESS, CONTRAST, GRAYSCALE, HUE, SATURATION
    from fastload.rng import SampleRandom
    from fastload.transforms import compile_plan
    color = [T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4, 0.2)], p=0.9), T.RandomGrayscale(0.3)]
    to_float = [T.ToDtype(torch.float32, scale=True)]
    transform = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.RandomVerticalFlip()]
                          + (color + to_float if quantized else to_float + color) + [T.Normalize(MEAN, STD)])
    source = fastload.ImageFolder(image_folder, transform)
    loader = fastload.DataLoader(source, batch_size=23, dct_scaling=False, seed=5)
    assert loader.fast_path
    images, _ = next(iter(loader))
    plan = compile_plan(transform)
    kernels = {BRIGHTNESS: F.adjust_brightness, CONTRAST: F.adjust_contrast, SATURATION: F.adjust_saturation,
               HUE: F.adjust_hue, GRAYSCALE: lambda x, _: F.rgb_to_grayscale(x, num_output_channels=3)}
    expected = []
    for index, (path, _) in enumerate(source.samples):
        with Image.open(path) as image:
            image = image.convert("RGB")
        geometry = plan.sample(image.width, image.height, SampleRandom(5, 0, index))
        left, top, right, bottom = geometry.crop
        x = F.pil_to_tensor(F.resized_crop(image, top, left, bottom - top, right - left, [24, 24]))
        x = F.vflip(x) if geometry.vflip else x
        x = F.hflip(x) if geometry.hflip else x
        x = x if quantized else F.to_dtype(x, torch.float32, scale=True)
        for op, factor in geometry.color:
            x = kernels[op](x, factor) if op in kernels else x
        expected.append(F.normalize(F.to_dtype(x, torch.float32, scale=True), MEAN, STD))
    expected = torch.stack(expected)
    # uint8 chain: equal but for a float32 rounding flip at a truncation (1 level, rare); float chain: rounding.
    level = 1 / (255 * min(STD))
    difference = (images - expected).abs()
    assert difference.max() <= (level + 1e-5 if quantized else 1e-4)
    assert (difference > 1e-4).float().mean() <= 0.005


def test_dct_scaled_decode_stays_close(image_folder):
    source = fastload.ImageFolder(image_folder, v2.Compose([v2.Resize((20, 30)), v2.PILToTensor()]))
    exact, _ = next(iter(fastload.DataLoader(source, batch_size=23, dct_scaling=False)))
    scaled, _ = next(iter(fastload.DataLoader(source, batch_size=23, dct_scaling=True)))
    difference = (exact.float() - scaled.float()).abs()
    # Measured on these textured images at 2-4x downscales: mean 2-5 levels, max 29. A DCT-domain
    # low-pass differs from a triangle filter on fine texture; shifted or wrong content would not.
    assert difference.mean() < 6 and difference.max() < 48


@pytest.mark.parametrize("workers, batch_size", [(0, 4), (3, 7), (2, 23)])
def test_augmentation_independent_of_threads_and_batch_size(image_folder, workers, batch_size):
    reference = torch.cat([x for x, _ in fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN),
                                                             batch_size=23)])
    loader = fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=batch_size,
                                 num_workers=workers)
    assert torch.equal(torch.cat([x for x, _ in loader]), reference)


def test_same_labels_as_torch_every_epoch_and_epochs_differ(image_folder):
    ref = torch.utils.data.DataLoader(torchvision.datasets.ImageFolder(image_folder, TRAIN), batch_size=4,
                                      shuffle=True)
    ours = fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=4, shuffle=True,
                               num_workers=2)
    expected = collections.Counter(torch.cat([y for _, y in ref]).tolist())
    epochs = []
    for _ in range(2):
        labels = torch.cat([y for _, y in ours]).tolist()
        assert collections.Counter(labels) == expected
        epochs.append(labels)
    assert epochs[0] != epochs[1]  # the epoch advances, so the order changes
    ours.set_epoch(0)
    assert torch.cat([y for _, y in ours]).tolist() == epochs[0]


def test_two_ranks_get_disjoint_shards_covering_the_epoch(image_folder):
    for rank in range(2):
        source = fastload.ImageFolder(image_folder, TRAIN)
        loader = fastload.DataLoader(source, batch_size=5, shuffle=True, rank=rank, world_size=2, num_workers=2)
        assert len(loader) == 3
        assert sum(images.shape[0] for images, _ in loader) == 12
    paths = [fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), rank=r, world_size=2,
                                 shuffle=True).make_order().indices(0) for r in range(2)]
    assert len(paths[0]) == len(paths[1]) == 12
    assert set(paths[0]) | set(paths[1]) == set(range(23))
    assert len(set(paths[0]) & set(paths[1])) == 1  # one index repeated as padding, as DistributedSampler does


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, index):
        if index == 99:
            raise IndexError
        return {"x": torch.tensor([index, index * index]), "name": f"item{index}"}


def test_generic_map_dataset_equals_torch():
    for kwargs in [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
                   dict(batch_size=4, collate_fn=lambda items: [item["name"] for item in items])]:
        expected = list(torch.utils.data.DataLoader(Squares(), **kwargs))
        got = list(fastload.DataLoader(Squares(), num_workers=2, **kwargs))
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            assert repr(a) == repr(b)


class Counting(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(11))


def test_generic_iterable_dataset_without_workers_consumed_once_in_order():
    # With workers, torch's per-worker rule applies: tests/test_workers.py.
    for drop_last in (False, True):
        expected = [b.tolist() for b in torch.utils.data.DataLoader(Counting(), batch_size=4, drop_last=drop_last)]
        got = [b.tolist() for b in fastload.DataLoader(Counting(), batch_size=4, num_workers=0, drop_last=drop_last)]
        assert got == expected


def test_unsupported_transform_warns_and_runs_as_given(image_folder):
    transform = v2.Compose([v2.RandomResizedCrop(16), v2.GaussianBlur(3), v2.ToImage()])
    with pytest.warns(UserWarning, match="GaussianBlur"):
        loader = fastload.DataLoader(fastload.ImageFolder(image_folder, transform), batch_size=8, num_workers=2)
    assert not loader.fast_path
    images, labels = next(iter(loader))
    assert images.shape == (8, 3, 16, 16) and images.dtype == torch.uint8


def test_error_in_user_transform_reaches_the_loop(image_folder):
    def broken(image):
        raise ZeroDivisionError("user bug")
    loader = fastload.DataLoader(torchvision.datasets.ImageFolder(image_folder, broken), batch_size=4, num_workers=2)
    with pytest.raises(ZeroDivisionError, match="user bug") as info:
        next(iter(loader))
    assert any("sample" in note for note in info.value.__notes__)


@pytest.fixture
def folder_with_bad_file(image_folder, tmp_path):
    root = tmp_path / "bad"
    shutil.copytree(image_folder, root)
    (root / "class_0" / "img_002.jpg").write_bytes(b"this is not a jpeg")
    return root


def test_bad_file_raises_decode_error_naming_it(folder_with_bad_file):
    loader = fastload.DataLoader(fastload.ImageFolder(folder_with_bad_file, TRAIN), batch_size=4, num_workers=2)
    with pytest.raises(fastload.DecodeError, match="img_002.jpg") as info:
        list(loader)
    assert info.value.index == 2 and "not a readable image" in info.value.reason


def test_skip_replaces_the_bad_sample_and_reports_it(folder_with_bad_file):
    loader = fastload.DataLoader(fastload.ImageFolder(folder_with_bad_file, TRAIN), batch_size=4,
                                 num_workers=2, on_error="skip")
    batches = list(loader)
    assert [x.shape[0] for x, _ in batches] == [4, 4, 4, 4, 4, 3]
    assert len(loader.stats.skipped) == 1
    epoch, index, path, reason = loader.stats.skipped[0]
    assert (epoch, index) == (0, 2) and path.endswith("img_002.jpg") and reason
    labels = torch.cat([y for _, y in batches]).tolist()
    assert labels[2] == labels[3] == 0  # sample 3 (same class) stands in for sample 2


def test_stats_and_context_manager(image_folder):
    with fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=8, num_workers=2) as loader:
        iterator = iter(loader)
        next(iterator)
    assert loader.stats.batches >= 1 and loader.stats.seconds["decode"] > 0
    assert "img/s" in str(loader.stats)


def test_device_cpu_and_pin_memory_flags_work_without_gpu(image_folder):
    loader = fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=8, device="cpu",
                                 pin_memory=True, num_workers=1)
    images, labels = next(iter(loader))
    assert images.device.type == "cpu" and labels.dtype == torch.int64


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_without_the_c_extensions_batches_are_identical(image_folder, monkeypatch, dtype):
    """Pillow decode + torch normalization (a build without a compiler) give the same batches."""
    from fastload import cpu_augment, decode
    transform = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToDtype(dtype, scale=True),
                           T.Normalize(MEAN, STD)])

    def first_batch():
        loader = fastload.DataLoader(fastload.ImageFolder(image_folder, transform), batch_size=23,
                                     num_workers=2, dct_scaling=False, seed=9)
        return next(iter(loader))

    with_extensions = first_batch()
    monkeypatch.setattr(decode, "_jpeg", None)
    monkeypatch.setattr(cpu_augment, "_normalize", None)
    without = first_batch()
    assert torch.equal(with_extensions[1], without[1])
    torch.testing.assert_close(with_extensions[0], without[0], atol=1e-5 if dtype == torch.float32 else 0,
                               rtol=0)


def test_a_torch_script_runs_with_only_the_import_swapped(image_folder, tmp_path):
    """The drop-in promise, literally: replace torch.utils.data.DataLoader in a script's text."""
    script = f'''
import collections, torch, torchvision
from torchvision import transforms
import fastload
dataset = torchvision.datasets.ImageFolder({str(image_folder)!r}, transforms.Compose([
    transforms.RandomResizedCrop(32), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
    transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]))
loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=True, num_workers=2, drop_last=False)
labels = collections.Counter()
for epoch in range(2):
    for images, targets in loader:
        assert images.shape[1:] == (3, 32, 32) and images.dtype == torch.float32
        labels.update(targets.tolist())
result = (type(loader).__module__, len(loader), sorted(labels.items()))
'''
    torch_result, fastload_result = {}, {}
    exec(compile(script, "torch_script", "exec"), torch_result)
    exec(compile(script.replace("torch.utils.data.DataLoader", "fastload.DataLoader"), "fastload_script",
                 "exec"), fastload_result)
    assert torch_result["result"][0].startswith("torch.utils.data")
    assert fastload_result["result"][0].startswith("fastload")
    assert fastload_result["result"][1:] == torch_result["result"][1:]


def test_a_bare_cuda_device_under_torchrun_is_the_local_rank(image_folder, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # (as on a node of 4 GPUs)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("LOCAL_RANK", "3")
    source = fastload.ImageFolder(image_folder, TRAIN)
    assert fastload.DataLoader(source, device="cuda").device == torch.device("cuda", 3)
    assert fastload.DataLoader(source, device="cuda:1").device == torch.device("cuda", 1)
    assert fastload.DataLoader(source, device="cpu").device == torch.device("cpu")
    monkeypatch.delenv("LOCAL_RANK")
    assert fastload.DataLoader(source, device="cuda").device == torch.device("cuda")


def test_uneven_shards_for_evaluation_say_so_and_cover_the_epoch_once(image_folder):
    seen = []
    for rank in range(2):
        source = fastload.ImageFolder(image_folder, TRAIN, rank=rank, world_size=2, even_shards=False)
        loader = fastload.DataLoader(source, batch_size=5)
        with pytest.warns(UserWarning, match="ranks 0-0 read 12 samples, the others 11"):
            labels = [label for _, batch in loader for label in batch.tolist()]
        assert len(labels) == len(source) == (12 if rank == 0 else 11) and len(loader) == (3 if rank == 0 else 3)
        seen.append(len(labels))
    assert sum(seen) == 23


# -- torch's semantics in the corners training scripts touch ------------------------------------------

def test_shuffle_without_generator_changes_every_epoch_and_advances_the_global_rng_as_torch():
    dataset = list(range(20))

    def run(loader_class):
        torch.manual_seed(11)
        loader = loader_class(dataset, batch_size=5, shuffle=True, num_workers=2)
        epochs = []
        for _ in range(3):
            epochs.append([i for batch in loader for i in batch.tolist()])
            epochs.append(torch.get_rng_state())  # what the training loop's own draws start from
        return epochs

    got, expected = run(fastload.DataLoader), run(torch.utils.data.DataLoader)
    orders = got[0::2]
    assert orders == expected[0::2]
    assert len({tuple(order) for order in orders}) == 3  # a new permutation each epoch
    assert all(torch.equal(a, b) for a, b in zip(got[1::2], expected[1::2]))


def test_default_augmentation_seed_follows_torch_manual_seed_and_is_resumed(image_folder):
    def first_batch(seed):
        torch.manual_seed(seed)
        loader = fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=8)
        state = loader.state_dict()  # where a first iteration starts
        return next(iter(loader))[0], state

    a, state = first_batch(1)
    b, _ = first_batch(1)
    c, _ = first_batch(2)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert state["augment_seed"] == 1
    torch.manual_seed(99)
    resumed = fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=8)
    resumed.load_state_dict(state)
    assert torch.equal(next(iter(resumed))[0], a)


@pytest.mark.parametrize("split", ["subset", "random_split", "nested"])
def test_a_subset_of_an_image_folder_keeps_the_fast_path_with_torchs_samples(image_folder, split):
    transform = v2.Compose([v2.Resize((20, 24)), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    dataset = torchvision.datasets.ImageFolder(image_folder, transform)
    if split == "subset":
        part = torch.utils.data.Subset(dataset, [21, 3, 4, 17, 0, 9, 12])
    elif split == "random_split":
        part, _ = torch.utils.data.random_split(dataset, [0.6, 0.4], generator=torch.Generator().manual_seed(1))
    else:
        part = torch.utils.data.Subset(torch.utils.data.Subset(dataset, list(range(2, 20))), [5, 1, 16, 7])
    ours = fastload.DataLoader(part, batch_size=3, shuffle=True, num_workers=2, dct_scaling=False,
                               generator=torch.Generator().manual_seed(5))
    ref = torch.utils.data.DataLoader(part, batch_size=3, shuffle=True, generator=torch.Generator().manual_seed(5))
    assert ours.fast_path
    for (images, labels), (ref_images, ref_labels) in zip(ours, ref, strict=True):
        assert torch.equal(labels, ref_labels)
        torch.testing.assert_close(images, ref_images, atol=1 / 255 + 1e-6, rtol=0)


def test_stats_count_the_generic_path_and_pin_memory_warns_as_torch():
    loader = fastload.DataLoader(list(range(10)), batch_size=4, num_workers=2)
    list(loader)
    assert (loader.stats.images, loader.stats.batches) == (10, 3)
    iterable = fastload.DataLoader(Counting(), batch_size=4, num_workers=2)
    list(iterable)
    assert (iterable.stats.images, iterable.stats.batches) == (22, 6)  # each worker yields all 11, as torch's
    if not torch.accelerator.is_available():
        for loader_class in (torch.utils.data.DataLoader, fastload.DataLoader):
            with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator"):
                list(loader_class(list(range(4)), batch_size=2, pin_memory=True))


def test_pytorch_examples_imagenet_loader_setup_runs_an_epoch(image_folder, tmp_path):
    """The data setup of pytorch/examples imagenet/main.py (train: ImageFolder with RandomResizedCrop(224),
    flip, ToTensor, Normalize, shuffle=(sampler is None), pin_memory=True; val: Resize(256) + CenterCrop(224)
    with a DistributedSampler(shuffle=False, drop_last=True) when distributed; torch.manual_seed(args.seed)),
    written out here with only the DataLoader swapped; val pixels and labels equal torch's."""
    for split in ("train", "val"):
        shutil.copytree(image_folder, tmp_path / split)
    torch.manual_seed(0)  # main.py: if args.seed is not None
    normalize = v1.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    train_dataset = torchvision.datasets.ImageFolder(tmp_path / "train", v1.Compose([
        v1.RandomResizedCrop(224), v1.RandomHorizontalFlip(), v1.ToTensor(), normalize]))
    val_dataset = torchvision.datasets.ImageFolder(tmp_path / "val", v1.Compose([
        v1.Resize(256), v1.CenterCrop(224), v1.ToTensor(), normalize]))
    workers, batch_size = 2, 8
    loaders = {}
    for name, loader_class in (("fastload", fastload.DataLoader), ("torch", torch.utils.data.DataLoader)):
        train_sampler = None  # not distributed
        train_loader = loader_class(train_dataset, batch_size=batch_size, shuffle=(train_sampler is None),
                                    num_workers=workers, pin_memory=True, sampler=train_sampler)
        val_sampler = torch.utils.data.distributed.DistributedSampler(val_dataset, num_replicas=2, rank=1,
                                                                      shuffle=False, drop_last=True)
        val_loader = loader_class(val_dataset, batch_size=batch_size, shuffle=False, num_workers=workers,
                                  pin_memory=True, sampler=val_sampler)
        loaders[name] = train_loader, val_loader
    train_loader, val_loader = loaders["fastload"]
    assert train_loader.fast_path and val_loader.fast_path
    targets = []
    torch.manual_seed(1)  # the epoch's shuffle is torch's for the same global RNG
    for i, (images, target) in enumerate(train_loader):  # main.py's train(): ProgressMeter(len(train_loader))
        assert images.shape[1:] == (3, 224, 224) and images.dtype == torch.float32 and i < len(train_loader)
        assert images.abs().amax() < 3 and images.std() > 0.1  # normalized pixels
        targets.append(target)
    torch.manual_seed(1)
    assert [t.tolist() for t in targets] == [t.tolist() for _, t in loaders["torch"][0]]
    ref_val = loaders["torch"][1]
    assert len(val_loader) == len(ref_val) == 2
    for (images, target), (ref_images, ref_target) in zip(val_loader, ref_val, strict=True):
        assert torch.equal(target, ref_target)
        torch.testing.assert_close(images, ref_images, atol=1 / 255 / 0.224 + 1e-5, rtol=0)


class FlippingCenterCrop(v1.CenterCrop):
    """A CenterCrop that also flips: fusing it as a plain CenterCrop would silently drop the flip."""

    def forward(self, image):
        return v1.functional.hflip(super().forward(image))


def test_a_transform_subclass_that_overrides_forward_runs_as_given(image_folder):
    transform = v1.Compose([v1.Resize((30, 30)), FlippingCenterCrop(20), v1.ToTensor()])
    dataset = torchvision.datasets.ImageFolder(image_folder, transform)
    with pytest.warns(UserWarning, match="FlippingCenterCrop .*overrides forward"):
        ours = fastload.DataLoader(dataset, batch_size=6, num_workers=2)
    assert not ours.fast_path
    for (images, labels), (ref_images, ref_labels) in zip(ours, torch.utils.data.DataLoader(dataset, 6),
                                                          strict=True):
        assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)


class ImageFolderWithPaths(torchvision.datasets.ImageFolder):
    """A common pattern: samples carry their path. The fast path would drop it."""

    def __getitem__(self, index):
        image, label = super().__getitem__(index)
        return image, label, self.samples[index][0]


class OffsetLabels(torch.utils.data.Subset):
    def __getitem__(self, index):
        image, label = super().__getitem__(index)
        return image, label + 10

    def __getitems__(self, indices):
        return [self[i] for i in indices]


@pytest.mark.parametrize("make", [lambda t, root: ImageFolderWithPaths(root, t),
                                  lambda t, root: OffsetLabels(torchvision.datasets.ImageFolder(root, t), [4, 0, 9])],
                         ids=["image-folder-subclass", "subset-subclass"])
def test_a_dataset_subclass_that_overrides_getitem_runs_as_given(image_folder, make):
    transform = v2.Compose([v2.CenterCrop(16), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    dataset = make(transform, image_folder)
    with pytest.warns(UserWarning, match="overrides __getitem__"):
        ours = fastload.DataLoader(dataset, batch_size=2, num_workers=2)
    assert not ours.fast_path
    for got, expected in zip(ours, torch.utils.data.DataLoader(dataset, batch_size=2), strict=True):
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def test_a_transform_changed_between_epochs_changes_the_batches_as_torchs(image_folder):
    """Progressive resizing, and a new transform assigned to the dataset, as training scripts do."""
    transform = v2.Compose([v2.Resize((24, 24)), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    dataset = torchvision.datasets.ImageFolder(image_folder, transform)
    ours = fastload.DataLoader(dataset, batch_size=5, num_workers=2, dct_scaling=False)
    assert next(iter(ours))[0].shape[-2:] == (24, 24)
    transform.transforms[0].size = [12, 16]
    images = next(iter(ours))[0]
    assert images.shape[-2:] == (12, 16) and ours.fast_path
    torch.testing.assert_close(images, next(iter(torch.utils.data.DataLoader(dataset, batch_size=5)))[0],
                               atol=1 / 255 + 1e-6, rtol=0)
    dataset.transform = v2.Compose([v2.CenterCrop(8), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    assert next(iter(ours))[0].shape[-2:] == (8, 8)


PHOTOS = TESTDATA / "photos" / "hymenoptera_subset"


@pytest.mark.skipif(not PHOTOS.is_dir(), reason="shared test data not present (FASTLOAD_TESTDATA)")
@pytest.mark.parametrize("resize, crop", [(256, 224), (160, 128)])
@pytest.mark.parametrize("split", ["train", "val"])
def test_deterministic_geometry_gives_torchs_pixels_by_default(split, resize, crop):
    """The drop-in promise: an evaluation transform gives torch's DataLoader's pixels within one level on
    every shared test photo, with fastload's defaults (dct_scaling="auto": no DCT scaling here)."""
    transform = v2.Compose([v2.Resize(resize), v2.CenterCrop(crop), v2.ToImage(),
                            v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
    dataset = torchvision.datasets.ImageFolder(PHOTOS / split, transform)
    ours = fastload.DataLoader(dataset, batch_size=8, num_workers=2)
    assert ours.fast_path
    one_level = 1 / 255 / min(STD) + 1e-5
    for (images, labels), (ref_images, ref_labels) in zip(ours, torch.utils.data.DataLoader(dataset, 8),
                                                          strict=True):
        assert torch.equal(labels, ref_labels)
        torch.testing.assert_close(images, ref_images, atol=one_level, rtol=0)


@pytest.mark.parametrize("warp", [
    v1.RandomRotation(30, v1.InterpolationMode.BILINEAR, fill=(255, 0, 0)),
    v2.RandomAffine(20, (0.1, 0.1), (0.8, 1.2), (-10, 10), v2.InterpolationMode.NEAREST, fill=64)])
@pytest.mark.parametrize("source", ["generated", "photos"])
def test_rotation_takes_the_fast_path_with_torchvisions_pixels(image_folder, source, warp):
    """RandomResizedCrop, a flip, a rotation or affine map, ToTensor, Normalize: each fast-path sample is
    torchvision's own steps on the dataset's image with the plan's draws (Pillow's pixels, exactly)."""
    import torchvision.transforms.v2.functional as F
    from fastload.rng import SampleRandom
    from fastload.transforms import compile_plan
    root = image_folder if source == "generated" else PHOTOS / "val"
    if not root.is_dir():
        pytest.skip("shared test data not present (FASTLOAD_TESTDATA)")
    transform = v1.Compose([v1.RandomResizedCrop(32), v1.RandomHorizontalFlip(), warp, v1.ToTensor(),
                            v1.Normalize(MEAN, STD)])
    dataset = torchvision.datasets.ImageFolder(root, transform)
    loader = fastload.DataLoader(dataset, batch_size=len(dataset), num_workers=2, dct_scaling=False, seed=6,
                                 draws="fastload")
    assert loader.fast_path
    images, labels = next(iter(loader))
    plan = compile_plan(transform)
    for index, (path, label) in enumerate(dataset.samples):
        image = dataset.loader(path)
        geometry = plan.sample(image.width, image.height, SampleRandom(6, 0, index))
        stream = SampleRandom(6, 0, index)
        plan.geometry.sample(image.width, image.height, stream)
        params = plan.affine.draw(stream)
        left, top, right, bottom = geometry.crop
        x = F.resized_crop(image, top, left, bottom - top, right - left, [32, 32])
        x = F.hflip(x) if geometry.pre_flips[0] else x
        if isinstance(warp, v1.RandomRotation):
            x = F.rotate(x, params["angle"], warp.interpolation, fill=warp.fill)
        else:
            x = F.affine(x, **params, interpolation=warp.interpolation, fill=warp.fill)
        expected = F.normalize(F.to_dtype(F.pil_to_tensor(x), torch.float32, scale=True), MEAN, STD)
        torch.testing.assert_close(images[index], expected, atol=1e-5, rtol=0)
        assert labels[index] == label


def test_a_fallback_warns_once_naming_why(image_folder):
    import warnings
    transform = v2.Compose([v2.ToImage(), v2.Resize((12, 12), antialias=False), v2.ToDtype(torch.float32, scale=True)])
    dataset = torchvision.datasets.ImageFolder(image_folder, transform)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        loader = fastload.DataLoader(dataset, batch_size=8)
        batches = list(loader) + list(loader)
    assert [str(w.message) for w in caught if "fastload" in str(w.message)] == [
        f"fastload: the fast path cannot run {type(transform.transforms[1]).__module__}.Resize "
        f"(antialias=False on a tensor image); running ImageFolder's transform as given (correct, slower) "
        f"instead of the fast path"]
    assert torch.equal(batches[0][0], next(iter(torch.utils.data.DataLoader(dataset, 8)))[0])
    custom = torchvision.datasets.ImageFolder(image_folder, transform=TRAIN,
                                              loader=lambda p: Image.open(p).convert("RGB"))
    with pytest.warns(UserWarning, match="its own loader"):
        assert not fastload.DataLoader(custom, batch_size=4).fast_path


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads Linux's /proc/self/statm")
def test_host_memory_is_steady_across_epochs(tmp_path):
    """Six epochs of the fast path at 224x224 (batches of 8, 4.8 MB each): after the first two (which warm
    the allocator and the reusable buffers), resident memory stays within 16 MiB. Measured on the 2-core
    CI machine (2026-11-27): flat to 0.1 MiB; a loop holding on to every batch grows it by 147 MiB over
    the same epochs. (One batch kept an epoch does not show: it fits in what the allocator keeps.)"""
    import gc
    from fastload import recipes
    from fastload.sample_data import make_sample_folder
    folder = make_sample_folder(tmp_path / "sample", num_images=64, num_classes=2)
    loader = fastload.DataLoader(fastload.ImageFolder(str(folder), transform=recipes.resnet50_train(224)),
                                 batch_size=8, num_workers=2, shuffle=True, seed=3)
    resident = []
    for _ in range(6):
        for images, labels in loader:
            assert images.shape == (8, 3, 224, 224)
        del images, labels
        gc.collect()
        resident.append(resident_mib())
    assert max(resident[2:]) - resident[1] < 16, resident


def _without_io(monkeypatch, function):
    """``function()``, failing on any file-system call it makes."""
    import builtins

    def refuse(*args, **kwargs):
        raise AssertionError("I/O in a repr")
    for module, name in ((builtins, "open"), (os, "stat"), (os, "scandir"), (os, "listdir")):
        monkeypatch.setattr(module, name, refuse)
    try:
        return function()
    finally:
        monkeypatch.undo()


def test_repr_is_one_short_line_made_without_io_or_threads(image_folder, monkeypatch):
    import threading
    loader = fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=8, shuffle=True,
                                 num_workers=2, device="cpu", on_error="skip")
    threads = threading.active_count()
    text = _without_io(monkeypatch, lambda: repr(loader))
    assert threading.active_count() == threads
    assert text == (f"DataLoader(ImageFolder(root={str(image_folder)!r}, samples=23, classes=3, transform=Compose, "
                    f"shuffle=False, rank=0/1), batch_size=8, shuffle=True, num_workers=2, device='cpu', "
                    f"on_error='skip', path=CpuPath)")  # the source's own shuffle, and the loader's, which wins
    loader.dct_scaling = False
    assert "dct_scaling=False" in repr(loader)


def test_repr_of_other_datasets_names_them_without_printing_their_transform(image_folder):
    torchvision_folder = torchvision.datasets.ImageFolder(image_folder, TRAIN)
    loader = fastload.DataLoader(torchvision_folder, batch_size=4, drop_last=True, pin_memory=True,
                                 num_workers=1, persistent_workers=True, memory_format=torch.channels_last)
    assert repr(loader) == (f"DataLoader(ImageFolder(root={str(image_folder)!r}, 23 samples), batch_size=4, "
                            f"shuffle=False, num_workers=1, drop_last=True, pin_memory=True, "
                            f"persistent_workers=True, memory_format=torch.channels_last, path=CpuPath)")

    def names(items):
        return [item["name"] for item in items]
    sampler = torch.utils.data.WeightedRandomSampler([1.0] * 10, 10)
    generic = fastload.DataLoader(Squares(), batch_size=3, sampler=sampler, collate_fn=names, timeout=5)
    assert repr(generic) == ("DataLoader(Squares(10 samples), batch_size=3, shuffle=False, "
                             "sampler=WeightedRandomSampler, num_workers=0, timeout=5, collate_fn=names, path=MapPath)")
    assert repr(fastload.DataLoader(list(range(10)), shuffle=True)).startswith(
        "DataLoader(list(10 samples), batch_size=1, shuffle=True, num_workers=0")


def test_repr_of_a_half_made_loader_does_not_raise():
    half = fastload.DataLoader.__new__(fastload.DataLoader)
    assert repr(half) == "DataLoader()"
    half.__dict__["dataset"] = Counting()
    assert repr(half).startswith("DataLoader(Counting, batch_size=None, shuffle=False")


def test_the_docstrings_list_every_argument():
    """Every argument of the public classes is in its docstring's Args (Google style)."""
    import inspect
    for cls in (fastload.DataLoader, fastload.ImageFolder, fastload.FileList, fastload.Encoded,
                fastload.TarShards, fastload.TFRecords, fastload.Source):
        args = cls.__doc__.split("Args:")[1]
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            if name != "self":
                prefix = "**" if parameter.kind is parameter.VAR_KEYWORD else ""
                assert f"{prefix}{name}" in args, f"{cls.__name__}'s docstring does not list {name}"


def test_a_device_that_is_not_available_is_refused_at_construction(image_folder, monkeypatch):
    """torch would fail at the first batch, inside a loader thread ('invalid argument to exchangeDevice'):
    the loader says at once which device, what this torch has, and what to do."""
    source = fastload.ImageFolder(image_folder, TRAIN)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"device='cuda': no cuda device is available here \(torch .* is a "
                                         r".*available: cpu\).*device=None.*pytorch.org"):
        fastload.DataLoader(source, device="cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ValueError, match=r"device='cuda:2': this machine has 2 cuda device\(s\), cuda:0 to cuda:1"):
        fastload.DataLoader(source, device="cuda:2")
    loader = fastload.DataLoader(source)
    with pytest.raises(ValueError, match="no cuda device"):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        loader.device = "cuda"  # set later: validated again
    assert loader.device is None


def test_the_loader_is_generic_like_torchs():
    from typing import TypeVar
    T_co = TypeVar("T_co", covariant=True)

    class Stateful(fastload.DataLoader[T_co]):
        pass

    assert fastload.DataLoader[torch.Tensor].__origin__ is fastload.DataLoader
    assert Stateful[int].__origin__ is Stateful
    assert list(Stateful(list(range(4)), batch_size=2))[1].tolist() == [2, 3]


class _WhoMadeIt(torch.utils.data.Dataset):
    """Each sample: its index, the worker that made it, how many workers it saw, and a torch draw."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        return i, -1 if info is None else info.id, 0 if info is None else info.num_workers, torch.rand(())


def _epoch(loader) -> list:
    torch.manual_seed(7)  # the same base seed for the loader set and the fresh one
    return [[t.tolist() for t in batch] for batch in loader]


def test_num_workers_set_after_construction_takes_effect_at_the_next_epoch():
    loader = fastload.DataLoader(_WhoMadeIt(), batch_size=3)
    for workers in (0, 2, 0, 3):
        loader.num_workers = workers
        got = _epoch(loader)
        assert got == _epoch(fastload.DataLoader(_WhoMadeIt(), batch_size=3, num_workers=workers))
        assert {n for batch in got for n in batch[2]} == {workers}  # get_worker_info's thread count
    persistent = fastload.DataLoader(_WhoMadeIt(), batch_size=3, num_workers=2, persistent_workers=True)
    list(persistent)
    persistent.num_workers = 3  # its workers start again as 3 new ones (torch's would go on as the 2)
    assert {n for batch in _epoch(persistent) for n in batch[2]} == {3}


def test_the_fast_path_is_sized_again_for_torch_settings_set_after_construction(image_folder):
    from fastload.thread_pool import batches_ahead
    loader = fastload.DataLoader(fastload.ImageFolder(image_folder, transform=TRAIN), batch_size=4, seed=0)
    assert loader.fast_path and loader.path.in_flight == 2
    list(loader)
    loader.num_workers, loader.prefetch_factor = 3, 4
    loader.set_epoch(0)
    got = [batch[0] for batch in loader]
    assert loader.path.in_flight == batches_ahead(loader) == 12
    fresh = fastload.DataLoader(fastload.ImageFolder(image_folder, transform=TRAIN), batch_size=4, seed=0,
                                num_workers=3, prefetch_factor=4)
    for ours, theirs in zip(got, (batch[0] for batch in fresh), strict=True):
        assert torch.equal(ours, theirs)


def test_collate_fn_worker_init_fn_timeout_and_pin_memory_set_take_effect_at_the_next_epoch():
    loader = fastload.DataLoader(_WhoMadeIt(), batch_size=3, num_workers=2)
    iterator = iter(loader)
    first = next(iterator)
    loader.collate_fn = lambda items: len(items)  # torch's iterator read it as it started: not this epoch's
    assert isinstance(next(iterator), list) and isinstance(first, list)
    list(iterator)
    assert list(loader) == [3, 3, 3, 3]
    seen = []
    loader.worker_init_fn = seen.append
    loader.timeout, loader.pin_memory = 5.0, False
    list(loader)
    assert sorted(seen) == [0, 1]


def test_settings_torch_refuses_after_construction_are_refused_as_torch_refuses_them():
    dataset = _WhoMadeIt()
    for name, value in [("batch_size", 2), ("sampler", None), ("batch_sampler", None), ("drop_last", True),
                        ("dataset", dataset), ("persistent_workers", True)]:
        with pytest.raises(ValueError) as theirs:
            setattr(torch.utils.data.DataLoader(dataset, batch_size=3), name, value)
        with pytest.raises(ValueError) as ours:
            setattr(fastload.DataLoader(dataset, batch_size=3), name, value)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("name, value, message", [("num_workers", -1, "non-negative"), ("num_workers", 1.5, "non"),
                                                  ("timeout", -2, "non-negative"), ("prefetch_factor", 0, "None or"),
                                                  ("collate_fn", None, "a callable"),
                                                  ("worker_init_fn", 3, "None or a callable")])
def test_a_bad_setting_is_refused_when_set_and_changes_nothing(name, value, message):
    loader = fastload.DataLoader(_WhoMadeIt(), batch_size=3, num_workers=2)
    with pytest.raises(ValueError, match=message):
        setattr(loader, name, value)
    assert len(list(loader)) == 4
