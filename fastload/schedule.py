"""Which epoch comes next, with which seeds, from where: the loader's one owner of epoch, seed and resume.

The epoch of an iteration is the one last given to ``set_epoch`` (on the
loader, or on a fastload source) since the previous iteration, else the
previous epoch + 1. Seeds: the order's is ``seed``, else the source's, else
0 (DistributedSampler's); the augmentation's is ``seed``, else the
source's, else torch's initial seed (the ``generator``'s), read once.
Each epoch starts as torch's iterator does: the sampler iterator, then a
base seed drawn from the generator or the global RNG (once, for persistent
workers), so the global RNG advances exactly as under torch. A resumed
epoch replays the sampler's draw from the RNG state saved with it.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch.utils.data import RandomSampler

from .order import resume_at_world_size


@dataclass
class EpochStart:
    """What an iteration starts from."""

    epoch: int
    skip: int  # batches already delivered (a resumed epoch)
    order: Any  # the epoch's ``fastload.order.Order``, None for a generic IterableDataset
    batches: Iterator | None  # the order's batches, drawn as torch draws them
    base_seed: int


class Schedule:
    """The epoch counter, the seeds and the resume position of one loader.

    Args:
        source: the fastload source (its ``epoch`` and ``seed``), or None.
        seed: the loader's ``seed`` argument.
        sampler, generator: the loader's (the RNG a shuffled epoch draws from).
        persistent: ``persistent_workers``: one base seed for the loader's life.
    """

    def __init__(self, source: Any, seed: int | None, sampler: Any, generator: torch.Generator | None,
                 persistent: bool):
        self.source, self.seed, self.sampler, self.generator = source, seed, sampler, generator
        self.persistent = persistent
        self.epoch = -1
        self._epoch_was_set = False
        self._source_epoch_seen = getattr(source, "epoch", None)
        self._augment_seed: int | None = None
        self.base_seed: int | None = None
        self._pending: dict | None = None  # a state from load_state_dict, applied by the next start
        self.position = {"epoch": None, "batches": 0, "finished": False, "rng": None, "world_size": None,
                         "segments": []}

    # -- epochs and seeds ------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        self.epoch, self._epoch_was_set = epoch, True
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def _next_epoch(self) -> int:
        source_epoch = getattr(self.source, "epoch", None)
        if self._epoch_was_set:
            self._epoch_was_set = False
        elif self.source is not None and source_epoch != self._source_epoch_seen:
            self.epoch = source_epoch
        else:
            self.epoch += 1
        self._source_epoch_seen = source_epoch
        return self.epoch

    @property
    def order_seed(self) -> int:
        if self.seed is not None:
            return self.seed
        return getattr(self.source, "seed", None) or 0

    @property
    def augment_seed(self) -> int:
        if self._augment_seed is None:
            if self.seed is not None or getattr(self.source, "seed", None) is not None:
                self._augment_seed = self.order_seed
            else:
                generator = self.generator if self.generator is not None else torch.default_generator
                self._augment_seed = generator.initial_seed()
        return self._augment_seed

    # -- an epoch's start -----------------------------------------------------------------------
    def start(self, make_order: Callable[[], Any]) -> EpochStart:
        """Begin the next epoch: resume if a state is pending (its seeds too), make the epoch's order with
        ``make_order()`` and draw its batches and the base seed as torch's iterator draws them."""
        skip, resumed_rng, saved_world_size, segments = self._apply_pending()
        epoch = self._next_epoch()
        order = make_order()
        if order is not None:
            order, skip, segments = resume_at_world_size(order, epoch, skip, saved_world_size, segments)
        rng = resumed_rng if resumed_rng is not None else self._rng_state()
        with self._rng_restored(resumed_rng):
            batches = order.count_repeats(order.batches(epoch)) if order is not None else None
            if not (self.persistent and self.base_seed is not None):
                self.base_seed = torch.empty((), dtype=torch.int64).random_(generator=self.generator).item()
            if resumed_rng is not None and batches is not None:  # make the sampler draw from the saved state now
                first = next(batches, None)
                batches = itertools.chain([first] if first is not None else [], batches)
        self.position = {"epoch": epoch, "batches": skip, "finished": False, "rng": rng,
                         "world_size": getattr(order, "world_size", None), "segments": segments}
        return EpochStart(epoch, skip, order, batches, self.base_seed)

    def replayed(self, skip: int) -> None:
        """A generic IterableDataset's first ``skip`` batches were replayed to resume: they do not count."""
        self.position["batches"] = skip

    def delivered(self, end: bool) -> None:
        """A batch was handed to the training loop (``end``: the epoch ran out)."""
        if end:
            self.position["finished"] = True
        else:
            self.position["batches"] += 1

    def _rng_state(self) -> dict | None:
        """The RNG a shuffling sampler draws from, before it draws: the generator, else the global one."""
        if not isinstance(self.sampler, RandomSampler):
            return None
        if self.generator is not None:
            return {"generator": self.generator.get_state().tolist()}
        if self.sampler.generator is not None:
            return {"sampler_generator": self.sampler.generator.get_state().tolist()}
        return {"global": torch.get_rng_state().tolist()}

    @contextlib.contextmanager
    def _rng_restored(self, rng: dict | None):
        """Run the sampler's draws from a saved ``rng``; the global RNG is left as the caller had it."""
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

    # -- resume --------------------------------------------------------------------------------
    def state_dict(self, batch_size: int | None, dataset_len: int | None) -> dict:
        position = dict(self.position)
        if position["epoch"] is None:  # never iterated: resume where a first iteration would start
            position.update(epoch=self.epoch + 1 if not self._epoch_was_set else self.epoch,
                            batches=0, finished=False)
        return {"version": 1, "epoch": position["epoch"], "batches": position["batches"],
                "finished": position["finished"], "seed": self.order_seed, "augment_seed": self.augment_seed,
                "rng": position["rng"], "batch_size": batch_size, "dataset_len": dataset_len,
                "world_size": position["world_size"], "segments": position["segments"]}

    def load_state_dict(self, state: dict, batch_size: int | None, dataset_len: int | None) -> None:
        if state.get("version") != 1:
            raise ValueError(f"not a fastload DataLoader state (version {state.get('version')!r})")
        if (state["batch_size"], state["dataset_len"]) != (batch_size, dataset_len):
            raise ValueError(f"this state was saved with batch_size={state['batch_size']} over "
                             f"{state['dataset_len']} samples; this loader has batch_size={batch_size} "
                             f"over {dataset_len}: the remaining batches would not be the same")
        self._pending = dict(state)

    def _apply_pending(self) -> tuple[int, Any, int | None, list]:
        """Set up a pending resume: (batches delivered, the RNG state its order was drawn from, the world size
        it was saved at, the earlier world sizes of its epoch as ``ResumedOrder``'s segments)."""
        state, self._pending = self._pending, None
        if state is None:
            return 0, None, None, []
        self.seed = state["seed"]
        self._augment_seed = state.get("augment_seed", state["seed"])
        self.set_epoch(state["epoch"] + 1 if state["finished"] else state["epoch"])
        self._source_epoch_seen = getattr(self.source, "epoch", None)
        if state["finished"]:
            return 0, None, None, []
        return state["batches"], state["rng"], state.get("world_size"), state.get("segments") or []
