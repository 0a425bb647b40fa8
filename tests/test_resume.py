"""Exact mid-epoch resume: state_dict() after k batches, load_state_dict() in a fresh loader or process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torchvision
from torchvision import transforms as v1

import fastload
from fastload import transforms as T

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
TRAIN = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                   T.Normalize(MEAN, STD)])
_ELASTIC = T.Compose([T.RandomResizedCrop(12), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True)])


def _source_loader(root, workers=2, prefetch=None, **options):
    source = fastload.ImageFolder(root, TRAIN, shuffle=True, seed=7, rank=options.pop("rank", 0),
                                  world_size=options.pop("world_size", 1))
    return fastload.DataLoader(source, batch_size=4, num_workers=workers, prefetch_factor=prefetch, **options)


def _epochs(loader, count):
    return [[(images.clone(), labels.clone()) for images, labels in loader] for _ in range(count)]


def _equal(batches, expected):
    assert len(batches) == len(expected)
    for (images, labels), (ref_images, ref_labels) in zip(batches, expected):
        assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)


@pytest.mark.parametrize("k", [0, 1, 3, 5])
@pytest.mark.parametrize("workers, prefetch", [(0, None), (3, 4)])
def test_source_resume_gives_the_remaining_batches_then_the_next_epoch(image_folder, k, workers, prefetch):
    uninterrupted = _epochs(_source_loader(image_folder), 3)
    first = _source_loader(image_folder)
    _epochs(first, 1)
    for i, _ in enumerate(first):  # epoch 1, interrupted after k batches
        if i + 1 == k:
            break
    state = first.state_dict() if k else {**first.state_dict(), "batches": 0}
    if not k:  # interrupted before the first batch of epoch 1
        state.update(epoch=1, finished=False)
    first.close()
    resumed = _source_loader(image_folder, workers, prefetch)
    resumed.load_state_dict(json.loads(json.dumps(state)))  # plain values: survives JSON
    _equal([(x.clone(), y.clone()) for x, y in resumed], uninterrupted[1][k:])
    _equal([(x.clone(), y.clone()) for x, y in resumed], uninterrupted[2])


def test_state_after_a_finished_epoch_starts_the_next(image_folder):
    uninterrupted = _epochs(_source_loader(image_folder), 2)
    first = _source_loader(image_folder)
    _epochs(first, 1)
    state = first.state_dict()
    assert state["finished"] and state["epoch"] == 0
    resumed = _source_loader(image_folder, workers=1)
    resumed.load_state_dict(state)
    _equal(_epochs(resumed, 1)[0], uninterrupted[1])


@pytest.mark.parametrize("rank", [0, 1])
def test_each_rank_resumes_its_own_shard(image_folder, rank):
    uninterrupted = _epochs(_source_loader(image_folder, rank=rank, world_size=2), 1)[0]
    first = _source_loader(image_folder, rank=rank, world_size=2)
    iterator = iter(first)
    next(iterator), next(iterator)
    state = first.state_dict()
    first.close()
    resumed = _source_loader(image_folder, rank=rank, world_size=2)
    resumed.load_state_dict(state)
    _equal([(x.clone(), y.clone()) for x, y in resumed], uninterrupted[2:])


@pytest.mark.parametrize("generator", [True, False])
def test_torchvision_dataset_with_torch_sampler_resumes_exactly(image_folder, generator):
    """RandomSampler's permutation comes back from the saved RNG state, without touching the global RNG."""
    transform = v1.Compose([v1.RandomResizedCrop(16), v1.ToTensor()])

    def loader(workers):
        dataset = torchvision.datasets.ImageFolder(image_folder, transform)
        return fastload.DataLoader(dataset, batch_size=5, shuffle=True, num_workers=workers, seed=3,
                                   generator=torch.Generator().manual_seed(11) if generator else None,
                                   draws="fastload")  # the pixels of another num_workers: fastload's streams

    torch.manual_seed(0)
    reference = loader(2)
    uninterrupted = _epochs(reference, 2)[1]
    torch.manual_seed(0)
    first = loader(2)
    _epochs(first, 1)
    iterator = iter(first)
    next(iterator), next(iterator)
    state = first.state_dict()
    first.close()
    torch.manual_seed(1234)  # a fresh process: the global RNG is elsewhere
    global_before = torch.get_rng_state()
    resumed = loader(1)
    resumed.load_state_dict(state)
    _equal([(x.clone(), y.clone()) for x, y in resumed], uninterrupted[2:])
    if not generator:
        assert torch.equal(torch.get_rng_state(), global_before)


