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
        kind = _rng_kind(self.sampler, self.generator)
        if kind is None:
            return None
        generator = {"generator": self.generator, "sampler_generator": getattr(self.sampler, "generator", None),
                     "global": torch.default_generator}[kind]
        return {kind: generator.get_state().tolist()}

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

    def check_state(self, state, batch_size: int | None, dataset_len: int | None) -> dict:
        """``state``'s fields, each present, of its type and in its range, and saved with this loader's
        batch size over as many samples; a ValueError naming the first field that is wrong. Nothing is
        changed here (``load_state_dict`` checks a state whole before it applies any of it)."""
        state = check_fields(state)
        for name, here in (("batch_size", batch_size), ("dataset_len", dataset_len)):
            if state[name] != here:
                raise ValueError(f"state field {name!r}: this state was saved with batch_size={state['batch_size']} "
                                 f"over {state['dataset_len']} samples; this loader has batch_size={batch_size} "
                                 f"over {dataset_len}: the remaining batches would not be the same")
        return state

    def check_position(self, state: dict, order_for: Callable[[int], Any]) -> None:
        """A checked ``state``'s position is one this loader can resume: its RNG the one this loader's
        sampler draws from, and no more batches delivered than its epoch holds at the world size it was
        saved at (``order_for(seed)`` makes this rank's order with a seed). Nothing is changed here."""
        expected = _rng_kind(self.sampler, self.generator)
        saved = next(iter(state["rng"]), None) if state["rng"] is not None else None
        if saved is not None and saved != expected:
            raise ValueError(f"state field 'rng': saved from the {saved!r} RNG, but this loader's sampler draws "
                             f"from {expected or 'none'}")
        if not state["finished"] and state["batches"]:
            order = order_for(state["seed"])
            if order is not None:
                order, skip, _ = resume_at_world_size(order, state["epoch"], state["batches"],
                                                      state["world_size"], state["segments"])
                if skip > len(order):
                    raise ValueError(f"state field 'batches': {state['batches']} batches delivered, but epoch "
                                     f"{state['epoch']} has {len(order)} here")

    def resume_from(self, state: dict) -> None:
        """The next iteration continues from ``state`` (as ``check_state`` returned it)."""
        self._pending = dict(state)

    def _apply_pending(self) -> tuple[int, Any, int | None, list]:
        """Set up a pending resume: (batches delivered, the RNG state its order was drawn from, the world size
        it was saved at, the earlier world sizes of its epoch as ``ResumedOrder``'s segments)."""
        state, self._pending = self._pending, None
        if state is None:
            return 0, None, None, []
        self.seed = state["seed"]
        self._augment_seed = state["augment_seed"]
        self.set_epoch(state["epoch"] + 1 if state["finished"] else state["epoch"])
        self._source_epoch_seen = getattr(self.source, "epoch", None)
        if state["finished"]:
            return 0, None, None, []
        return state["batches"], state["rng"], state["world_size"], [list(s) for s in state["segments"]]


def _rng_kind(sampler, generator: torch.Generator | None) -> str | None:
    """Which RNG a shuffled epoch's order is drawn from: the loader's ``generator``, the sampler's own, the
    global one; None where the sampler does not shuffle."""
    if not isinstance(sampler, RandomSampler):
        return None
    if generator is not None:
        return "generator"
    return "sampler_generator" if sampler.generator is not None else "global"


SEEDS = (-(1 << 63), (1 << 64) - 1)  # what torch.manual_seed takes
RNG_STATE_BYTES = torch.get_rng_state().numel()  # a CPU generator's state (mt19937 and its extras)


def check_fields(state) -> dict:
    """A state's fields, each present, of its type and in range; a ValueError naming the first that is not.
    A state is read from a file that may be old, edited or of another program: every number in it is
    range-checked before it decides which batches come."""
    if not isinstance(state, dict):
        raise ValueError(f"a DataLoader state is a dict, not {type(state).__name__}")
    if "version" not in state or state["version"] != 1 or isinstance(state["version"], bool):
        raise ValueError(f"not a fastload DataLoader state (state field 'version' is {state.get('version')!r}, "
                         "expected 1)")
    unknown = sorted(map(repr, set(state) - set(STATE_FIELDS)))
    if unknown:
        raise ValueError(f"state field {unknown[0]}: not a field of a fastload DataLoader state "
                         f"(fields: {', '.join(STATE_FIELDS)})")
    for name, (check, what) in STATE_FIELDS.items():
        if name not in state:
            raise ValueError(f"state field {name!r} is missing ({what})")
        if not check(state[name]):
            raise ValueError(f"state field {name!r} is {_short(state[name])}: expected {what}")
    return dict(state)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _int(low: int | None = None, high: int | None = None) -> Callable[[Any], bool]:
    return lambda v: (isinstance(v, int) and not isinstance(v, bool) and (low is None or v >= low)
                      and (high is None or v <= high))


def _rng(value) -> bool:
    if value is None:
        return True
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in (
            "generator", "sampler_generator", "global"):
        return False
    data = next(iter(value.values()))
    return (isinstance(data, list) and len(data) == RNG_STATE_BYTES
            and all(type(b) is int and 0 <= b <= 255 for b in data))


def _segments(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(s, (list, tuple)) and len(s) == 2 and _int(1)(s[0]) and _int(0)(s[1]) for s in value)


def _fingerprint(value) -> bool:
    return value is None or (isinstance(value, dict) and set(value) == {"samples", "order"}
                             and all(isinstance(part, dict) for part in value.values()))


_COUNT = 1 << 62  # no epoch, batch count, size or length is near this
STATE_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "version": (lambda v: v == 1, "1"),
    "epoch": (_int(0, _COUNT), "the epoch, an integer >= 0"),
    "batches": (_int(0, _COUNT), "the batches delivered in the epoch, an integer >= 0"),
    "finished": (lambda v: isinstance(v, bool), "True or False (whether the epoch ran out)"),
    "seed": (_int(*SEEDS), "the order's seed, an integer torch.manual_seed takes"),
    "augment_seed": (_int(*SEEDS), "the augmentation's seed, an integer torch.manual_seed takes"),
    "rng": (_rng, f"None, or {{'generator' | 'sampler_generator' | 'global': the {RNG_STATE_BYTES} bytes of a "
                  "CPU generator's state}"),
    "batch_size": (lambda v: v is None or _int(1, _COUNT)(v), "None or an integer >= 1"),
    "dataset_len": (lambda v: v is None or _int(0, _COUNT)(v), "None or an integer >= 0"),
    "world_size": (lambda v: v is None or _int(1, 1 << 31)(v), "None or the world size, an integer >= 1"),
    "segments": (_segments, "a list of [world size >= 1, batches >= 0] pairs"),
    "fingerprint": (_fingerprint, "None (load unchecked) or {'samples': {...}, 'order': {...}}"),
}
