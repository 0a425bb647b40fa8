"""The generic paths (fastload/generic.py) against torch's DataLoader: the same batches from the same
workers, and the same random draws -- in the dataset, in collate_fn, in the training loop -- for the same
``torch.manual_seed``."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info
from torch.utils.data import DataLoader as TorchLoader
from torchvision.transforms import v2

import fastload
from fastload.workers import WorkerDraws

JITTER = v2.Compose([v2.RandomResizedCrop(4, antialias=True), v2.RandomHorizontalFlip(), v2.ColorJitter(0.5, 0.5)])


class Drawing(Dataset):
    """Each sample: its index, its worker, a torch.rand draw and a torchvision random transform's output."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        info = get_worker_info()
        image = torch.arange(3 * 8 * 8, dtype=torch.uint8).reshape(3, 8, 8)
        return i, -1 if info is None else info.id, torch.rand(()), JITTER(image)


def _collate_and_mix(items):
    """A collate_fn that draws (as CutMix or MixUp in a collate_fn do)."""
    batch = torch.utils.data.default_collate(items)
    return batch + [torch.randperm(len(items))]


def _epochs(loader_class, epochs: int = 2, **kwargs) -> list:
    """What a training loop sees over ``epochs`` epochs, drawing from the global generator after each batch,
    and the global generator's state after each epoch."""
    torch.manual_seed(0)
    loader = loader_class(Drawing(), **kwargs)
    seen = []
    for _ in range(epochs):
        for batch in loader:
            seen.append((batch, torch.rand(())))
        seen.append(torch.get_rng_state())
    return seen


def _assert_same(got, expected):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("workers", [0, 2])
def test_map_style_draws_order_and_global_rng_are_torchs(workers):
    kwargs = dict(batch_size=3, shuffle=True, num_workers=workers)
    got, expected = _epochs(fastload.DataLoader, **kwargs), _epochs(TorchLoader, **kwargs)
    _assert_same(got, expected)
    orders = [batch[0][0].tolist() for batch in got if isinstance(batch, tuple)]
    assert orders[:4] != orders[4:]  # shuffled anew each epoch, as torch
    if workers:  # batch k came from worker k % 2, as in torch
        assert [batch[0][1].tolist() for batch in got[:4]] == [[0] * 3, [1] * 3, [0] * 3, [1]]


class Labeled(Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, i):
        return torch.full((3, 4, 4), float(i)), i % 3


MIX = v2.RandomChoice([v2.MixUp(num_classes=3), v2.CutMix(num_classes=3)])


def _mix_up_or_cut_mix(items):
    """torchvision's recipe: MixUp or CutMix on the collated batch, in collate_fn."""
    return MIX(*torch.utils.data.default_collate(items))


def test_draws_in_collate_fn_and_without_auto_collation_are_torchs():
    for kwargs in (dict(batch_size=4, num_workers=2, collate_fn=_collate_and_mix),
                   dict(batch_size=None, num_workers=2, shuffle=True)):
        _assert_same(_epochs(fastload.DataLoader, epochs=1, **kwargs), _epochs(TorchLoader, epochs=1, **kwargs))

    def mixed(loader_class):
        torch.manual_seed(0)
        loader = loader_class(Labeled(), batch_size=4, num_workers=2, collate_fn=_mix_up_or_cut_mix)
        return list(loader) + [torch.get_rng_state()]

    _assert_same(mixed(fastload.DataLoader), mixed(TorchLoader))


def _reseed(worker_id):
    torch.manual_seed(100 + worker_id)
    torch.rand(5)


def test_worker_init_fn_reseeding_and_persistent_workers_draw_as_torchs_workers():
    """A worker's draws go on from where its worker_init_fn left its generator; persistent workers keep it
    across epochs (torch draws the base seed once and never reseeds them)."""
    for kwargs in (dict(worker_init_fn=_reseed), dict(persistent_workers=True), dict(persistent_workers=True,
                                                                                          worker_init_fn=_reseed)):
        kwargs.update(batch_size=4, shuffle=True, num_workers=2)
        _assert_same(_epochs(fastload.DataLoader, **kwargs), _epochs(TorchLoader, **kwargs))


class Safe(Drawing):
    """Mixes torch.thread_safe_generator() (the worker's generator in a thread, None in a process) with
    plain draws: both are one stream, as in a worker process."""

    def __getitem__(self, i):
        return i, torch.rand((), generator=torch.thread_safe_generator()), torch.rand(())


@pytest.mark.skipif(not hasattr(torch, "thread_safe_generator"), reason="torch before 2.14")
def test_thread_safe_generator_is_the_workers_stream():
    def run(loader_class):
        torch.manual_seed(0)
        return list(loader_class(Safe(), batch_size=3, num_workers=2))

    _assert_same(run(fastload.DataLoader), run(TorchLoader))


class Stream(IterableDataset):
    """Each worker yields its share of 0..7 with a draw each."""

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, 8, step):
            yield i, torch.rand(())


@pytest.mark.parametrize("workers", [0, 2])
def test_iterable_draws_are_torchs(workers):
    def run(loader_class):
        torch.manual_seed(0)
        loader = loader_class(Stream(), batch_size=3, num_workers=workers)
        seen = [(batch, torch.rand(())) for batch in loader]
        return seen + [torch.get_rng_state()]

    _assert_same(run(fastload.DataLoader), run(TorchLoader))


def test_worker_draws_leave_explicit_generators_and_other_devices_alone():
    mine = torch.Generator().manual_seed(3)
    ours = torch.Generator().manual_seed(4)
    with WorkerDraws(mine):
        explicit = torch.rand(3, generator=ours)
        drawn = [torch.rand(2), torch.randint(9, (2,)), torch.empty(2).uniform_(), torch.randn_like(torch.zeros(2))]
        assert torch.rand(2, device="meta").device.type == "meta"  # not given a CPU generator
    torch.testing.assert_close(explicit, torch.rand(3, generator=torch.Generator().manual_seed(4)))
    again = torch.Generator().manual_seed(3)
    expected = [torch.rand(2, generator=again), torch.randint(9, (2,), generator=again),
                torch.empty(2).uniform_(generator=again), torch.randn_like(torch.zeros(2), generator=again)]
    _assert_same(drawn, expected)


class Reseeding(Drawing):
    """Reseeds per sample (a fixed augmentation per index), reads its worker's seed, forks the RNG."""

    def __getitem__(self, i):
        seed = torch.initial_seed()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1000 + i)
            fixed = torch.rand(())
        state = torch.get_rng_state()
        drawn = torch.rand(())
        torch.set_rng_state(state)
        return i, seed, fixed, drawn, torch.rand(())


def test_reseeding_inside_a_worker_stays_in_that_worker():
    """torch.manual_seed / initial_seed / get_rng_state / set_rng_state in a loader thread act on its
    worker's generator, as in a worker process: the training loop is never reseeded."""
    def run(loader_class):
        torch.manual_seed(0)
        loader = loader_class(Reseeding(), batch_size=3, shuffle=True, num_workers=2)
        seen = [(batch, torch.rand(())) for _ in range(2) for batch in loader]
        return seen + [torch.get_rng_state()]

    got = run(fastload.DataLoader)
    _assert_same(got, run(TorchLoader))
    batches = [item[0] for item in got[:-1]]
    assert all(torch.equal(b[3], b[4]) for b in batches)  # set_rng_state put the worker's state back
    assert torch.initial_seed() == 0
