"""The fast path over torch's datasets draws as torch's DataLoader does (``draws="torch"``, the default):
the same seed (or ``generator``) and ``num_workers`` give torch's pixels; ``draws="fastload"`` gives each
sample its own stream."""

import warnings

import pytest
import torch
import torchvision
from torchvision import transforms as v1
from torchvision.transforms import v2

import fastload
from fastload.torch_draws import TorchDraws, torch_draws
from fastload.transforms import RandomResizedCropGeometry, compile_plan

from conftest import write_folder

# odd sizes, two far outside RandomResizedCrop's ratios (its 10 tries fail: the centre crop), grayscale ones
SIZES = [[(97, 71), (64, 64), (131, 67), (6, 80), (50, 93), (75, 75), (61, 47)],
         [(120, 90), (90, 7), (77, 101), (45, 45), (99, 66), (70, 52), (65, 90), (110, 83)]]
V1 = v1.Compose([v1.RandomResizedCrop(16), v1.RandomHorizontalFlip(), v1.ToTensor(),
                 v1.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
V2 = v2.Compose([v2.RandomResizedCrop((12, 16), antialias=True), v2.RandomHorizontalFlip(),
                 v2.RandomVerticalFlip(0.3), v2.PILToTensor()])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_folder(tmp_path_factory.mktemp("draws"), SIZES, grayscale_every=4)


def _batches(make, dataset, seed, **kwargs):
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's worker count warning on a 2-core machine
        return [images.clone() for images, _ in make(dataset, **kwargs)]


def _same(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)  # uint8 and float alike: torch's pixels and values, to the bit


@pytest.mark.parametrize("transform", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize("workers", [0, 1, 2, 3])
def test_the_fast_path_gives_torchs_pixels_under_the_same_seed(folder, transform, workers):
    dataset = torchvision.datasets.ImageFolder(folder, transform)
    loader = fastload.DataLoader(dataset, batch_size=4, shuffle=True, num_workers=workers)
    assert loader.fast_path and loader.path.torch_draws is not None
    expected = _batches(torch.utils.data.DataLoader, dataset, 5, batch_size=4, shuffle=True, num_workers=workers)
    _same(_batches(lambda *a, **k: loader, dataset, 5), expected)
    if workers == 2:  # the next epoch too: new workers, new base seed
        torch.manual_seed(5)
        torch_loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=True, num_workers=workers)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            list(torch_loader)
            second = [x for x, _ in torch_loader]
        torch.manual_seed(5)
        list(loader)
        _same([x.clone() for x, _ in loader], second)


def test_a_generator_and_a_subset_give_torchs_pixels(folder):
    dataset = torch.utils.data.Subset(torchvision.datasets.ImageFolder(folder, V2), [3, 1, 4, 0, 5, 9, 2, 6, 13])

    def generator():
        return torch.Generator().manual_seed(17)

    expected = _batches(torch.utils.data.DataLoader, dataset, 0, batch_size=2, shuffle=True, num_workers=2,
                        generator=generator())
    loader = fastload.DataLoader(dataset, batch_size=2, shuffle=True, num_workers=2, generator=generator())
    assert loader.fast_path
    _same(_batches(lambda *a, **k: loader, dataset, 1), expected)  # another global seed: the generator's draws


def test_every_try_failing_gives_torchs_centre_crop(folder):
    transform = v2.Compose([v2.RandomResizedCrop(8, scale=(0.9, 1.0), ratio=(3.0, 4.0)), v2.PILToTensor()])
    dataset = torchvision.datasets.ImageFolder(folder, transform)
    expected = _batches(torch.utils.data.DataLoader, dataset, 2, batch_size=3)
    _same(_batches(fastload.DataLoader, dataset, 2, batch_size=3), expected)
    plan = compile_plan(transform)
    draws = torch_draws(transform, plan)
    generator = torch.Generator().manual_seed(0)
    # in_ratio 4/3 < 3: the whole width, a height of round(40 / 3), centred
    assert draws.draw(40, 30, generator).crop == (0, 8, 40, 21)


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 0.7, 1.0])
def test_a_flip_compares_torchs_float32_draw(p):
    plan = compile_plan(v2.Compose([v2.CenterCrop(4), v2.RandomHorizontalFlip(p), v2.PILToTensor()]))
    draws = torch_draws(v2.Compose([v2.CenterCrop(4), v2.RandomHorizontalFlip(p), v2.PILToTensor()]), plan)
    ours = torch.Generator().manual_seed(3)
    torch.manual_seed(3)
    for _ in range(3000):
        assert draws.draw(10, 10, ours).hflip == bool(torch.rand(1) < p)


