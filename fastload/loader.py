"""fastload.DataLoader: torch's DataLoader, with threads instead of processes and a fast path for images.

Construction validates arguments exactly as torch does (it is torch's own
``__init__``), then picks a path:

* fast path -- a fastload source, or torchvision's ImageFolder/DatasetFolder
  with its default loader, whose transform compiles to a ``Plan``: read,
  decode (DCT-scaled) and crop/resize/flip each sample in a thread, then
  convert and normalize each batch once (``batch.FastPath``);
* device path -- the fast path with ``device="cuda"``: reader threads read
  files and draw each sample's augmentation; one device-stage thread
  decodes the batch on the GPU (nvJPEG) and runs the fused augmentation
  kernel into a preallocated output slot on a side stream
  (``fastload.device``);
* generic path -- anything else: threads call ``dataset[i]`` (or iterate an
  IterableDataset) and ``collate_fn`` batches, so the samples are the ones
  torch's DataLoader would give.

Each ``iter()`` is one epoch: it builds that epoch's jobs and hands them to
a ``ThreadPipeline``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import warnings
import weakref
from typing import Any, Iterator

import torch
import torchvision
from torch.utils.data import IterableDataset, RandomSampler, default_collate
from torch.utils.data.distributed import DistributedSampler
from torchvision.datasets.folder import DatasetFolder, default_loader, pil_loader

from .batch import FastPath, output_pool
from . import device as device_stage
from .decode import DECODE_DEVICES, DECODERS, DEFAULT_MAX_PIXELS, choose_decoder
from .deliver import OutputPool, to_device
from .order import dist_info, num_shard_samples, shard_indices
from .pipeline import END, Job, ThreadPipeline
from .sources import Source
from .stats import Stats
from .transforms import UnsupportedTransform, compile_plan
from fastload.kernels import augment as augment_kernel


class DataLoader(torch.utils.data.DataLoader):
    """A drop-in ``torch.utils.data.DataLoader`` that loads with threads.

    Takes torch's arguments with torch's meanings, except that
    ``num_workers`` counts threads in this process (no worker processes,
    no pickling) and ``shuffle`` on a fastload source is passed on to it.

    Args:
        device: deliver batches on this device (e.g. "cuda"). On a CUDA
            device the fast path decodes JPEGs there (nvJPEG) and augments
            each batch in one fused kernel (``loader.device_path``; see
            ``fastload.device``); other transforms travel as uint8 and are
            converted there. A plain "cuda" under torchrun means this
            process's GPU: cuda:LOCAL_RANK.
        seed: seed of the sample order of fastload sources and of every
            sample's augmentation (default: the source's seed, else 0).
            Augmentation is a pure function of (seed, epoch, sample index).
        on_error: "raise" (default) raises ``fastload.DecodeError`` naming the
            file; "skip" replaces a bad sample with the next one and records
            it in ``loader.stats.skipped``.
        rank, world_size: override the rank and world size from
            torch.distributed / torchrun. On a map-style dataset without a
            sampler they make the loader use a DistributedSampler.
        max_skips: with on_error="skip", a budget per epoch: a count, or a
            fraction of the epoch's samples; one skip more raises
            ``fastload.LoaderError``. None (default): no limit.
        on_corrupt: a JPEG that libjpeg decodes while warning about corrupt
            data ("Corrupt JPEG data: ...", which torchvision prints to stderr
            and otherwise ignores): "deliver" (default) delivers it, as
            torchvision does, and records it in ``loader.stats.corrupt``;
            "error" treats it as a bad sample (raised, or skipped with
            on_error="skip").
        max_image_pixels: refuse images whose header claims more pixels.
        dct_scaling: decode JPEGs at 1/2, 1/4 or 1/8 scale when that still
            covers the output (faster; pixels differ slightly from a full
            decode). False gives torchvision's pixels exactly.
        decode_device: with ``device="cuda"``, where JPEGs are decoded:
            "auto" (default: on the GPU where this torch/torchvision can --
            not on ROCm, say -- else on the CPU), "cuda" (an error where it
            cannot) or "cpu" (decode on the CPU, augment on the GPU).
        decoder: force a decoding backend: "nvjpeg" (torchvision's),
            "torchcodec" (``pip install fastload[torchcodec]``) or "cpu".
            By default, with both GPU backends installed, the first batch
            measures which is faster.
        device_prefetch: with ``device="cuda"``, how many batches are
            decoded and augmented on the GPU ahead of the training loop
            (default 2). This is the knob for GPU memory: the loader keeps
            ``device_prefetch + 2`` output batches there, plus one batch of
            decoded images while it works.
        memory_format: of the image batches: ``torch.contiguous_format``
            (default) or ``torch.channels_last``, which the device path
            writes directly (the CPU paths convert each batch).

    The epoch of an iteration is the one last given to ``set_epoch`` (on the
    loader or on its source) since the previous iteration, else the previous
    epoch + 1, so shuffling and augmentation change every epoch even when
    ``set_epoch`` is never called.
    """

    # Hugging Face Accelerate reads these two attributes. ``prepare()`` returns a loader it finds
    # already prepared unchanged: one that shards itself (a fastload source, a DistributedSampler,
    # or a single process) keeps its fast path instead of being rebuilt as a torch DataLoader and
    # sharded a second time. ``save_state()`` / ``load_state()`` store ``state_dict()`` when
    # ``use_stateful_dataloader`` is set, so a resumed run continues mid-epoch.
    use_stateful_dataloader = True

    @property
    def _is_accelerate_prepared(self) -> bool:
        if self._accelerate_prepared is not None:
            return self._accelerate_prepared
        return (isinstance(self.dataset, Source) or isinstance(self.sampler, DistributedSampler)
                or dist_info(self.rank, self.world_size)[1] == 1)

    @_is_accelerate_prepared.setter
    def _is_accelerate_prepared(self, value: bool) -> None:
        self._accelerate_prepared = value

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True, device=None,
                 seed: int | None = None, on_error: str = "raise", rank: int | None = None,
                 world_size: int | None = None, max_image_pixels: int | None = DEFAULT_MAX_PIXELS,
                 dct_scaling: bool = True, max_skips: int | float | None = None,
                 on_corrupt: str = "deliver", decode_device: str = "auto", decoder: str | None = None,
                 device_prefetch: int = 2, memory_format: torch.memory_format = torch.contiguous_format):
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if on_corrupt not in ("deliver", "error"):
            raise ValueError(f"on_corrupt must be 'deliver' or 'error', got {on_corrupt!r}")
        if max_skips is not None and not (isinstance(max_skips, int) and max_skips >= 0
                                          or isinstance(max_skips, float) and 0 <= max_skips < 1):
            raise ValueError(f"max_skips must be a count >= 0 or a fraction in [0, 1), got {max_skips!r}")
        if decode_device not in DECODE_DEVICES:
            raise ValueError(f"decode_device must be one of {DECODE_DEVICES}, got {decode_device!r}")
        if decoder not in (None, "cpu", *DECODERS):
            raise ValueError(f"decoder must be None, 'cpu', {', '.join(map(repr, DECODERS))}; got {decoder!r}")
        if not isinstance(device_prefetch, int) or device_prefetch < 1:
            raise ValueError(f"device_prefetch must be an int >= 1, got {device_prefetch!r}")
        if memory_format not in (torch.contiguous_format, torch.channels_last):
            raise ValueError(f"memory_format must be torch.contiguous_format or torch.channels_last, "
                             f"got {memory_format!r}")
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
        self.device = _local_device(device)
        self._accelerate_prepared: bool | None = None
        self.seed = seed
        self.on_error = on_error
        self.rank, self.world_size = rank, world_size
        self.max_image_pixels = max_image_pixels
        self.dct_scaling = dct_scaling
        self.max_skips = max_skips
        self.on_corrupt = on_corrupt
        self.decode_device, self.decoder = decode_device, decoder
        self.device_prefetch, self.memory_format = device_prefetch, memory_format
        self.stats = Stats()
        self._resume: dict | None = None
        self._position = {"epoch": None, "batches": 0, "finished": False, "rng": None}
        self._epoch = -1
        self._epoch_was_set = False
        self._source_epoch_seen = getattr(dataset, "epoch", None)
        self._iterators: weakref.WeakSet = weakref.WeakSet()
        self._fast = self._fast_path_inputs()
        self.device_path = self._uses_device_path()
        self._device_slots = None  # the device path's output batches, made at the first iteration

    def _uses_device_path(self) -> bool:
        """Whether batches are decoded and augmented on ``device``; an error when GPU decode was asked
        for and cannot happen."""
        reason = None
        if self._fast is None:
            reason = "the dataset or its transform does not take the fast path"
        elif self.device is None or self.device.type not in device_stage.KERNEL_DEVICE_TYPES:
            reason = "device is not a CUDA device"
        elif augment_kernel.triton is None:
            reason = "triton is not installed"
        else:
            reason = device_stage.unsupported(self._fast[1])
            reason = reason and f"the fused kernel cannot run {reason}"
        if reason and (self.decode_device == "cuda" or self.decoder in DECODERS):
            raise ValueError(f"decode_device={self.decode_device!r}, decoder={self.decoder!r}: GPU decoding "
                             f"runs on the device path, and {reason}")
        if reason is None:  # an error now, not at the first batch, when the asked-for decoder is missing
            self._decoders = choose_decoder(self.decode_device, self.device, self.max_image_pixels, self.decoder)
        return reason is None

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

    def _shard_rank_world(self) -> tuple[int, int]:
        """(rank, world_size) of a fastload source's shard: this loader's overrides, else the source's."""
        source = self.dataset
        return dist_info(self.rank if self.rank is not None else source.rank,
                         self.world_size if self.world_size is not None else source.world_size)

    def _source_order(self, epoch: int) -> list[int]:
        source = self.dataset
        rank, world = self._shard_rank_world()
        shuffle = source.shuffle if self.source_shuffle is None else self.source_shuffle
        return shard_indices(len(source.samples), rank=rank, world_size=world, shuffle=shuffle,
                             seed=self._seed(), epoch=epoch, drop_last=source.drop_last,
                             even_shards=source.even_shards)

    def __len__(self) -> int:
        """Batches per epoch; for a fastload source, of this loader's shard (its rank/world overrides)."""
        if not isinstance(self.dataset, Source):
            return super().__len__()
        source = self.dataset
        rank, world = self._shard_rank_world()
        samples = num_shard_samples(len(source.samples), world, source.drop_last, rank, source.even_shards)
        return samples // self.batch_size if self.drop_last else -(-samples // self.batch_size)

    def check_worker_number_rationality(self) -> None:
        """No-op: torch warns about worker *processes* beyond the core count; these are threads."""

    def _seed(self) -> int:
        if self.seed is not None:
            return self.seed
        return getattr(self.dataset, "seed", 0)

    # -- iteration ------------------------------------------------------------------------
    def __iter__(self) -> ThreadPipeline:
        skip, rng = self._apply_resume()
        epoch = self._next_epoch()
        self.stats.reset()
        threads = self.num_workers
        iterable = isinstance(self.dataset, IterableDataset)
        if rng is None:
            rng = self._rng_state()
        with self._rng_restored(rng):
            batches = None if iterable else iter(self._index_sampler)
            # As torch's iterator does, draw a base seed after creating the sampler
            # iterator: the sampler then sees the generator (or global RNG) in the
            # same state, so a shuffled epoch has torch's order.
            self.base_seed = torch.empty((), dtype=torch.int64).random_(generator=self.generator).item()
            if rng is not None:  # a sampler draws its permutation lazily: make it draw from `rng` now
                first = next(batches, None)
                batches = itertools.chain([first] if first is not None else [], batches)
        self._position = {"epoch": epoch, "batches": skip, "finished": False, "rng": rng}
        fast_forward = 0
        if iterable and not isinstance(self.dataset, Source):
            jobs, threads, fast_forward = self._iterable_jobs(), min(threads, 1), skip
        elif isinstance(self.dataset, Source):
            self._warn_if_uneven()
            order = self._source_order(epoch)
            index_batches = itertools.islice(self._batches_of(order), skip, None)
            jobs = (self._fast_jobs if self._fast is not None else self._map_jobs)(epoch, index_batches, order)
        else:
            batches = itertools.islice(batches, skip, None)
            jobs = (self._fast_jobs if self._fast is not None else self._map_jobs)(epoch, batches, None)
        in_flight = (self.prefetch_factor or 2) * max(threads, 1)
        device_path = {}
        if self.device_path:  # encoded batches in flight: those on the GPU, and a few being read
            in_flight = self.device_prefetch + (self.prefetch_factor or 2)
            device_path = dict(serial_finish=self.device_prefetch, handover=self._device_run.handover)
        try:
            length = len(self) - skip + fast_forward
        except TypeError:
            length = None
        pipeline = ThreadPipeline(jobs, threads, in_flight, self.timeout,
                                  on_wait=lambda seconds: self.stats.add("wait", seconds),
                                  thread_init=self.worker_init_fn, length=length,
                                  on_deliver=self._delivered, **device_path)
        self._iterators.add(pipeline)
        for _ in range(fast_forward):  # a plain IterableDataset can only be replayed
            if next(pipeline, END) is END:
                break
        self._position["batches"] = skip
        return pipeline

    def _warn_if_uneven(self) -> None:
        """Say once that even_shards=False gives ranks different sample (and maybe batch) counts."""
        source = self.dataset
        if getattr(self, "_uneven_warned", False) or source.even_shards:
            return
        rank, world = self._shard_rank_world()
        size, extra = divmod(len(source.samples), world)
        if extra:
            warnings.warn(f"fastload: even_shards=False: ranks 0-{extra - 1} read {size + 1} samples, the "
                          f"others {size} (this is rank {rank}): ranks may run different numbers of batches. "
                          f"Right for evaluation (each sample once); do not run per-batch collectives "
                          f"(DDP training) on this loader", stacklevel=3)
        self._uneven_warned = True

    # -- resume ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Where this loader is: epoch, batches delivered in it, seed, and the sampler's RNG state.

        Plain Python values only (safe in a torch checkpoint). A fresh loader
        built with the same arguments, given this in ``load_state_dict``,
        yields exactly the batches that were still to come -- pixel for pixel
        on the fast path, whatever its num_workers or prefetch_factor.
        """
        position = dict(self._position)
        if position["epoch"] is None:  # never iterated: resume where a first iteration would start
            position.update(epoch=self._epoch + 1 if not self._epoch_was_set else self._epoch,
                            batches=0, finished=False)
        try:
            samples = len(self.dataset)
        except TypeError:
            samples = None
        return {"version": 1, "epoch": position["epoch"], "batches": position["batches"],
                "finished": position["finished"], "seed": self._seed(), "rng": position["rng"],
                "batch_size": self.batch_size, "dataset_len": samples}

    def load_state_dict(self, state: dict) -> None:
        """Make the next iteration continue from ``state`` (from ``state_dict``, possibly of another process)."""
        if state.get("version") != 1:
            raise ValueError(f"not a fastload DataLoader state (version {state.get('version')!r})")
        try:
            samples = len(self.dataset)
        except TypeError:
            samples = None
        if (state["batch_size"], state["dataset_len"]) != (self.batch_size, samples):
            raise ValueError(f"this state was saved with batch_size={state['batch_size']} over "
                             f"{state['dataset_len']} samples; this loader has batch_size={self.batch_size} "
                             f"over {samples}: the remaining batches would not be the same")
        self._resume = dict(state)

    def _apply_resume(self) -> tuple[int, Any]:
        """Set up a pending resume: returns (batches to skip, RNG state to start from)."""
        state, self._resume = self._resume, None
        if state is None:
            return 0, None
        self.seed = state["seed"]
        self.set_epoch(state["epoch"] + 1 if state["finished"] else state["epoch"])
        if isinstance(self.dataset, Source):
            self._source_epoch_seen = getattr(self.dataset, "epoch", None)
        if state["finished"]:
            return 0, None
        return state["batches"], state["rng"]

    def _delivered(self, end: bool) -> None:
        if end:
            self._position["finished"] = True
        else:
            self._position["batches"] += 1

    def _rng_state(self) -> dict | None:
        """The RNG the sampler draws from, before it draws: the loader's generator, else the global one."""
        if isinstance(self.dataset, IterableDataset) or not isinstance(self.sampler, RandomSampler):
            return None
        if self.generator is not None:
            return {"generator": self.generator.get_state().tolist()}
        if self.sampler.generator is not None:
            return {"sampler_generator": self.sampler.generator.get_state().tolist()}
        return {"global": torch.get_rng_state().tolist()}

    @contextlib.contextmanager
    def _rng_restored(self, rng: dict | None):
        """Run the sampler's draws from ``rng``; the global RNG is left as the caller had it."""
        if not rng:
            yield
            return
        state = torch.tensor(next(iter(rng.values())), dtype=torch.uint8)
        if "generator" in rng:
            self.generator.set_state(state)
            yield
        elif "sampler_generator" in rng:
            self.sampler.generator.set_state(state)
            yield
        else:
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(state)
                yield

    def _batches_of(self, order: list[int]) -> Iterator[list[tuple[int, int]]]:
        positions = list(enumerate(order))
        for start in range(0, len(positions), self.batch_size):
            batch = positions[start:start + self.batch_size]
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def _fast_jobs(self, epoch: int, index_batches, order: list[int] | None) -> Iterator[Job]:
        samples, plan, target_transform = self._fast
        threads = max(self.num_workers, 1)
        reader = dict(seed=self._seed(), target_transform=target_transform,
                      collate_fn=None if self.collate_fn is default_collate else self.collate_fn,
                      on_error=self.on_error, max_skips=self._skip_budget(), on_corrupt=self.on_corrupt,
                      max_image_pixels=self.max_image_pixels, stats=self.stats)
        if self.device_path:
            fast = self._device_run = device_stage.DevicePath(samples, plan, device=self.device,
                                                               decoders=self._decoders,
                                                               slots=self._output_slots(plan), **reader)
        else:
            fast = FastPath(samples, plan, batch_size=self.batch_size, dct_scaling=self.dct_scaling,
                            device=self.device, pin_memory=self.pin_memory,
                            slots=(self.prefetch_factor or 2) * threads, outputs=self._output_pool(plan, threads),
                            memory_format=self.memory_format, **reader)
        if order is not None:
            return fast.jobs(index_batches, epoch, order)
        counter = itertools.count()
        batches = ([(next(counter), index) for index in batch] for batch in index_batches)
        return fast.jobs(batches, epoch)

    def _skip_budget(self) -> int | None:
        """max_skips as a count for this epoch."""
        if isinstance(self.max_skips, float):
            return int(self.max_skips * len(self) * (self.batch_size or 1))
        return self.max_skips

    def _output_slots(self, plan) -> "device_stage.OutputSlots":
        """The device path's output batches, made once and kept across epochs."""
        if self._device_slots is None:
            height, width = plan.output_size
            self._device_slots = device_stage.OutputSlots(self.device_prefetch + 2,
                                                          (self.batch_size, 3, height, width), plan.output_dtype,
                                                          self.device, self.memory_format)
        return self._device_slots

    def _output_pool(self, plan, threads: int) -> OutputPool:
        """The CPU output batches, kept across epochs so their memory stays mapped."""
        pool = getattr(self, "_outputs", None)
        fresh = output_pool(plan, self.batch_size, (self.prefetch_factor or 2) * threads)
        if pool is None or (pool.shape, pool.dtype, pool.capacity) != (fresh.shape, fresh.dtype, fresh.capacity):
            self._outputs = pool = fresh
        return pool

    def _deliver(self, batch: Any) -> Any:
        return to_device(batch, self.device, self.pin_memory)

    def _map_jobs(self, epoch: int, index_batches, order: list[int] | None) -> Iterator[Job]:
        """Generic path: threads call dataset[i]; collate_fn batches (torch's fetch semantics)."""
        dataset, collate = self.dataset, self.collate_fn
        if order is not None:
            load = dataset.load
            batches = (list(index for _, index in batch) for batch in index_batches)
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


def _local_device(device) -> torch.device | None:
    """``device`` as a torch.device; a bare "cuda" under torchrun becomes cuda:LOCAL_RANK."""
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cuda" and device.index is None and "LOCAL_RANK" in os.environ:
        return torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    return device
