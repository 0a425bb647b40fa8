"""Loader threads as torch's worker processes: worker info, worker_init_fn, per-worker datasets and RNG.

Each test runs the same script on torch's DataLoader (real worker processes)
and on fastload's (threads) and compares what user code sees.
"""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info
from torch.utils.data import DataLoader as TorchLoader

import fastload


class Squares(Dataset):
    """Map-style; records the worker info seen in __getitem__ as part of each sample."""

    def __init__(self, n: int = 12):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        return {"x": i * i, "worker": -1 if info is None else info.id,
                "workers": -1 if info is None else info.num_workers}


class Recording(Squares):
    """Each sample is what its worker's worker_init_fn saw."""

    def __getitem__(self, i):
        time.sleep(0.02)  # so that every thread takes samples
        return self.seen


def _record_init(worker_id):
    info = get_worker_info()
    np.random.seed(torch.initial_seed() % 2**32)  # PyTorch's documented seed_worker recipe
    random.seed(torch.initial_seed() % 2**32)
    # (worker_id, info.id, num_workers, info.seed, torch.initial_seed(), numpy and random after the recipe)
    info.dataset.seen = (worker_id, info.id, info.num_workers, info.seed, torch.initial_seed(),
                         float(np.random.rand()), random.random())


def _seen_in_init(loader_class):
    dataset = Recording()
    loader = loader_class(dataset, batch_size=None, num_workers=3, worker_init_fn=_record_init,
                          generator=torch.Generator().manual_seed(7))
    seen = sorted({tuple(item) for item in loader})
    return seen, dataset


def test_worker_info_and_worker_init_fn_as_in_torch_worker_processes():
    got, dataset = _seen_in_init(fastload.DataLoader)
    assert not hasattr(dataset, "seen")  # set on the threads' copies, as on the processes'
    assert got == _seen_in_init(TorchLoader)[0]
    assert [entry[:3] for entry in got] == [(0, 0, 3), (1, 1, 3), (2, 2, 3)]
    assert all(entry[3] == entry[4] for entry in got)  # torch.initial_seed() is the worker's seed in its init
    assert get_worker_info() is None  # and nothing in the training loop's thread


def test_get_worker_info_in_getitem_and_none_without_workers():
    for workers in (0, 2):
        got = [(b["worker"].tolist(), b["workers"].tolist())
               for b in fastload.DataLoader(Squares(), batch_size=3, num_workers=workers)]
        if workers == 0:
            assert all(ids == [-1] * 3 for ids, _ in got)
        else:
            assert {i for ids, _ in got for i in ids} <= {0, 1} and all(n == [2] * 3 for _, n in got)
    info = []
    loader = fastload.DataLoader(Squares(), batch_size=3, num_workers=2,
                                 worker_init_fn=lambda i: info.append(get_worker_info()))
    list(loader)
    assert {i.worker_method for i in info} == {"thread"}
    from torch.utils.data._utils import worker as torch_worker
    if not hasattr(torch_worker, "_RNG"):  # torch before 2.14: no per-worker generators to check (the other side
        assert all(getattr(i, "rng", None) is None for i in info)  # is the test below, and CI's oldest torch)
        return
    # each thread has its own generators, seeded as its worker process's would be
    assert len({i.rng.torch_generator.initial_seed() for i in info}) == 2
    assert {i.rng.torch_generator.initial_seed() for i in info} == {i.seed for i in info}


def test_worker_info_without_torchs_per_worker_generators(monkeypatch):
    """torch before 2.14 has no ``_RNG`` (the H200's torch 2.11 failed here): the threads' WorkerInfo is
    made without ``rng``, as that torch's worker processes make it."""
    from torch.utils.data._utils import worker as torch_worker
    monkeypatch.delattr(torch_worker, "_RNG", raising=False)
    info = []
    loader = fastload.DataLoader(Squares(), batch_size=3, num_workers=2,
                                 worker_init_fn=lambda i: info.append(get_worker_info()))
    assert len(list(loader)) == 4
    assert sorted(i.id for i in info) == [0, 1] and all(getattr(i, "rng", None) is None for i in info)


class Handles(Dataset):
    """Opens one 'handle' per worker in worker_init_fn, as HDF5 / LMDB datasets do."""

    def __len__(self):
        return 16

    def __getitem__(self, i):
        time.sleep(0.002)
        return self.handle


