"""torchdata's state protocol: a sampler, batch sampler or dataset with ``state_dict`` / ``load_state_dict``
resumes itself, and fastload.DataLoader gives the batches torchdata's StatefulDataLoader gives, on
torchdata README's own examples.

torchdata is run in a subprocess (this file as a script): importing ``torchdata.stateful_dataloader``
replaces torch's RandomSampler and BatchSampler for the whole process, which the other tests must not see.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any, Dict

import pytest
import torch
import torch.utils.data
from hypothesis import given, settings
from hypothesis import strategies as st

import fastload
from fastload.schedule import OBJECT_FIELDS

# -- torchdata README's examples, as they are there -----------------------------------------------------


class MySampler(torch.utils.data.Sampler[int]):
    def __init__(self, high: int, seed: int, limit: int):
        self.seed, self.high, self.limit = seed, high, limit
        self.g = torch.Generator()
        self.g.manual_seed(self.seed)
        self.i = 0

    def __iter__(self):
        while self.i < self.limit:
            val = int(torch.randint(high=self.high, size=(1,), generator=self.g))
            self.i += 1
            yield val

    def load_state_dict(self, state_dict: Dict[str, Any]):
        self.i = state_dict["i"]
        self.g.set_state(state_dict["rng"])

    def state_dict(self) -> Dict[str, Any]:
        return {"i": self.i, "rng": self.g.get_state()}


class NoisyRange(torch.utils.data.Dataset):
    def __init__(self, high: int, mean: float, std: float):
        self.high, self.mean, self.std = high, torch.tensor([float(mean)]), float(std)

    def __len__(self):
        return self.high

    def __getitem__(self, idx: int) -> float:
        if not (0 <= idx < self.high):
            raise IndexError()
        x = torch.normal(self.mean, self.std)
        noise = x.item()
        return idx + noise

    def load_state_dict(self, state_dict):
        torch.set_rng_state(state_dict["rng"])

    def state_dict(self):
        return {"rng": torch.get_rng_state()}


class MyIterableDataset(torch.utils.data.IterableDataset):
    def __init__(self, high: int, seed: int):
        self.high, self.seed = high, seed
        self.g = torch.Generator()
        self.i = 0

    def __iter__(self):
        worker_info = torch.utils.data.get_worker_info()
        if worker_info is not None:
            worker_id = worker_info.id
            num_workers = worker_info.num_workers
        else:
            worker_id = 0
            num_workers = 1
        self.g.manual_seed(self.seed)
        arr = torch.randperm(self.high, generator=self.g)
        arr = arr[worker_id:self.high:num_workers]
        for idx in range(self.i, len(arr)):
            self.i += 1
            yield arr[idx]
        self.i = 0

    def state_dict(self):
        return {"i": self.i}

    def load_state_dict(self, state_dict):
        self.i = state_dict["i"]


# -- the runs compared ------------------------------------------------------------------------------------

CASES = [(kind, workers) for kind in ("map", "iterable") for workers in (0, 2)]
AFTER = 3  # batches before the checkpoint, as in the README


def _make(loader_class, kind: str, workers: int):
    if kind == "map":
        return loader_class(NoisyRange(5, 1, 1), sampler=MySampler(5, 1, 10), batch_size=2, drop_last=False,
                            num_workers=workers)
    return loader_class(MyIterableDataset(12, 0), batch_size=2, drop_last=False, num_workers=workers)


def _run(loader_class, kind: str, workers: int) -> dict:
    """The README's run: the whole epoch (checkpointed after AFTER batches), then the state restored into a
    fresh loader and into the same one, each iterated to its end."""
    torch.manual_seed(0)
    loader = _make(loader_class, kind, workers)
    seen, state = [], None
    for i, batch in enumerate(loader):
        seen.append(batch.tolist())
        if i == AFTER - 1:
            state = loader.state_dict()
    fresh = _make(loader_class, kind, workers)
    fresh.load_state_dict(state)
    resumed_fresh = [batch.tolist() for batch in fresh]
    loader.load_state_dict(state)
    resumed_same = [batch.tolist() for batch in loader]
    return {"all": seen, "fresh": resumed_fresh, "same": resumed_same}


@pytest.fixture(scope="module")
def torchdata_runs(tmp_path_factory) -> dict:
    pytest.importorskip("torchdata.stateful_dataloader")
    out = tmp_path_factory.mktemp("torchdata") / "runs.json"
    subprocess.run([sys.executable, __file__, str(out)], check=True, timeout=120)
    return json.loads(out.read_text())


@pytest.mark.parametrize("kind, workers", CASES)
def test_readme_examples_resume_as_torchdatas(torchdata_runs, kind, workers):
    expected = torchdata_runs[f"{kind}-{workers}"]
    got = _run(fastload.DataLoader, kind, workers)
    assert got["all"] == expected["all"]
    assert expected["fresh"] == expected["all"][AFTER:] and expected["same"] == expected["all"][AFTER:]
    assert got["fresh"] == expected["fresh"]
    assert got["same"] == expected["same"]


# -- what the state holds, and when ------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
def test_the_sampler_and_dataset_states_are_the_last_delivered_batchs(workers):
    """The sampler and the threads run ahead of the loop (prefetch): the state is as of the batch it got."""
    loader = fastload.DataLoader(NoisyRange(8, 1, 1), sampler=MySampler(8, 1, 16), batch_size=2,
                                 num_workers=workers, prefetch_factor=4 if workers else None)
    iterator = iter(loader)
    for _ in range(3):
        next(iterator)
    state = loader.state_dict()
    assert state["sampler_state"]["i"] == 6
    assert ("worker_states" in state) == bool(workers) and ("dataset_state" in state) == (not workers)
    if workers:  # batches 0 and 2 from worker 0, batch 1 from worker 1: each copy's own generator
        assert len(state["worker_states"]) == 2
        assert not torch.equal(state["worker_states"][0]["rng"], state["worker_states"][1]["rng"])
    list(iterator)


def test_a_state_saved_at_an_epochs_end_starts_the_next_from_the_datasets_state():
    """Without workers the dataset's state (here the global generator's) is loaded before the next epoch
    draws its base seed and samples, so it is the epoch an uninterrupted run gets next."""
    torch.manual_seed(0)
    loader = fastload.DataLoader(NoisyRange(6, 1, 1), batch_size=2)
    list(loader)
    state = loader.state_dict()
    assert state["finished"]
    expected = [batch.tolist() for batch in loader]
    torch.manual_seed(123)
    fresh = fastload.DataLoader(NoisyRange(6, 1, 1), batch_size=2)
    fresh.load_state_dict(state)
    assert [batch.tolist() for batch in fresh] == expected


def test_iterable_state_holds_each_worker_and_the_round_robin():
    loader = fastload.DataLoader(MyIterableDataset(12, 0), batch_size=2, num_workers=2, prefetch_factor=4)
    iterator = iter(loader)
    for _ in range(3):
        next(iterator)
    state = loader.state_dict()
    assert state["worker_states"] == [{"i": 4}, {"i": 2}]
    assert state["round_robin"] == {"next": 1, "ended": []}
    list(iterator)
    ended = loader.state_dict()
    assert ended["finished"] and ended["round_robin"]["ended"] == [0, 1]


def test_a_state_saved_before_iterating_resumes_the_whole_epoch():
    expected = [b.tolist() for b in _make(fastload.DataLoader, "iterable", 2)]
    loader = _make(fastload.DataLoader, "iterable", 2)
    loader.load_state_dict(_make(fastload.DataLoader, "iterable", 2).state_dict())
    assert [b.tolist() for b in loader] == expected


class _Plain(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(12))


def test_states_only_where_this_loaders_objects_have_state_refused_by_name():
    stateful = _make(fastload.DataLoader, "iterable", 2)
    iterator = iter(stateful)
    next(iterator)
    state = stateful.state_dict()
    list(iterator)
    with pytest.raises(ValueError, match="'worker_states'.*no state_dict"):
        fastload.DataLoader(_Plain(), batch_size=2, num_workers=2).load_state_dict(copy.deepcopy(state))
    with pytest.raises(ValueError, match="'worker_states'.*num_workers=0"):
        _make(fastload.DataLoader, "iterable", 0).load_state_dict(copy.deepcopy(state))
    with pytest.raises(ValueError, match="'worker_states'.*num_workers=3"):
        _make(fastload.DataLoader, "iterable", 3).load_state_dict(copy.deepcopy(state))
    missing = {k: v for k, v in state.items() if k != "round_robin"}
    with pytest.raises(ValueError, match="'round_robin' is missing"):
        _make(fastload.DataLoader, "iterable", 2).load_state_dict(missing)
    plain = fastload.DataLoader(_Plain(), batch_size=2, num_workers=2).state_dict()
    with pytest.raises(ValueError, match="'worker_states' is missing"):
        _make(fastload.DataLoader, "iterable", 2).load_state_dict(plain)


def test_num_workers_set_after_load_state_dict_is_refused_before_anything_is_applied():
    loader = _make(fastload.DataLoader, "map", 2)
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    list(iterator)
    fresh = _make(fastload.DataLoader, "map", 2)
    fresh.load_state_dict(state)
    fresh.num_workers = 0
    with pytest.raises(ValueError, match="'worker_states'"):
        iter(fresh)
    assert fresh.sampler.i == 0  # nothing applied
    fresh.num_workers = 2
    assert len(list(fresh)) == 4


def _iterable_state() -> dict:
    loader = _make(fastload.DataLoader, "iterable", 2)
    iterator = iter(loader)
    for _ in range(2):
        next(iterator)
    state = loader.state_dict()
    list(iterator)
    return state


ITERABLE_STATE = _iterable_state()
ODD = st.sampled_from([None, "no", 1, -1, 2.5, True, [], {}, [None], [{}], [{}, {}, {}], [1, 2],
                       {"next": 5, "ended": []}, {"next": 0, "ended": [0, 0]}, {"next": -1, "ended": []},
                       {"next": 1, "ended": [7]}, {"next": 0}])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(field=st.sampled_from(sorted(OBJECT_FIELDS)), value=ODD)
def test_object_fields_retyped_are_refused_by_name_or_resume(field, value):
    state = copy.deepcopy(ITERABLE_STATE)
    state[field] = value
    loader = _make(fastload.DataLoader, "iterable", 2)
    try:
        loader.load_state_dict(state)
    except ValueError as error:
        assert repr(field) in str(error), error
        assert sorted(b.item() for batch in loader for b in batch) == list(range(12))  # changed nothing
        return
    assert len(list(loader)) <= 6


if __name__ == "__main__":  # torchdata's runs, in their own process
    from torchdata.stateful_dataloader import StatefulDataLoader

    runs = {f"{kind}-{workers}": _run(StatefulDataLoader, kind, workers) for kind, workers in CASES}
    with open(sys.argv[1], "w") as file:
        json.dump(runs, file)
