"""The generic paths: any dataset torch's DataLoader takes, with torch's samples and batches.

``MapPath``: batch k goes to loader thread ``k % num_workers``, as torch
gives it to worker ``k % num_workers``; the thread calls ``dataset[i]`` for
its samples in order (or ``__getitems__``, or a fastload source's ``load``)
on its own copy of the dataset (``fastload.workers``), and ``collate_fn``
makes the batch.
``IterablePath``: torch's rule for an IterableDataset with workers -- each
worker iterates its own copy and batches what it yields, and the loader
takes one batch from each worker in turn, skipping workers that ran out;
without workers the training loop's thread iterates it once.

In a loader thread, user code (``dataset[i]``, the iterator, ``collate_fn``)
runs under ``workers.worker_draws()``: its torch draws come from that
worker's generator, in the order a worker process makes them, so they are
torch's draws, run to run, and the training loop's generator advances only
as torch's does (the sampler's seed and the base seed, once an epoch).

A dataset with ``state_dict`` and ``load_state_dict`` (torchdata's
protocol) is asked for its state in the thread that made each batch, right
after it (its copy's, under its worker draws, as torchdata's worker
processes do); the state becomes the resume state's as the batch is taken
in order (``Job.taken``), so a saved state is the one as of the last batch
the training loop got, not the threads' further ahead. A resumed epoch's
round robin goes on where the saved one was (the next worker, and which
ran out) instead of at worker 0.

collate_fn and pin_memory are read as the epoch starts, as torch's
iterator reads them: one set during an epoch applies from the next.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Iterator

from .deliver import collate, to_device
from .thread_pool import END, SKIP, Job, LoaderPath, Stages, batches_ahead
from .sources import Source
from .schedule import stateful
from .workers import current_dataset, dataset_state, worker_draws


def describe(dataset, index) -> str:
    """'sample 5', with its file when the dataset lists (path, label) samples as torchvision's folders do."""
    samples = getattr(dataset, "samples", None)
    try:
        return f"sample {index} ({samples[index][0]})"
    except (TypeError, IndexError, KeyError):
        return f"sample {index}"


class MapPath(LoaderPath):
    """A map-style dataset (or a fastload source whose transform does not fuse), as torch fetches it."""

    fast = on_device = False
    plan = None

    def __init__(self, loader):
        self.loader = loader

    def stages(self, batches: Iterator[list[tuple[int, int]]], epoch: int, order) -> Stages:
        loader = self.loader
        workers = loader.num_workers
        first = loader.schedule.position["batches"]  # a resumed epoch's round robin goes on from there
        return Stages(self._jobs(batches, workers, _Settings(loader), first), in_flight=batches_ahead(loader),
                      pinned=bool(workers))

    def _jobs(self, batches, workers: int, settings: "_Settings", first: int) -> Iterator[Job]:
        loader, dataset = self.loader, self.loader.dataset
        getitems = getattr(dataset, "__getitems__", None) if not isinstance(dataset, Source) else None
        for k, batch in enumerate(batches, first):
            indices = [index for _, index in batch]
            worker = k % workers if workers else None  # torch's round robin over its (all active) workers
            noted = _Noted(loader.schedule, worker) if settings.stateful else None
            if not loader._auto_collation:
                job = Job([_Load(dataset, indices[0], loader.stats)], _Collate(settings, indices, 1, single=True),
                          what=[describe(dataset, indices[0])], worker=worker)
            elif getitems:
                job = Job([_LoadMany(dataset, indices, loader.stats)],
                          _Collate(settings, indices, len(indices), single=True),
                          what=[f"samples {indices}"], worker=worker)
            else:
                job = Job([_Load(dataset, index, loader.stats) for index in indices],
                          _Collate(settings, indices, len(indices)),
                          what=[describe(dataset, index) for index in indices], worker=worker)
            if noted is not None:
                job.finish.noted, job.taken = noted, noted.taken
            yield job


class _Settings:
    """What an epoch's batches are made with, read as it starts (torch's iterator reads them so)."""

    def __init__(self, loader):
        self.loader, self.collate_fn, self.pin_memory = loader, loader.collate_fn, loader.pin_memory
        self.stateful = stateful(loader.dataset)


class _Noted:
    """A stateful dataset's state after one batch, noted in the thread that made it; it becomes the resume
    state's when the batch is taken in order (``taken``, in the training loop's thread)."""

    def __init__(self, schedule, worker: int | None):
        self.schedule, self.worker = schedule, worker
        self.state, self.ended, self.made = None, False, False

    def note(self, dataset, ended: bool = False) -> None:
        self.state, self.ended, self.made = dataset_state(dataset), ended, True

    def taken(self) -> None:
        if self.made:  # a batch that failed has no state: the last one stands, as under torchdata
            self.schedule.batch_taken(self.worker, self.state, self.ended)


class _Load:
    """A task: ``dataset[index]`` on the loader thread's copy of the dataset (its time counts as ``read``)."""

    def __init__(self, dataset, index, stats):
        self.dataset, self.index, self.stats = dataset, index, stats

    def __call__(self, report) -> Any:
        dataset = current_dataset(self.dataset)
        what = describe(dataset, self.index)
        report("dataset[i]", what)
        started = time.perf_counter()
        try:
            with worker_draws():
                sample = self.fetch(dataset)
        except Exception as error:
            error.add_note(f"fastload: raised while loading {what} of {type(dataset).__name__} "
                           f"in loader thread {threading.current_thread().name}")
            raise
        self.stats.add("read", time.perf_counter() - started)
        return sample

    def fetch(self, dataset) -> Any:
        return dataset.load(self.index) if isinstance(dataset, Source) else dataset[self.index]