def _open_handle(worker_id):
    get_worker_info().dataset.handle = f"handle-{worker_id}-{threading.get_ident()}"


def test_each_thread_keeps_its_own_handle_on_its_dataset_copy():
    dataset = Handles()
    batches = list(fastload.DataLoader(dataset, batch_size=2, num_workers=2, worker_init_fn=_open_handle))
    handles = [h for batch in batches for h in batch]
    assert len(set(handles)) == 2  # two threads, two handles, none overwritten by the other
    assert not hasattr(dataset, "handle")  # the user's dataset object is untouched, as with processes
    for handle in set(handles):  # each handle used only by the thread that opened it
        worker = handle.split("-")[1]
        assert all(h.split("-")[1] == worker for h in handles if h == handle)


def _failing_init(worker_id):
    if worker_id == 1:
        raise KeyError("no shard for this worker")


@pytest.mark.parametrize("timeout", [0, 5])
def test_worker_init_fn_error_reaches_the_loop(timeout):
    loader = fastload.DataLoader(Squares(), batch_size=2, num_workers=2, worker_init_fn=_failing_init,
                                 timeout=timeout)
    with pytest.raises(KeyError, match="no shard for this worker") as raised:
        next(iter(loader))  # at the first batch (torch: at the first batch given to that worker)
    assert any("worker_init_fn(1)" in note for note in raised.value.__notes__)
    if timeout == 0:  # torch's, once
        torchs = iter(TorchLoader(Squares(), batch_size=2, num_workers=2, worker_init_fn=_failing_init))
        with pytest.raises(KeyError, match="no shard for this worker"):
            list(torchs)
        torchs._shutdown_workers()  # at once: dropped, torch's iterator waits 10 s in gc for its other worker


@pytest.fixture
def release():
    """An event that stuck loader calls wait on; set at the end of the test, so their threads end."""
    event = threading.Event()
    yield event
    event.set()
    deadline = time.monotonic() + 10
    while any(t.name.startswith("fastload-") and t.is_alive() for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_stuck_worker_init_fn_times_out_promptly_naming_it(release):
    loader = fastload.DataLoader(Squares(), batch_size=2, num_workers=1, timeout=0.3,
                                 worker_init_fn=lambda i: release.wait())
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="worker_init_fn"):
        next(iter(loader))
    assert time.monotonic() - started < 1.5


class Stuck(Squares):
    samples = [(f"/data/img_{i}.jpg", 0) for i in range(12)]

    def __init__(self, release):
        super().__init__()
        self.release = release

    def __getitem__(self, i):
        if i == 5:
            self.release.wait()
        return i


def test_a_stuck_batch_times_out_promptly_naming_the_stage_and_the_file(release):
    loader = fastload.DataLoader(Stuck(release), batch_size=4, num_workers=2, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"sample 5 \(/data/img_5.jpg\) in stage 'dataset\[i\]'"):
        list(loader)
    assert time.monotonic() - started < 1.5


class Broken(Squares):
    def __getitem__(self, i):
        if i == 7:
            raise ValueError("bad record")
        return i


def _bad_collate(items):
    raise TypeError("cannot batch these")


def _outcomes(loader) -> list:
    """Each next() of an epoch: the batch, or the error's type; as a script that catches errors goes on."""
    outcomes, iterator = [], iter(loader)
    while True:
        try:
            outcomes.append(next(iterator).tolist())
        except StopIteration:
            return outcomes
        except Exception as error:  # noqa: BLE001
            outcomes.append(type(error).__name__)


@pytest.mark.parametrize("workers", [0, 2])
def test_after_a_failed_batch_the_epoch_goes_on_as_torchs(workers):
    got = _outcomes(fastload.DataLoader(Broken(), batch_size=2, num_workers=workers))
    assert got == _outcomes(TorchLoader(Broken(), batch_size=2, num_workers=workers))
    assert got == [[0, 1], [2, 3], [4, 5], "ValueError", [8, 9], [10, 11]]


