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
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any, Iterator

from .deliver import collate, to_device
from .thread_pool import END, SKIP, Job, LoaderPath, Stages, batches_ahead
from .sources import Source
from .workers import current_dataset, worker_draws


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
        return Stages(self._jobs(batches, workers), in_flight=batches_ahead(loader), pinned=bool(workers))

    def _jobs(self, batches, workers: int) -> Iterator[Job]:
        loader, dataset = self.loader, self.loader.dataset
        getitems = getattr(dataset, "__getitems__", None) if not isinstance(dataset, Source) else None
        for k, batch in enumerate(batches):
            indices = [index for _, index in batch]
            worker = k % workers if workers else None  # torch's round robin over its (all active) workers
            if not loader._auto_collation:
                yield Job([_Load(dataset, indices[0], loader.stats)], _Collate(loader, indices, 1, single=True),
                          what=[describe(dataset, indices[0])], worker=worker)
            elif getitems:
                yield Job([_LoadMany(dataset, indices, loader.stats)],
                          _Collate(loader, indices, len(indices), single=True),
                          what=[f"samples {indices}"], worker=worker)
            else:
                yield Job([_Load(dataset, index, loader.stats) for index in indices],
                          _Collate(loader, indices, len(indices)),
                          what=[describe(dataset, index) for index in indices], worker=worker)


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
    """A batch's finish: ``collate_fn``, then to the loader's device; counted in stats.

    ``what``: the batch's sample indices (or a description), named in an
    error; ``count``: its samples; ``single``: the one result is the batch's
    input (a single sample, or ``__getitems__``'s list).
    """

    def __init__(self, loader, what, count: int, single: bool = False):
        self.loader, self.what, self.count, self.single = loader, what, count, single

    def __call__(self, results: list) -> Any:
        loader = self.loader
        started = time.perf_counter()
        with worker_draws():  # a collate_fn that draws (CutMix, MixUp) draws as in its worker
            batch = collate(loader.collate_fn, results[0] if self.single else results,
                            f"the batch of samples {self.what}" if isinstance(self.what, list) else self.what)
        batch = to_device(batch, loader.device, loader.pin_memory)
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
        return Stages(self._jobs(_WorkerStreams(loader, max(workers, 1)), workers),
                      in_flight=batches_ahead(loader), pinned=bool(workers))

    def _jobs(self, streams: "_WorkerStreams", workers: int) -> Iterator[Job]:
        if not workers:
            while streams.active:
                yield Job([_Pull(streams, 0)], _first)
            return
        for worker in itertools.cycle(range(workers)):
            if not streams.active:
                return
            if worker in streams.active:
                yield Job([_Pull(streams, worker)], _first, worker=worker,
                          what=[f"{type(self.loader.dataset).__name__} in worker {worker}"])


def _first(results: list) -> Any:
    return results[0]


class _WorkerStreams:
    """The per-worker iterators of an epoch and which of them still yield."""

    def __init__(self, loader, workers: int):
        self.loader = loader
        self.iterators: list = [None] * workers
        self.batches = [0] * workers
        self.active = set(range(workers))

    def pull(self, worker: int, report) -> Any:
        """The next batch of ``worker``'s iterator (made in its thread, so it sees its worker info), or
        SKIP once that iterator has run out (torch's worker then stops, and the others go on)."""
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
            return SKIP
        self.batches[worker] += 1
        finish = _Collate(loader, what, len(items), single=not loader._auto_collation)
        return finish([items[0]] if not loader._auto_collation else items)


class _Pull:
    """A task: the next batch of one worker's iterator."""

    def __init__(self, streams: _WorkerStreams, worker: int):
        self.streams, self.worker = streams, worker

    def __call__(self, report) -> Any:
        return self.streams.pull(self.worker, report)
