"""fastload.DataLoader: torch's DataLoader, with threads instead of processes and a fast path for images.

Construction validates arguments exactly as torch does (it is torch's own
``__init__``), then picks a path:

* fast path -- a fastload source, or torchvision's ImageFolder/DatasetFolder
  with its default loader, whose transform compiles to a ``Plan``: read,
  decode (DCT-scaled) and crop/resize/flip each sample in a thread, then
  convert and normalize each batch once (``batch.FastPath``);
* generic path -- anything else: threads call ``dataset[i]`` (or iterate an
  IterableDataset) and ``collate_fn`` batches, so the samples are the ones
  torch's DataLoader would give.

Each ``iter()`` is one epoch: it builds that epoch's jobs and hands them to
a ``ThreadPipeline``.
"""

from __future__ import annotations

import itertools
import warnings
import weakref
from typing import Any, Iterator

import torch
import torchvision
from torch.utils.data import IterableDataset, default_collate
from torch.utils.data.distributed import DistributedSampler
from torchvision.datasets.folder import DatasetFolder, default_loader, pil_loader

from .batch import FastPath, output_pool
from .decode import DEFAULT_MAX_PIXELS
from .deliver import OutputPool, to_device
from .order import dist_info, num_shard_samples, shard_indices
from .pipeline import END, Job, ThreadPipeline
from .sources import Source
from .stats import Stats
from .transforms import UnsupportedTransform, compile_plan


