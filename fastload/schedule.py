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

A sampler, batch sampler or dataset with ``state_dict`` and ``load_state_dict``
(torchdata's ``Stateful`` protocol) resumes itself, as under torchdata's
StatefulDataLoader: the state holds each one's ``state_dict()`` as of the
last batch handed to the training loop (the sampler's as that batch's
indices were drawn, a loader thread's dataset copy's as it finished the
batch: both run ahead of the loop), and a resumed epoch loads them back
instead of fast-forwarding the sampler or replaying the dataset.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
from torch.utils.data import IterableDataset, RandomSampler

from .order import resume_at_world_size


@dataclass
class EpochStart:
    """What an iteration starts from."""

    epoch: int
    skip: int  # batches already delivered (a resumed epoch)
    order: Any  # the epoch's ``fastload.order.Order``, None for a generic IterableDataset
    batches: Iterator | None  # the order's batches, drawn as torch draws them
    base_seed: int
    fast_forward: bool = True  # skip (or replay) the delivered batches; False: the sampler or dataset resumed itself
    worker_states: list | None = None  # per loader thread, the dataset copy's state to load, or None


class Schedule:
    """The epoch counter, the seeds and the resume position of one loader.

    Args:
        source: the fastload source (its ``epoch`` and ``seed``), or None.
        seed: the loader's ``seed`` argument.
        sampler, generator: the loader's (the RNG a shuffled epoch draws from).
        persistent: ``persistent_workers``: one base seed for the loader's life.
    """

    def __init__(self, source: Any, seed: int | None, sampler: Any, generator: torch.Generator | None,
                 persistent: bool, batch_sampler: Any = None):
        self.source, self.seed, self.sampler, self.generator = source, seed, sampler, generator
        self.batch_sampler = batch_sampler
        self.persistent = persistent
        self._drawn: collections.deque = collections.deque()  # the samplers' states per batch drawn, not yet delivered
        self.epoch = -1
        self._epoch_was_set = False
        self._source_epoch_seen = getattr(source, "epoch", None)
        self._augment_seed: int | None = None
        self.base_seed: int | None = None
        self._pending: dict | None = None  # a state from load_state_dict, applied by the next start
        self.position = {"epoch": None, "batches": 0, "finished": False, "rng": None, "world_size": None,
                         "segments": [], "objects": {}}

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
    def start(self, make_order: Callable[[], Any], dataset: Any = None, num_workers: int = 0) -> EpochStart:
        """Begin the next epoch: resume if a state is pending (its seeds too, and the stateful sampler's,
        batch sampler's and -- without workers -- dataset's states), make the epoch's order with
        ``make_order()`` and draw its batches and the base seed as torch's iterator draws them."""
        pending = self._pending
        if pending is not None:  # num_workers may have been set since load_state_dict
            self.check_objects(pending, dataset, num_workers)
        skip, resumed_rng, saved_world_size, segments = self._apply_pending()
        objects = self._objects(dataset, num_workers)
        finished = pending is not None and pending["finished"]
        restored = self._load_samplers(pending, objects, dataset, finished)
        fast_forward = not ({"sampler_state", "batch_sampler_state", "worker_states"} & set(restored)
                            or ("dataset_state" in restored and isinstance(dataset, IterableDataset)))
        epoch = self._next_epoch()
        order = make_order()
        if order is not None:
            order, skip, segments = resume_at_world_size(order, epoch, skip, saved_world_size, segments)
        rng = resumed_rng if resumed_rng is not None else self._rng_state()
        self._drawn.clear()
        samplers = self._sampler_states()  # as the epoch starts: before its first batch is drawn
        with self._rng_restored(resumed_rng):
            batches = order.count_repeats(order.batches(epoch)) if order is not None else None
            if samplers and batches is not None:
                batches = self._noting_sampler_states(batches)
            if not (self.persistent and self.base_seed is not None):
                self.base_seed = torch.empty((), dtype=torch.int64).random_(generator=self.generator).item()
            if resumed_rng is not None and batches is not None:  # make the sampler draw from the saved state now
                first = next(batches, None)
                batches = itertools.chain([first] if first is not None else [], batches)
        if "dataset_state" in restored:  # mid-epoch: after the base seed, as torchdata's iterator loads it
            dataset.load_state_dict(copy.deepcopy(restored["dataset_state"]))
        worker_states = restored.get("worker_states")
        if worker_states is not None and finished and not self.persistent:
            worker_states = None  # the next epoch's threads copy the dataset afresh, as new worker processes
        self.position = {"epoch": epoch, "batches": skip, "finished": False, "rng": rng,
                         "world_size": getattr(order, "world_size", None), "segments": segments,
                         "objects": {**self._current_objects(objects, dataset, num_workers), **samplers,
                                     **({"round_robin": restored["round_robin"]}
                                        if "round_robin" in restored and not finished else {})}}
        return EpochStart(epoch, skip, order, batches, self.base_seed, fast_forward, worker_states)

    # -- the stateful objects (torchdata's protocol) ------------------------------------------------
    def _load_samplers(self, pending: dict | None, objects: list[str], dataset: Any, finished: bool) -> dict:
        """A pending state's object states for this loader's ``objects``; the sampler's and batch sampler's
        loaded now, before the epoch's order is drawn (they resume themselves: no fast-forward), and the
        dataset's too after a finished epoch (the next one starts from it, as torchdata's does)."""
        restored = {name: pending[name] for name in objects if pending is not None and name in pending}
        for name, owner in (("sampler_state", self.sampler), ("batch_sampler_state", self.batch_sampler)):
            if name in restored:
                owner.load_state_dict(copy.deepcopy(restored[name]))
        if "dataset_state" in restored and finished:
            dataset.load_state_dict(copy.deepcopy(restored.pop("dataset_state")))
        return restored

    def _objects(self, dataset: Any, num_workers: int) -> list[str]:
        """The state fields of this loader's stateful objects (``OBJECT_FIELDS``), with ``num_workers``."""
        fields = [name for name, owner in (("sampler_state", self.sampler), ("batch_sampler_state", self.batch_sampler))
                  if stateful(owner)]
        if stateful(dataset):
            fields.append("worker_states" if num_workers else "dataset_state")
            if num_workers and isinstance(dataset, IterableDataset):
                fields.append("round_robin")
        return fields

    def _sampler_states(self) -> dict:
        """The stateful sampler's and batch sampler's states now (copies: the objects go on changing)."""
        return {name: copy.deepcopy(owner.state_dict())
                for name, owner in (("sampler_state", self.sampler), ("batch_sampler_state", self.batch_sampler))
                if stateful(owner)}

    def _current_objects(self, fields: list[str], dataset: Any, num_workers: int) -> dict:
        """Before any batch of an epoch: the dataset's state now; no loader thread's copy yet."""
        objects: dict = {}
        if "dataset_state" in fields:
            objects["dataset_state"] = copy.deepcopy(dataset.state_dict())
        if "worker_states" in fields:
            objects["worker_states"] = [None] * num_workers
        if "round_robin" in fields:
            objects["round_robin"] = {"next": 0, "ended": []}
        return objects

    def _noting_sampler_states(self, batches: Iterator) -> Iterator:
        for batch in batches:
            self._drawn.append(self._sampler_states())
            yield batch

    def workers_started(self, states: list) -> None:
        """The loader threads' dataset copies' states as the epoch's threads started (after worker_init_fn
        and a resumed state): what a thread that has delivered no batch yet resumes from."""
        if "worker_states" in self.position["objects"]:
            self.position["objects"]["worker_states"] = [copy.deepcopy(s) for s in states]

    def batch_taken(self, worker: int | None, state: Any, ended: bool = False) -> None:
        """A stateful dataset's batch (or an IterableDataset worker's end) was taken in order from loader
        thread ``worker`` (None: without workers); ``state``: its dataset copy's state just after."""
        objects = self.position["objects"]
        if worker is None:
            objects["dataset_state"] = state
            return
        objects["worker_states"][worker] = state
        if "round_robin" in objects:
            ended_ones = set(objects["round_robin"]["ended"]) | ({worker} if ended else set())
            objects["round_robin"] = {"next": (worker + 1) % len(objects["worker_states"]),
                                      "ended": sorted(ended_ones)}

    def replayed(self, skip: int) -> None:
        """A generic IterableDataset's first ``skip`` batches were replayed to resume: they do not count."""
        self.position["batches"] = skip

    def delivered(self, end: bool) -> None:
        """A batch was handed to the training loop (``end``: the epoch ran out); the samplers' states become
        the ones noted as its indices were drawn."""
        if end:
            self.position["finished"] = True
        else:
            self.position["batches"] += 1
            if self._drawn:
                self.position["objects"].update(self._drawn.popleft())

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
    def state_dict(self, batch_size: int | None, dataset_len: int | None, dataset: Any = None,
                   num_workers: int = 0) -> dict:
        position = dict(self.position)
        objects = position["objects"]
        if position["epoch"] is None:  # never iterated: resume where a first iteration would start
            position.update(epoch=self.epoch + 1 if not self._epoch_was_set else self.epoch,
                            batches=0, finished=False)
            fields = self._objects(dataset, num_workers)
            objects = {**self._current_objects(fields, dataset, num_workers), **self._sampler_states()}
        return {"version": 1, "epoch": position["epoch"], "batches": position["batches"],
                "finished": position["finished"], "seed": self.order_seed, "augment_seed": self.augment_seed,
                "rng": position["rng"], "batch_size": batch_size, "dataset_len": dataset_len,
                "world_size": position["world_size"], "segments": position["segments"],
                **copy.deepcopy(objects)}

    def check_state(self, state, batch_size: int | None, dataset_len: int | None, dataset: Any = None,
                    num_workers: int = 0) -> dict:
        """``state``'s fields, each present, of its type and in its range, and saved with this loader's
        batch size over as many samples, with the states of the same stateful objects; a ValueError naming
        the first field that is wrong. Nothing is changed here (``load_state_dict`` checks a state whole
        before it applies any of it)."""
        state = check_fields(state)
        for name, here in (("batch_size", batch_size), ("dataset_len", dataset_len)):
            if state[name] != here:
                raise ValueError(f"state field {name!r}: this state was saved with batch_size={state['batch_size']} "
                                 f"over {state['dataset_len']} samples; this loader has batch_size={batch_size} "
                                 f"over {dataset_len}: the remaining batches would not be the same")
        self.check_objects(state, dataset, num_workers)
        return state

    def check_objects(self, state: dict, dataset: Any, num_workers: int) -> None:
        """A state holds the states of exactly this loader's stateful objects (``OBJECT_FIELDS``), one per
        loader thread where the threads' dataset copies have state; a ValueError naming the field."""
        expected = self._objects(dataset, num_workers)
        owners = {"sampler_state": ("sampler", self.sampler),
                  "batch_sampler_state": ("batch sampler", self.batch_sampler), "dataset_state": ("dataset", dataset),
                  "worker_states": ("dataset", dataset), "round_robin": ("dataset", dataset)}
        for name in OBJECT_FIELDS:  # saved, but not this loader's: the more telling refusal comes first
            what, owner = owners[name]
            if name in state and name not in expected:
                if not stateful(owner):
                    why = f"this loader's {what} ({type(owner).__name__}) has no state_dict/load_state_dict"
                elif name == "dataset_state":
                    why = f"this loader has num_workers={num_workers} (a state per loader thread): set num_workers=0"
                else:
                    saved = len(state["worker_states"]) if isinstance(state.get("worker_states"), list) else "some"
                    why = f"this loader has num_workers={num_workers}: set num_workers={saved}"
                raise ValueError(f"state field {name!r}: saved with the {what}'s own state, but {why}")
        for name in expected:
            if name not in state:
                what, owner = owners[name]
                raise ValueError(f"state field {name!r} is missing: this loader's {what} ({type(owner).__name__}) "
                                 f"has state_dict and load_state_dict (num_workers={num_workers}), so its state "
                                 "must be in the state to resume it")
        saved = state.get("worker_states")
        if saved is not None and len(saved) != num_workers:
            raise ValueError(f"state field 'worker_states': saved by {len(saved)} loader threads, each with its "
                             f"dataset copy's state; this loader has num_workers={num_workers}: set "
                             f"num_workers={len(saved)} to resume it")
        round_robin = state.get("round_robin")
        if round_robin is not None and (round_robin["next"] >= num_workers
                                        or any(w >= num_workers for w in round_robin["ended"])):
            raise ValueError(f"state field 'round_robin' is {_short(round_robin)}: a worker id past "
                             f"num_workers={num_workers}")

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
                try:
                    length = len(order)
                except TypeError:  # a sampler without __len__: its epoch's length is unknown until it ends
                    return
                if skip > length:
                    raise ValueError(f"state field 'batches': {state['batches']} batches delivered, but epoch "
                                     f"{state['epoch']} has {length} here")

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
    unknown = sorted(map(repr, set(state) - set(STATE_FIELDS) - set(OBJECT_FIELDS)))
    if unknown:
        raise ValueError(f"state field {unknown[0]}: not a field of a fastload DataLoader state "
                         f"(fields: {', '.join([*STATE_FIELDS, *OBJECT_FIELDS])})")
    for name, (check, what) in STATE_FIELDS.items():
        if name not in state:
            raise ValueError(f"state field {name!r} is missing ({what})")
        if not check(state[name]):
            raise ValueError(f"state field {name!r} is {_short(state[name])}: expected {what}")
    for name, (check, what) in OBJECT_FIELDS.items():
        if name in state and not check(state[name]):
            raise ValueError(f"state field {name!r} is {_short(state[name])}: expected {what}")
    return dict(state)


def stateful(obj) -> bool:
    """torchdata's ``Stateful`` protocol: the object has both ``state_dict`` and ``load_state_dict``."""
    return obj is not None and callable(getattr(obj, "state_dict", None)) and callable(
        getattr(obj, "load_state_dict", None))


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


def _user_state(value) -> bool:
    return isinstance(value, dict)


def _worker_states(value) -> bool:
    return isinstance(value, list) and len(value) <= 1 << 16 and all(v is None or isinstance(v, dict) for v in value)


def _round_robin(value) -> bool:
    return (isinstance(value, dict) and set(value) == {"next", "ended"} and _int(0, 1 << 16)(value["next"])
            and isinstance(value["ended"], list) and all(_int(0, 1 << 16)(w) for w in value["ended"])
            and len(set(value["ended"])) == len(value["ended"]))


# The states of the loader's stateful objects (torchdata's protocol: ``state_dict`` and ``load_state_dict``),
# present exactly where this loader's objects have state (``Schedule.check_objects``).
OBJECT_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "sampler_state": (_user_state, "the sampler's state_dict(), a dict"),
    "batch_sampler_state": (_user_state, "the batch sampler's state_dict(), a dict"),
    "dataset_state": (_user_state, "the dataset's state_dict() (a loader without workers), a dict"),
    "worker_states": (_worker_states, "a list with, per loader thread, its dataset copy's state_dict() (a dict) "
                                      "or None"),
    "round_robin": (_round_robin, "{'next': the worker id an IterableDataset's next batch comes from, 'ended': "
                                  "the ids of the workers that ran out}"),
}