def test_the_draws_in_torchvisions_order_and_calls():
    """RandomResizedCrop's get_params (v1) and make_params (v2) on the same generator state."""
    transform = v1.Compose([v1.RandomResizedCrop(10, scale=(0.2, 0.9), ratio=(0.5, 2.0)), v1.ToTensor()])
    draws = torch_draws(transform, compile_plan(transform))
    assert isinstance(draws, TorchDraws) and isinstance(draws.plan.geometry, RandomResizedCropGeometry)
    crop = v2.RandomResizedCrop(10, scale=(0.2, 0.9), ratio=(0.5, 2.0))
    ours = torch.Generator().manual_seed(9)
    torch.manual_seed(9)
    for width, height in [(30, 40), (7, 90), (300, 200), (1, 1), (64, 64)] * 20:
        image = torch.zeros(3, height, width)
        if width % 2:
            top, left, h, w = v1.RandomResizedCrop.get_params(image, crop.scale, crop.ratio)
        else:
            params = crop.make_params([image])
            top, left, h, w = params["top"], params["left"], params["height"], params["width"]
        assert draws.draw(width, height, ours).crop == (left, top, left + w, top + h)


def test_draws_fastload_gives_each_sample_its_own_stream(folder):
    dataset = torchvision.datasets.ImageFolder(folder, V2)
    one = _batches(fastload.DataLoader, dataset, 4, batch_size=4, num_workers=1, draws="fastload")
    three = _batches(fastload.DataLoader, dataset, 4, batch_size=4, num_workers=3, draws="fastload")
    _same(three, one)
    assert fastload.DataLoader(dataset, batch_size=4, draws="fastload").path.torch_draws is None
    with pytest.raises(ValueError, match="draws must be one of 'torch', 'fastload'"):
        fastload.DataLoader(dataset, batch_size=4, draws="numpy")


COLOUR = v2.Compose([v2.RandomResizedCrop(16), v2.RandomHorizontalFlip(), v2.PILToTensor(),
                     v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), v2.ColorJitter(contrast=0.3),
                     v2.ColorJitter(), v2.RandomGrayscale(0.2)])
ROTATION = v1.Compose([v1.RandomResizedCrop(16), v1.RandomHorizontalFlip(),
                       v1.RandomRotation(30, v1.InterpolationMode.BILINEAR, fill=(255, 0, 0)), v1.ToTensor()])
AFFINE = v2.Compose([v2.RandomResizedCrop(16), v2.RandomVerticalFlip(),
                     v2.RandomAffine(20, (0.1, 0.1), (0.8, 1.2), (-10, 10, -5, 5), v2.InterpolationMode.NEAREST,
                                     fill=64), v2.RandomHorizontalFlip(), v2.PILToTensor()])


@pytest.mark.parametrize("transform", [COLOUR, ROTATION, AFFINE], ids=["colour", "rotation", "affine"])
@pytest.mark.parametrize("workers", [0, 2])
def test_colour_rotation_and_affine_draws_are_torchs(folder, transform, workers):
    """ColorJitter's randperm and factors (one without ranges draws too), RandomApply's and RandomGrayscale's
    rand, a rotation's or affine map's parameters in make_params' order, flips before and after it."""
    dataset = torchvision.datasets.ImageFolder(folder, transform)
    loader = fastload.DataLoader(dataset, batch_size=3, shuffle=True, num_workers=workers)
    assert loader.fast_path and loader.path.torch_draws is not None
    expected = _batches(torch.utils.data.DataLoader, dataset, 3, batch_size=3, shuffle=True, num_workers=workers)
    _same(_batches(lambda *a, **k: loader, dataset, 3), expected)


def test_a_flip_before_the_crop_runs_as_given(folder):
    """The plan flips after the crop, which draws the same but crops the other side: under draws="torch"
    the transform runs as given (torch's draws, slower), with a warning naming it; draws="fastload" takes
    the fast path."""
    flip_first = v2.Compose([v2.RandomHorizontalFlip(), v2.RandomResizedCrop(8), v2.PILToTensor()])
    dataset = torchvision.datasets.ImageFolder(folder, flip_first)
    with pytest.warns(UserWarning, match="RandomHorizontalFlip.*before the crop.*draws='fastload'"):
        loader = fastload.DataLoader(dataset, batch_size=4, num_workers=2)
    assert not loader.fast_path
    expected = _batches(torch.utils.data.DataLoader, dataset, 8, batch_size=4)
    _same(_batches(fastload.DataLoader, dataset, 8, batch_size=4), expected)
    assert fastload.DataLoader(dataset, batch_size=4, draws="fastload").fast_path