class DataLoader(torch.utils.data.DataLoader):
    """A drop-in ``torch.utils.data.DataLoader`` that loads with threads.

    Takes torch's arguments with torch's meanings, except that
    ``num_workers`` counts threads in this process (no worker processes,
    no pickling) and ``shuffle`` on a fastload source is passed on to it.

    Args:
        device: deliver batches on this device (e.g. "cuda"); images travel
            as uint8 and are converted there.
        seed: seed of the sample order of fastload sources and of every
            sample's augmentation (default: the source's seed, else 0).
            Augmentation is a pure function of (seed, epoch, sample index).
        on_error: "raise" (default) raises ``fastload.DecodeError`` naming the
            file; "skip" replaces a bad sample with the next one and records
            it in ``loader.stats.skipped``.
        rank, world_size: override the rank and world size from
            torch.distributed / torchrun. On a map-style dataset without a
            sampler they make the loader use a DistributedSampler.
        max_image_pixels: refuse images whose header claims more pixels.
        dct_scaling: decode JPEGs at 1/2, 1/4 or 1/8 scale when that still
            covers the output (faster; pixels differ slightly from a full
            decode). False gives torchvision's pixels exactly.

    The epoch of an iteration is the one last given to ``set_epoch`` (on the
    loader or on its source) since the previous iteration, else the previous
    epoch + 1, so shuffling and augmentation change every epoch even when
    ``set_epoch`` is never called.
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True, device=None,
                 seed: int | None = None, on_error: str = "raise", rank: int | None = None,
                 world_size: int | None = None, max_image_pixels: int | None = DEFAULT_MAX_PIXELS,
                 dct_scaling: bool = True):
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        self.source_shuffle = None
        if isinstance(dataset, Source):
            # torch refuses shuffle for an IterableDataset; a source shuffles itself.
            self.source_shuffle, shuffle = shuffle, None
        elif ((rank is not None or world_size is not None) and sampler is None
              and batch_sampler is None and not isinstance(dataset, IterableDataset)):
            r, w = dist_info(rank, world_size)
            sampler = DistributedSampler(dataset, num_replicas=w, rank=r, shuffle=bool(shuffle),
                                         seed=seed or 0)
            shuffle = None
        super().__init__(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
                         collate_fn, pin_memory, drop_last, timeout, worker_init_fn,
                         multiprocessing_context, generator, prefetch_factor=prefetch_factor,
                         persistent_workers=persistent_workers,
                         pin_memory_device=pin_memory_device, in_order=in_order)
        self.device = torch.device(device) if device is not None else None
        self.seed = seed
        self.on_error = on_error
        self.rank, self.world_size = rank, world_size
        self.max_image_pixels = max_image_pixels
        self.dct_scaling = dct_scaling
        self.stats = Stats()
        self._epoch = -1
        self._epoch_was_set = False
        self._source_epoch_seen = getattr(dataset, "epoch", None)
        self._iterators: weakref.WeakSet = weakref.WeakSet()
        self._fast = self._fast_path_inputs()

    # -- path selection ---------------------------------------------------------------
    def _fast_path_inputs(self):
        """(samples, plan, target_transform) when the fast path applies, else None (warning once)."""
        dataset = self.dataset
        if isinstance(dataset, Source):
            pass
        elif isinstance(dataset, DatasetFolder):
            if dataset.loader not in (default_loader, pil_loader) or torchvision.get_image_backend() != "PIL":
                return None
        else:
            return None
        if self.batch_size is None:
            return None
        try:
            plan = compile_plan(dataset.transform)
        except UnsupportedTransform as reason:
            warnings.warn(f"fastload: the fast path cannot run {reason}; running "
                          f"{type(dataset).__name__}'s transform as given (correct, slower)",
                          stacklevel=3)
            return None
        return dataset.samples, plan, dataset.target_transform

    @property
    def fast_path(self) -> bool:
        """Whether this loader decodes and augments on the fast path."""
        return self._fast is not None

    # -- epochs ---------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """The epoch of the next iteration (order and augmentation); forwarded to a sampler that has one."""
        self._epoch, self._epoch_was_set = epoch, True
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def _next_epoch(self) -> int:
        source_epoch = getattr(self.dataset, "epoch", None)
        if self._epoch_was_set:
            self._epoch_was_set = False
        elif isinstance(self.dataset, Source) and source_epoch != self._source_epoch_seen:
            self._epoch = source_epoch
        else:
            self._epoch += 1
        self._source_epoch_seen = source_epoch
        return self._epoch

    def _source_order(self, epoch: int) -> list[int]:
        source = self.dataset
        rank, world = dist_info(self.rank if self.rank is not None else source.rank,
                                self.world_size if self.world_size is not None else source.world_size)
        shuffle = source.shuffle if self.source_shuffle is None else self.source_shuffle
        return shard_indices(len(source.samples), rank=rank, world_size=world, shuffle=shuffle,
                             seed=self._seed(), epoch=epoch, drop_last=source.drop_last)

    def __len__(self) -> int:
        """Batches per epoch; for a fastload source, of this loader's shard (its rank/world overrides)."""
        if not isinstance(self.dataset, Source):
            return super().__len__()
        source = self.dataset
        _, world = dist_info(self.rank if self.rank is not None else source.rank,
                             self.world_size if self.world_size is not None else source.world_size)
        samples = num_shard_samples(len(source.samples), world, source.drop_last)
        return samples // self.batch_size if self.drop_last else -(-samples // self.batch_size)

    def check_worker_number_rationality(self) -> None:
        """No-op: torch warns about worker *processes* beyond the core count; these are threads."""

    def _seed(self) -> int:
        if self.seed is not None:
            return self.seed
        return getattr(self.dataset, "seed", 0)

    # -- iteration ------------------------------------------------------------------------
    def __iter__(self) -> ThreadPipeline:
        epoch = self._next_epoch()
        self.stats.reset()
        threads = self.num_workers
        iterable = isinstance(self.dataset, IterableDataset)
        batches = None if iterable else iter(self._index_sampler)
        # As torch's iterator does, draw a base seed after creating the sampler
        # iterator: the sampler then sees the generator (or global RNG) in the
        # same state, so a shuffled epoch has torch's order.
        self.base_seed = torch.empty((), dtype=torch.int64).random_(generator=self.generator).item()
        if iterable and not isinstance(self.dataset, Source):
            jobs, threads = self._iterable_jobs(), min(threads, 1)
        elif self._fast is not None:
            jobs = self._fast_jobs(epoch, batches)
        else:
            jobs = self._map_jobs(epoch, batches)
        in_flight = (self.prefetch_factor or 2) * max(threads, 1)
        try:
            length = len(self)
        except TypeError:
            length = None
        pipeline = ThreadPipeline(jobs, threads, in_flight, self.timeout,
                                  on_wait=lambda seconds: self.stats.add("wait", seconds),
                                  thread_init=self.worker_init_fn, length=length)
        self._iterators.add(pipeline)
        return pipeline

    def _batches_of(self, order: list[int]) -> Iterator[list[tuple[int, int]]]:
        positions = list(enumerate(order))
        for start in range(0, len(positions), self.batch_size):
            batch = positions[start:start + self.batch_size]
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def _fast_jobs(self, epoch: int, index_batches) -> Iterator[Job]:
        samples, plan, target_transform = self._fast
        threads = max(self.num_workers, 1)
        fast = FastPath(samples, plan, batch_size=self.batch_size, seed=self._seed(),
                        target_transform=target_transform,
                        collate_fn=None if self.collate_fn is default_collate else self.collate_fn,
                        on_error=self.on_error, max_image_pixels=self.max_image_pixels,
                        dct_scaling=self.dct_scaling, device=self.device,
                        pin_memory=self.pin_memory, slots=(self.prefetch_factor or 2) * threads,
                        outputs=self._output_pool(plan, threads), stats=self.stats)
        if isinstance(self.dataset, Source):
            order = self._source_order(epoch)
            return fast.jobs(self._batches_of(order), epoch, order)
        counter = itertools.count()
        batches = ([(next(counter), index) for index in batch] for batch in index_batches)
        return fast.jobs(batches, epoch)

    def _output_pool(self, plan, threads: int) -> OutputPool:
        """The CPU output batches, kept across epochs so their memory stays mapped."""
        pool = getattr(self, "_outputs", None)
        fresh = output_pool(plan, self.batch_size, (self.prefetch_factor or 2) * threads)
        if pool is None or (pool.shape, pool.dtype, pool.capacity) != (fresh.shape, fresh.dtype, fresh.capacity):
            self._outputs = pool = fresh
        return pool

    def _deliver(self, batch: Any) -> Any:
        return to_device(batch, self.device, self.pin_memory)

    def _map_jobs(self, epoch: int, index_batches) -> Iterator[Job]:
        """Generic path: threads call dataset[i]; collate_fn batches (torch's fetch semantics)."""
        dataset, collate = self.dataset, self.collate_fn
        if isinstance(dataset, Source):
            load = dataset.load
            batches = (list(index for _, index in batch)
                       for batch in self._batches_of(self._source_order(epoch)))
        else:
            load = dataset.__getitem__
            batches = index_batches

        def item(index):
            def task(report):
                report("dataset[i]", f"sample {index}")
                try:
                    return load(index)
                except Exception as error:
                    error.add_note(f"fastload: raised while loading sample {index} of "
                                   f"{type(dataset).__name__} in a loader thread")
                    raise
            return task

        getitems = getattr(dataset, "__getitems__", None) if not isinstance(dataset, Source) else None
        for batch in batches:
            if not self._auto_collation:
                yield Job([item(batch)], lambda results: self._deliver(collate(results[0])))
            elif getitems:
                yield Job([lambda report, b=batch: getitems(b)],
                          lambda results: self._deliver(collate(results[0])))
            else:
                yield Job([item(index) for index in batch],
                          lambda results: self._deliver(collate(results)))

    def _iterable_jobs(self) -> Iterator[Job]:
        """Generic IterableDataset: one thread consumes the dataset once, in order, as num_workers=0 does."""
        iterator = iter(self.dataset)
        batch_size, drop_last, collate = self.batch_size, self.drop_last, self.collate_fn
        finished = False

        def pull(report):
            nonlocal finished
            report("iterate", type(self.dataset).__name__)
            if not self._auto_collation:
                item = next(iterator, END)
                finished = item is END
                return item if finished else self._deliver(collate(item))
            items = list(itertools.islice(iterator, batch_size))
            finished = len(items) < batch_size
            if not items or (finished and drop_last):
                return END
            return self._deliver(collate(items))

        while not finished:
            yield Job([pull], lambda results: results[0])

    # -- shutdown -------------------------------------------------------------------------
    def close(self) -> None:
        """Stop and join the threads of every iterator of this loader."""
        for iterator in list(self._iterators):
            iterator.close()

    def __enter__(self) -> "DataLoader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