def test_resume_in_a_fresh_process_is_pixel_exact(image_folder, tmp_path):
    script = f'''
import json, sys, torch, fastload
from fastload import transforms as T
source = fastload.ImageFolder({str(image_folder)!r}, T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(),
    T.ToDtype(torch.float32, scale=True)]), shuffle=True, seed=5)
loader = fastload.DataLoader(source, batch_size=3, num_workers=int(sys.argv[1]))
if sys.argv[2] == "save":
    for i, _ in enumerate(loader):
        if i == 2:
            break
    json.dump(loader.state_dict(), open(sys.argv[3], "w"))
    loader.close()
elif sys.argv[2] == "load":
    loader.load_state_dict(json.load(open(sys.argv[3])))
sums = [float(images.double().sum()) for images, _ in loader]
print(json.dumps(sums))
'''
    path, state = tmp_path / "run.py", tmp_path / "state.json"
    path.write_text(script)

    def run(*args):
        result = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.strip().splitlines()[-1])

    full = run("2", "full", "")
    run("2", "save", str(state))
    assert run("1", "load", str(state)) == full[3:]


def test_load_state_dict_refuses_a_different_dataset_or_batch_size(image_folder):
    state = _source_loader(image_folder).state_dict()
    other = fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=5)
    with pytest.raises(ValueError, match="batch_size=4 over 23 samples"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="not a fastload DataLoader state"):
        other.load_state_dict({"epoch": 1})
    torch.save(state, "/dev/null")  # a checkpoint can hold it


def _ranks(world: int, *args) -> None:
    """``tests/distributed/elastic.py`` in ``world`` processes at once, as torchrun would start them."""
    script = str(Path(__file__).parent / "distributed" / "elastic.py")
    processes = [subprocess.Popen([sys.executable, script, *map(str, args)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  env={**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world),
                                       "OMP_NUM_THREADS": "1"}) for rank in range(world)]
    for process in processes:
        output = process.communicate(timeout=240)[0]
        assert process.returncode == 0, output[-3000:]


@pytest.mark.parametrize("before, after, batches", [(4, 3, 1), (2, 5, 2)])
def test_elastic_resume_at_another_world_size_in_real_processes(numbered_list, tmp_path, before, after, batches):
    """A state saved by 4 (2) ranks after k batches, resumed by 3 (5): the rest of the epoch, each sample once
    (but for the padding that makes the ranks' counts equal) and with its own augmentation; then a whole
    epoch at the new world size."""
    _ranks(before, numbered_list, tmp_path, "save", batches)
    _ranks(after, numbered_list, tmp_path, "resume", batches)
    saved = [torch.load(tmp_path / f"save-{rank}.pt")[0] for rank in range(before)]
    resumed = [torch.load(tmp_path / f"resume-{rank}.pt") for rank in range(after)]
    reference = {}  # the uninterrupted epochs on one rank: each sample's image
    for epoch in range(2):
        source = fastload.FileList(numbered_list, transform=_ELASTIC, shuffle=True, seed=11, rank=0, world_size=1)
        loader = fastload.DataLoader(source, batch_size=2, num_workers=2)
        loader.set_epoch(epoch)
        reference[epoch] = {label: image for images, labels in loader for label, image in zip(labels.tolist(),
                                                                                                images)}
    size = len(reference[0])
    assert all(len(delivered) == 2 * batches for delivered in saved)
    first = [label for delivered in saved for label, _ in delivered]
    rest = [[label for label, _ in epochs[0]] for epochs in resumed]
    assert len({len(labels) for labels in rest}) == 1  # the ranks step together
    got = [label for labels in rest for label in labels]
    assert not set(got) & set(first) and set(got) | set(first) == set(range(size))
    assert len(got) - len(set(got)) < after  # the padding
    next_epoch = [label for epochs in resumed for label, _ in epochs[1]]
    assert set(next_epoch) == set(range(size)) and len(next_epoch) == after * -(-size // after)
    for epoch, delivered in [(0, pair) for pair in saved + [epochs[0] for epochs in resumed]] + \
            [(1, epochs[1]) for epochs in resumed]:
        for label, image in delivered:
            assert torch.equal(image, reference[epoch][label]), (epoch, label)


class _FailsAt(torch.utils.data.Dataset):
    """Sample i is tensor([i]); sample ``bad`` raises."""

    def __init__(self, size: int, bad: int):
        self.size, self.bad = size, bad

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        if index == self.bad:
            raise ValueError(f"sample {index} is broken")
        return torch.tensor([index])


def _through_a_failure(loader, after: int) -> list:
    """The batches a loop that catches the failed batch's error and goes on sees, ``after`` of them past it."""
    seen, iterator, failed = [], iter(loader), 0
    while failed == 0 or len(seen) < failed + after:
        try:
            seen.append(next(iterator).flatten().tolist())
        except ValueError:
            failed = len(seen)
    return seen, iterator


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failed_batch_counts_as_consumed_as_under_torch(workers):
    """torch's iterator draws a failed batch's indices before the error reaches the loop, so the loop goes on
    with the next batch; a state saved after that resumes after it, never repeating a delivered batch."""
    dataset = _FailsAt(20, bad=5)
    expected, rest = _through_a_failure(torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=workers), 1)
    assert expected == [[0, 1], [2, 3], [6, 7]]
    list(rest)  # torch's workers stop at its epoch's end (dropped unfinished, its iterator's gc waits 10 s)
    loader = fastload.DataLoader(dataset, batch_size=2, num_workers=workers)
    seen, iterator = _through_a_failure(loader, 1)
    assert seen == expected
    state = loader.state_dict()
    del iterator
    resumed = fastload.DataLoader(dataset, batch_size=2, num_workers=workers)
    resumed.load_state_dict(state)
    assert [batch.flatten().tolist() for batch in resumed][:2] == [[8, 9], [10, 11]]