@pytest.mark.parametrize("workers", [0, 2])
def test_dataset_and_collate_errors_reach_the_loop_with_their_sample(workers):
    with pytest.raises(ValueError, match="bad record") as raised:
        list(fastload.DataLoader(Broken(), batch_size=4, num_workers=workers))
    assert any("sample 7" in note for note in raised.value.__notes__)
    with pytest.raises(TypeError, match="cannot batch") as raised:
        list(fastload.DataLoader(Squares(), batch_size=4, num_workers=workers, collate_fn=_bad_collate))
    assert any("collate_fn" in note and "[0, 1, 2, 3]" in note for note in raised.value.__notes__)


def test_worker_init_fn_cannot_disturb_the_loops_rng():
    """seed_worker reseeds numpy and random; with threads that must not make the loop's draws repeat."""

    def seed_worker(worker_id):
        worker_seed = torch.initial_seed() % 2**32
        np.random.seed(worker_seed)
        random.seed(worker_seed)

    def run(loader_class):
        torch.manual_seed(3)
        np.random.seed(3)
        random.seed(3)
        loader = loader_class(Squares(8), batch_size=4, shuffle=True, num_workers=2, worker_init_fn=seed_worker)
        draws = []
        for _ in range(3):
            for batch in loader:
                draws.append((batch["x"].tolist(), float(torch.rand(())), float(np.random.rand()),
                              random.random()))
        return draws

    got = run(fastload.DataLoader)
    assert got == run(TorchLoader)
    assert len({d[2] for d in got}) == len(got)  # the loop's numpy draws never repeat


def test_worker_init_fn_seeding_torch_leaves_the_loops_cuda_seed_alone():
    """torch.manual_seed in worker_init_fn (Lightning's does it) also seeds CUDA: its generators, or the
    seed calls queued for CUDA's initialization, are put back as the loop had them."""
    def reseed(worker_id):
        torch.manual_seed(1234 + worker_id)

    torch.manual_seed(5)
    if torch.cuda.is_initialized():
        before = torch.cuda.get_rng_state_all()
        list(fastload.DataLoader(Squares(), batch_size=4, num_workers=2, worker_init_fn=reseed))
        assert all(torch.equal(a, b) for a, b in zip(before, torch.cuda.get_rng_state_all()))
    else:
        before = list(torch.cuda._lazy_seed_tracker.get_calls())
        list(fastload.DataLoader(Squares(), batch_size=4, num_workers=2, worker_init_fn=reseed))
        assert torch.cuda._lazy_seed_tracker.get_calls() == before
    assert torch.initial_seed() == 5


def test_persistent_workers_as_torchs():
    """torch draws the base seed once for persistent workers, and runs worker_init_fn once per worker, whose
    dataset copy keeps its state across epochs."""
    def run(loader_class):
        torch.manual_seed(0)
        loader = loader_class(Counted(), batch_size=3, shuffle=True, num_workers=2, persistent_workers=True,
                              worker_init_fn=_count_init)
        epochs = []
        for _ in range(3):
            batches = list(loader)
            epochs.append(([i for b in batches for i in b[0].tolist()], sorted({n for b in batches
                                                                               for n in b[1].tolist()})))
            epochs.append(torch.get_rng_state())
        return epochs

    got, expected = run(fastload.DataLoader), run(TorchLoader)
    assert got[0::2] == expected[0::2]
    assert all(torch.equal(a, b) for a, b in zip(got[1::2], expected[1::2]))
    assert got[4][1] == [1]  # worker_init_fn ran once per worker: every copy counted one init


class Counted(Squares):
    inits = 0

    def __getitem__(self, i):
        time.sleep(0.005)
        return i, self.inits


def _count_init(worker_id):
    get_worker_info().dataset.inits += 1


