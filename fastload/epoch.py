"""One epoch of a loader: what ``iter(loader)`` starts, as torch's ``_MultiProcessingDataLoaderIter``.

``start_epoch`` asks the schedule for the epoch (its order drawn as torch
draws it), the path for its stages, and hands them to a ``ThreadPool``
-- the iterator the training loop gets -- with the loader threads' worker
identities (``fastload.workers``) and a ``Delivery`` that keeps the resume
position and gives torch's IterableDataset length warning.
"""

from __future__ import annotations

import itertools
import warnings
import weakref
from typing import Callable

import torch
from torch.utils.data import IterableDataset

from .thread_pool import END, ThreadPool


def start_epoch(loader) -> ThreadPool:
    loader.refresh_path()
    path, threads = loader.path, loader.num_workers
    start = loader.schedule.start(loader.make_order, loader.dataset, threads)
    order = start.order
    end_stats = loader.stats.reset()  # freezes loader.stats.images_per_s at the epoch's end
    _warn_as_torch(loader)
    workers = loader.workers.for_epoch(loader, start.base_seed, start.worker_states) if threads else None
    forward = start.skip if start.fast_forward else 0  # else the sampler or the dataset resumed itself
    batches = Remaining(start.batches, forward) if order is not None else None
    stages = path.stages(batches, start.epoch, order)
    replay = forward if order is None else 0  # a plain IterableDataset can only be replayed
    try:  # the epoch's own order: a resumed epoch's (fastload.order.ResumedOrder) may differ from the others'
        length = (len(order) if order is not None else len(loader)) - start.skip + replay
    except TypeError:
        length = None
    pool = ThreadPool(stages.jobs, threads, stages.in_flight, loader.timeout,
                      on_wait=loader.stats.waited, thread_init=workers.init_thread if workers else None,
                      length=length, on_deliver=Delivery(loader, end_stats),
                      serial_finish=stages.finish_in_order, handover=stages.handover, pinned=stages.pinned)
    loader.iterators.add(pool)
    if workers is not None:
        loader.schedule.workers_started(workers.started_states())
    weakref.finalize(pool, end_stats)  # a `break` or an error left the iterator: collected, it ends the epoch
    for replayed in range(replay):
        if next(pool, END) is END:
            pool.close()
            raise ValueError(f"the resumed state says {replay} batches of epoch {start.epoch} were delivered, but "
                             f"the dataset gave only {replayed}: it is not the dataset the state was saved over")
    if replay:
        loader.schedule.replayed(start.skip)
    return pool


class Remaining:
    """An epoch's batches after the first ``skip`` (delivered before a resume), which are drawn and dropped
    as the first is asked for -- or handed to a path whose draws follow from theirs by ``skipped()``, called
    first (torch's draws: fastload.batch replays them)."""

    def __init__(self, batches, skip: int):
        self.batches, self.skip = batches, skip

    def skipped(self) -> list:
        skipped, self.skip = list(itertools.islice(self.batches, self.skip)), 0
        return skipped

    def __iter__(self):
        return self

    def __next__(self):
        if self.skip:
            for _ in itertools.islice(self.batches, self.skip):
                pass
            self.skip = 0
        return next(self.batches)


class Delivery:
    """Called as each batch is handed over (``end``: the epoch ran out; ``failed``: its error was raised
    instead): the resume position, the end of the stats' epoch, and torch's warning when an IterableDataset
    yields more than its ``len`` said."""

    def __init__(self, loader, end_stats: Callable[[], None]):
        self.loader, self.end_stats = loader, end_stats
        self.yielded = 0

    def __call__(self, end: bool, failed: bool = False) -> None:
        loader = self.loader
        loader.schedule.delivered(end)
        if end:
            self.end_stats()
            return
        if failed:  # consumed for the resume position; not yielded (torch counts only what it returns)
            return
        self.yielded += 1
        reported = loader._IterableDataset_len_called
        if isinstance(loader.dataset, IterableDataset) and reported is not None and self.yielded > reported:
            message = (f"Length of IterableDataset {loader.dataset} was reported to be {reported}"
                       f"(when accessing len(dataloader)), but {self.yielded} samples have been fetched. ")
            if loader.num_workers > 0:
                message += ("For multiprocessing data-loading, this could be caused by not properly configuring "
                            "the IterableDataset replica at each worker. Please see "
                            "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset "
                            "for examples.")
            warnings.warn(message, stacklevel=3)


def _warn_as_torch(loader) -> None:
    """The warnings torch's iterator gives when it starts."""
    if loader.pin_memory and loader.pin_memory_device:
        warnings.warn("pin_memory_device is deprecated, the current accelerator will be used as the device,"
                      f"ignore pin_memory_device='{loader.pin_memory_device}'.", stacklevel=4)
    if loader.pin_memory and not torch.accelerator.is_available():
        warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                      "then device pinned memory won't be used.", stacklevel=4)