def test_resume_refuses_other_samples_or_order_settings_saying_which(image_folder, tmp_path):
    """A folder of the same count with one file swapped for another, a file replaced under its name by one
    of another size, or another shuffle: the saved position would deliver samples twice and others never,
    so load_state_dict refuses, naming what differs. A state without its fingerprint is refused naming it;
    one whose fingerprint is None (how to load a state of an older fastload) loads with a warning."""
    import shutil
    import warnings

    from fastload.fingerprint import ResumeStateWarning
    root = tmp_path / "data"
    shutil.copytree(image_folder, root)
    loader = _source_loader(str(root), workers=0)
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    del iterator
    _source_loader(str(root), workers=0).load_state_dict(state)  # the same data and settings: taken

    files = sorted(p for p in root.rglob("*") if p.is_file())
    renamed = files[3].with_name("zz_" + files[3].name)  # same count, another name: a swapped file
    files[3].rename(renamed)
    with pytest.raises(ValueError, match="the sample list"):
        _source_loader(str(root), workers=0).load_state_dict(state)
    renamed.rename(files[3])
    files[5].write_bytes(files[5].read_bytes() + b"\0" * 10)  # replaced under its name
    with pytest.raises(ValueError, match="sizes"):
        _source_loader(str(root), workers=0).load_state_dict(state)

    tensors = torch.utils.data.TensorDataset(torch.arange(20))
    shuffled = fastload.DataLoader(tensors, batch_size=4, shuffle=True)
    with pytest.raises(ValueError, match="shuffle: saved True, now False"):
        fastload.DataLoader(tensors, batch_size=4, shuffle=False).load_state_dict(shuffled.state_dict())
    old = {key: value for key, value in shuffled.state_dict().items() if key != "fingerprint"}
    with pytest.raises(ValueError, match="'fingerprint' is missing"):
        fastload.DataLoader(tensors, batch_size=4, shuffle=True).load_state_dict(old)
    old["fingerprint"] = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fastload.DataLoader(tensors, batch_size=4, shuffle=True).load_state_dict(old)
    assert any(issubclass(w.category, ResumeStateWarning) for w in caught)


class _DrawingSampler(torch.utils.data.Sampler[int]):
    """A sampler with its own position and generator and torchdata's state protocol (and a length)."""

    def __init__(self, size: int):
        self.size, self.i, self.g = size, 0, torch.Generator().manual_seed(5)

    def __len__(self):
        return self.size

    def __iter__(self):
        while self.i < self.size:
            self.i += 1
            yield int(torch.randint(self.size, (1,), generator=self.g))
        self.i = 0

    def state_dict(self):
        return {"i": self.i, "g": self.g.get_state()}

    def load_state_dict(self, state):
        self.i = state["i"]
        self.g.set_state(state["g"])


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_sampler_on_the_fast_path_resumes_itself_as_of_the_delivered_batch(image_folder, workers):
    """The fast path draws batches ahead too; the sampler's state saved is the one as the delivered batch's
    indices were drawn, and it resumes from it (not fast-forwarded: that would draw past its position)."""
    transform = v1.Compose([v1.Resize(20), v1.CenterCrop(16), v1.ToTensor()])

    def loader():
        dataset = torchvision.datasets.ImageFolder(image_folder, transform)
        return fastload.DataLoader(dataset, batch_size=4, sampler=_DrawingSampler(len(dataset)),
                                   num_workers=workers, prefetch_factor=3 if workers else None)

    first = loader()
    assert first.fast_path
    iterator = iter(first)
    next(iterator), next(iterator)
    state = first.state_dict()
    assert state["sampler_state"]["i"] == 8
    rest = [(x.clone(), y.clone()) for x, y in iterator]
    assert len(rest) == 4
    resumed = loader()
    resumed.load_state_dict(state)
    _equal([(x.clone(), y.clone()) for x, y in resumed], rest)