class _LoadMany(_Load):
    """A task: ``dataset.__getitems__(indices)``, torch's batched fetch."""

    def fetch(self, dataset) -> Any:
        return dataset.__getitems__(self.index)


class _Collate:
    """A batch's finish: ``collate_fn``, then to the loader's device; counted in stats; then, for a stateful
    dataset, its state noted (``noted``).

    ``what``: the batch's sample indices (or a description), named in an
    error; ``count``: its samples; ``single``: the one result is the batch's
    input (a single sample, or ``__getitems__``'s list).
    """

    noted: _Noted | None = None

    def __init__(self, settings: _Settings, what, count: int, single: bool = False):
        self.settings, self.what, self.count, self.single = settings, what, count, single

    def __call__(self, results: list) -> Any:
        settings = self.settings
        loader = settings.loader
        started = time.perf_counter()
        with worker_draws():  # a collate_fn that draws (CutMix, MixUp) draws as in its worker
            batch = collate(settings.collate_fn, results[0] if self.single else results,
                            f"the batch of samples {self.what}" if isinstance(self.what, list) else self.what)
        if self.noted is not None:
            self.noted.note(loader.dataset)
        batch = to_device(batch, loader.device, settings.pin_memory)
        loader.stats.add("copy", time.perf_counter() - started)
        loader.stats.count_batch(self.count)
        return batch


class IterablePath(LoaderPath):
    """A generic IterableDataset, by torch's rule for workers (see the module docstring)."""

    fast = on_device = False
    plan = None

    def __init__(self, loader):
        self.loader = loader

    def stages(self, batches, epoch: int, order) -> Stages:
        loader = self.loader
        workers = loader.num_workers
        streams = _WorkerStreams(loader, max(workers, 1))
        start, ended = streams.resumed_round_robin()
        streams.active -= ended
        return Stages(self._jobs(streams, workers, start), in_flight=batches_ahead(loader), pinned=bool(workers))

    def _jobs(self, streams: "_WorkerStreams", workers: int, start: int) -> Iterator[Job]:
        stateful_copies = streams.settings.stateful
        if not workers:
            while streams.active:
                noted = _Noted(self.loader.schedule, None) if stateful_copies else None
                yield Job([_Pull(streams, 0, noted)], _first, taken=noted.taken if noted else None)
            return
        for worker in itertools.islice(itertools.cycle(range(workers)), start, None):
            if not streams.active:
                return
            if worker in streams.active:
                noted = _Noted(self.loader.schedule, worker) if stateful_copies else None
                yield Job([_Pull(streams, worker, noted)], _first, worker=worker,
                          what=[f"{type(self.loader.dataset).__name__} in worker {worker}"],
                          taken=noted.taken if noted else None)


def _first(results: list) -> Any:
    return results[0]


class _WorkerStreams:
    """The per-worker iterators of an epoch and which of them still yield."""

    def __init__(self, loader, workers: int):
        self.loader = loader
        self.settings = _Settings(loader)
        self.iterators: list = [None] * workers
        self.batches = [0] * workers
        self.active = set(range(workers))

    def resumed_round_robin(self) -> tuple[int, set[int]]:
        """Where a resumed epoch's round robin goes on (the next worker, the ones that ran out); (0, none)
        for any other epoch."""
        saved = self.loader.schedule.position["objects"].get("round_robin")
        return (0, set()) if saved is None else (saved["next"], set(saved["ended"]))

    def pull(self, worker: int, report, noted: _Noted | None = None) -> Any:
        """The next batch of ``worker``'s iterator (made in its thread, so it sees its worker info), or
        SKIP once that iterator has run out (torch's worker then stops, and the others go on); ``noted``
        takes a stateful dataset copy's state just after."""
        loader = self.loader
        if worker not in self.active:
            return SKIP
        dataset = current_dataset(loader.dataset)
        what = f"batch {self.batches[worker]} of {type(dataset).__name__} in worker {worker}"
        report("iterate", what)
        started = time.perf_counter()
        wanted = loader.batch_size if loader._auto_collation else 1
        items = []
        try:
            with worker_draws():
                if self.iterators[worker] is None:
                    self.iterators[worker] = iter(dataset)
                while len(items) < wanted:  # next(), as torch's fetcher: islice would call iter() again
                    item = next(self.iterators[worker], END)
                    if item is END:
                        break
                    items.append(item)
        except Exception as error:
            error.add_note(f"fastload: raised while iterating {what} "
                           f"(loader thread {threading.current_thread().name})")
            raise
        loader.stats.add("read", time.perf_counter() - started)
        ended = len(items) < wanted
        if ended:
            self.active.discard(worker)
        if not items or (ended and loader.drop_last and loader._auto_collation):
            if noted is not None:
                noted.note(loader.dataset, ended)
            return SKIP
        self.batches[worker] += 1
        finish = _Collate(self.settings, what, len(items), single=not loader._auto_collation)
        batch = finish([items[0]] if not loader._auto_collation else items)
        if noted is not None:
            noted.note(loader.dataset, ended)
        return batch


class _Pull:
    """A task: the next batch of one worker's iterator."""

    def __init__(self, streams: _WorkerStreams, worker: int, noted: _Noted | None = None):
        self.streams, self.worker, self.noted = streams, worker, noted

    def __call__(self, report) -> Any:
        return self.streams.pull(self.worker, report, self.noted)