class ByWorker(IterableDataset):
    """Shards itself by worker info, as torch's documentation shows."""

    def __init__(self, start=0, end=23):
        self.start, self.end = start, end

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.start, self.end))
        per_worker = -(-(self.end - self.start) // info.num_workers)
        start = self.start + info.id * per_worker
        return iter(range(start, min(start + per_worker, self.end)))


class Unsharded(IterableDataset):
    def __iter__(self):
        yield from range(10)


class SelfIterator(IterableDataset):
    """Returns itself from __iter__ (state on the object): each worker must iterate its own copy."""

    def __iter__(self):
        self.i = 0
        return self

    def __next__(self):
        self.i += 1
        if self.i > 7:
            raise StopIteration
        return self.i


@pytest.mark.parametrize("dataset", [ByWorker(), ByWorker(0, 5), Unsharded(), SelfIterator()],
                         ids=["by-worker", "fewer-items-than-workers-times-batch", "unsharded", "self-iterator"])
@pytest.mark.parametrize("workers", [1, 3])
def test_iterable_dataset_with_workers_gives_torchs_batches(dataset, workers):
    for kwargs in (dict(batch_size=4), dict(batch_size=4, drop_last=True), dict(batch_size=None)):
        expected = [torch.as_tensor(b).tolist() for b in TorchLoader(dataset, num_workers=workers, **kwargs)]
        got = [torch.as_tensor(b).tolist() for b in fastload.DataLoader(dataset, num_workers=workers, **kwargs)]
        assert got == expected, kwargs


def test_iterable_dataset_error_names_the_worker():
    class Failing(IterableDataset):
        def __iter__(self):
            yield 1
            raise OSError("shard unreadable")

    with pytest.raises(OSError, match="shard unreadable") as raised:
        list(fastload.DataLoader(Failing(), batch_size=2, num_workers=2))
    assert any("worker" in note for note in raised.value.__notes__)


class SeededInIter(IterableDataset):
    """torchdata's IterableDataset example: seeds its own generator in __iter__, shards a permutation by
    worker. Threads sharing that generator race between manual_seed and randperm."""

    def __init__(self, high=12, seed=0):
        self.high, self.seed = high, seed
        self.g = torch.Generator()
        self.generators = []  # (worker id, the generator its copy draws from)

    def __iter__(self):
        info = get_worker_info()
        worker_id, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
        self.generators.append((worker_id, self.g))
        self.g.manual_seed(self.seed)
        time.sleep(0.001)  # room for the other thread's manual_seed or randperm, as a busy machine gives
        arr = torch.randperm(self.high, generator=self.g)
        yield from arr[worker_id:self.high:num_workers].tolist()


def _round_robin(high, seed, workers, batch_size):
    """What torch's worker processes give: each worker's slice of the same permutation, batch by batch in turn."""
    perm = torch.randperm(high, generator=torch.Generator().manual_seed(seed)).tolist()
    shards = [perm[w::workers] for w in range(workers)]
    rounds = max(-(-len(shard) // batch_size) for shard in shards)
    return [shard[r * batch_size:(r + 1) * batch_size] for r in range(rounds) for shard in shards
            if shard[r * batch_size:(r + 1) * batch_size]]


def test_a_generator_the_dataset_holds_is_each_threads_own():
    expected = _round_robin(12, 0, 2, 2)
    for _ in range(20):
        dataset = SeededInIter()
        got = [batch.tolist() for batch in fastload.DataLoader(dataset, batch_size=2, num_workers=2)]
        assert sorted(sum(got, [])) == list(range(12))  # no sample twice, none lost
        assert got == expected
        copies = [g for _, g in dataset.generators]
        assert len({id(g) for g in copies} | {id(dataset.g)}) == 3  # each thread's own, not the dataset's


class _Jitter:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.numpy = np.random.default_rng(seed)

    def __call__(self, x):
        return x, self.rng.random(), float(self.numpy.random())


class WithTransform(Dataset):
    def __init__(self):
        self.transform = _Jitter(5)

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return self.transform(i)


def test_generators_one_level_down_are_copied_in_their_state_as_a_worker_process_gets_them():
    """torch pickles the dataset to each worker process: every worker starts from the generators' state as
    the iterator started, and the loop's own copy never moves."""
    for loader_class in (TorchLoader, fastload.DataLoader):
        dataset = WithTransform()
        dataset.transform.rng.random()  # the state the workers copy is the current one, not the seed's
        before = dataset.transform.rng.getstate(), dataset.transform.numpy.bit_generator.state
        got = list(loader_class(dataset, batch_size=None, num_workers=2))
        first = random.Random(5)
        first.random()
        draw = first.random()
        assert got[0][1] == got[1][1] == draw  # worker 0's and worker 1's first draws: the same state copied
        assert got[0][2] == got[1][2]
        assert (dataset.transform.rng.getstate(), dataset.transform.numpy.bit_generator.state) == before