FLIPS_ONLY = v2.Compose([v2.CenterCrop(20), v2.RandomHorizontalFlip(), v2.PILToTensor()])


@pytest.mark.parametrize("transform", [V1, FLIPS_ONLY], ids=["crop", "flips-only"])
def test_a_resumed_epoch_draws_the_rest_as_the_uninterrupted_run(folder, transform):
    """Each worker's generator goes on from the draws of the batches delivered before the state was saved
    (made again, on that worker, as the epoch resumes): the rest of the epoch is the uninterrupted run's,
    which is torch's."""
    dataset = torchvision.datasets.ImageFolder(folder, transform)

    def loader():
        return fastload.DataLoader(dataset, batch_size=2, shuffle=True, num_workers=2)

    uninterrupted = _batches(lambda *a, **k: loader(), dataset, 6)
    torch.manual_seed(6)
    first = loader()
    iterator = iter(first)
    for _ in range(3):  # an odd count: the next batch is worker 1's
        next(iterator)
    state = first.state_dict()
    first.close()
    torch.manual_seed(99)  # another process: the global generator is elsewhere
    resumed = loader()
    resumed.load_state_dict(state)
    _same([x.clone() for x, _ in resumed], uninterrupted[3:])


def _reseed(worker_id):
    torch.manual_seed(1000 + worker_id)  # a worker_init_fn that reseeds: the worker's draws go on from it


def test_persistent_workers_and_a_reseeding_worker_init_fn_give_torchs_pixels(folder):
    """Persistent workers keep their generators across epochs (batch 0 of each epoch to worker 0), as
    torch's persistent worker processes do; a worker_init_fn's reseed is where each worker's draws start."""
    dataset = torchvision.datasets.ImageFolder(folder, V2)
    kwargs = dict(batch_size=3, shuffle=True, num_workers=2, persistent_workers=True, worker_init_fn=_reseed)

    def two_epochs(loader):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [x.clone() for _ in range(2) for x, _ in loader]

    torch.manual_seed(12)
    expected = two_epochs(torch.utils.data.DataLoader(dataset, **kwargs))
    torch.manual_seed(12)
    _same(two_epochs(fastload.DataLoader(dataset, **kwargs)), expected)


def test_the_device_path_is_left_to_fastloads_draws(folder, kernel_on_cpu):
    """The device path draws from fastload's streams only: under draws="torch" the CPU path decodes (its
    pixels torch's), GPU decoding asked for by name is refused naming draws="fastload", which takes it."""
    dataset = torchvision.datasets.ImageFolder(folder, V2)
    loader = fastload.DataLoader(dataset, batch_size=4, device="cpu")
    assert loader.fast_path and not loader.device_path
    _same(_batches(lambda *a, **k: loader, dataset, 7), _batches(torch.utils.data.DataLoader, dataset, 7, batch_size=4))
    with pytest.raises(ValueError, match="draws='fastload'"):
        fastload.DataLoader(dataset, batch_size=4, device="cpu", decode_device="cuda")
    assert fastload.DataLoader(dataset, batch_size=4, device="cpu", draws="fastload").device_path


@pytest.mark.parametrize("workers", [0, 2])
def test_a_transform_reordered_between_epochs_is_drawn_in_its_new_order(folder, workers):
    """Flips swapped between epochs compile to the same plan, but torch draws them in the new order: the
    second epoch is torch's second epoch; a flip moved before the crop then runs as given."""
    crop, hflip, vflip, to_tensor = v1.RandomResizedCrop(16), v1.RandomHorizontalFlip(), v1.RandomVerticalFlip(), \
        v1.PILToTensor()
    first, second = v1.Compose([crop, hflip, vflip, to_tensor]), v1.Compose([crop, vflip, hflip, to_tensor])
    moved = v1.Compose([hflip, crop, to_tensor])

    def epochs(make):
        dataset = torchvision.datasets.ImageFolder(folder, first)
        torch.manual_seed(11)
        loader = make(dataset, batch_size=4, shuffle=True, num_workers=workers)
        out = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for transform in (first, second, moved):
                dataset.transform = transform
                out += [images.clone() for images, _ in loader]
        return out, loader

    expected, _ = epochs(torch.utils.data.DataLoader)
    got, loader = epochs(fastload.DataLoader)
    _same(got, expected)
    assert not loader.fast_path  # the last epoch's flip before the crop: as given
