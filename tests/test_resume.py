"""Exact mid-epoch resume: state_dict() after k batches, load_state_dict() in a fresh loader or process."""

import json
import subprocess
import sys

import pytest
import torch
import torchvision
from torchvision import transforms as v1

import fastload
from fastload import transforms as T

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
TRAIN = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                   T.Normalize(MEAN, STD)])


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
                                   generator=torch.Generator().manual_seed(11) if generator else None)

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
