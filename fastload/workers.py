"""Loader threads as torch's worker processes: their WorkerInfo, their copy of the dataset, worker_init_fn.

torch's DataLoader gives each worker process a copy of the dataset, seeds
that process's ``random``, ``torch`` and ``numpy`` generators from
``base_seed + worker_id``, runs ``worker_init_fn(worker_id)`` there, and
answers ``torch.utils.data.get_worker_info()`` with the worker's
``WorkerInfo``. Threads share one process, so fastload does the nearest
thing that keeps user code meaningful:

* ``get_worker_info()`` answers per thread. torch keeps the answer in one
  module global; fastload gives that function (the object itself, so every
  name already bound to it sees the change) a first look at a thread-local,
  installed once, when a loader first starts threads. Anywhere else --
  the training loop's thread, torch's own worker processes -- it returns
  what it returned before. The ``WorkerInfo`` is torch's, with
  ``worker_method="thread"`` and ``rng``: that thread's own ``random``,
  ``torch`` and ``numpy`` generators, seeded as a worker process would be.
* Each thread works on a shallow copy of the dataset (``info.dataset``),
  made when the epoch starts, as each worker process unpickles its own:
  what ``worker_init_fn`` or ``__getitem__`` sets on it (a per-worker HDF5
  or LMDB handle, an IterableDataset's shard) stays with that thread.
* A torch ``Generator``, ``random.Random``, numpy ``Generator`` or
  ``RandomState`` held by the dataset (an attribute, or an attribute of one
  of its attributes: ``dataset.g``, ``dataset.transform.rng``) is copied
  too, in its state as the epoch starts, as a worker process unpickles its
  own: threads never share (and race on) one, and each draws what that
  worker process would.
* ``worker_init_fn`` runs in its thread with the process generators seeded
  as that worker process's would be (``torch.initial_seed() == info.seed``,
  so PyTorch's ``seed_worker`` recipe reads the worker's seed), one thread
  at a time, and the training loop's generator states are put back after
  it (torch's CPU and CUDA generators, or the CUDA seeds still queued for
  a CUDA not yet initialized; numpy's; random's): a ``worker_init_fn`` that
  reseeds cannot make the loop's own draws repeat. One that outlives the
  loader's ``timeout`` is abandoned; should it ever return, it puts back
  the states it found, undoing the loop's draws in between.
* With ``persistent_workers=True`` the threads still start each epoch, but
  as the same workers: each keeps its dataset copy, and ``worker_init_fn``
  runs only the first time, as in torch's persistent worker processes.

* torch's CPU draws that user code makes in a loader thread without a
  ``generator=`` (``torch.rand``, ``Tensor.uniform_``, torchvision's random
  transforms) come from that worker's own generator, seeded as the worker
  process's global generator is (``base_seed + id``, then whatever
  ``worker_init_fn`` did to it), so they are the draws a worker process
  makes: ``worker_draws()`` is a thread-local ``TorchFunctionMode`` that
  hands the worker's generator to the random functions in ``RANDOM`` (the
  generic paths enter it around ``dataset[i]``, an iterator's ``next`` and
  ``collate_fn``). It is ``get_worker_info().rng.torch_generator`` (torch
  2.14 and later), so ``torch.thread_safe_generator()`` draws from the same
  stream. Inside it, ``torch.manual_seed``, ``torch.seed``,
  ``torch.initial_seed``, ``torch.get_rng_state`` and ``torch.set_rng_state``
  act on that generator (fastload replaces their code as it replaces
  ``get_worker_info``'s, once; elsewhere they run their own): a dataset that
  reseeds per sample, or uses ``torch.random.fork_rng``, does so in its
  worker only, as in a worker process, and never reseeds the training loop.

What cannot be made per thread: draws from numpy's and random's process-wide
generators (``np.random``, ``random``), CUDA draws (and the CUDA seeding a
worker's ``torch.manual_seed`` would do), ``torch.default_generator`` used
directly, and torch ops that take no ``generator`` (dropout, rrelu) or that
run inside a Python-level torch function the mode sees whole
(``F.gumbel_softmax``, ``F.fractional_max_pool2d``) share the process's
generators with the training loop and with the other threads, as threads
must. Use ``get_worker_info().rng`` for per-worker numpy and random
streams (torch 2.14 and later; older torch has no such generators, and a
thread's WorkerInfo has none there either).
"""

from __future__ import annotations

import contextlib
import copy
import random
import threading
import types
import warnings
from typing import Any, Callable

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils.data._utils import worker as torch_worker

from .schedule import stateful
from .sources import Source

_local = threading.local()
_install_lock = threading.Lock()
_process_rng_lock = threading.Lock()  # worker_init_fn calls swap the process generators: one at a time

# What torch's get_worker_info runs once fastload is installed; compiled in torch's module namespace.
_THREAD_AWARE = '''
def get_worker_info():
    info = getattr(_fastload_thread_workers, "info", None)
    return _worker_info if info is None else info
'''


# What torch.random's functions run once fastload is installed: inside WorkerDraws, on the thread's generator.
_THREAD_AWARE_RNG = '''
def manual_seed(seed):
    drawing = getattr(_fastload_thread_workers, "drawing", None)
    return _fastload_original["manual_seed"](seed) if not drawing else drawing[-1].manual_seed(int(seed))

def seed():
    drawing = getattr(_fastload_thread_workers, "drawing", None)
    return _fastload_original["seed"]() if not drawing else drawing[-1].seed()

def initial_seed():
    drawing = getattr(_fastload_thread_workers, "drawing", None)
    return _fastload_original["initial_seed"]() if not drawing else drawing[-1].initial_seed()

def get_rng_state():
    drawing = getattr(_fastload_thread_workers, "drawing", None)
    return _fastload_original["get_rng_state"]() if not drawing else drawing[-1].get_state()

def set_rng_state(new_state):
    drawing = getattr(_fastload_thread_workers, "drawing", None)
    return _fastload_original["set_rng_state"](new_state) if not drawing else drawing[-1].set_state(new_state)
'''


def install_worker_info() -> None:
    """Make torch.utils.data.get_worker_info() answer per thread, and torch.random's seed and state functions
    act on the worker's generator inside ``WorkerDraws`` (idempotent; see the module docstring)."""
    with _install_lock:
        function = torch_worker.get_worker_info
        if getattr(function, "_fastload_thread_aware", False):
            return
        torch_worker._fastload_thread_workers = _local
        compiled: dict = {}
        exec(compile(_THREAD_AWARE, torch_worker.__file__, "exec"), vars(torch_worker), compiled)
        function.__code__ = compiled["get_worker_info"].__code__
        _install_thread_aware_rng()
        function._fastload_thread_aware = True


def _install_thread_aware_rng() -> None:
    """Give torch.random's manual_seed, seed, initial_seed, get_rng_state and set_rng_state (the function
    objects themselves, which ``torch.manual_seed`` and the others are) a first look at the calling thread's
    ``WorkerDraws``; elsewhere they run their own code, kept as a copy."""
    module = torch.random
    compiled: dict = {}
    exec(compile(_THREAD_AWARE_RNG, module.__file__, "exec"), vars(module), compiled)
    originals = {}
    for name in compiled:
        function = getattr(module, name)
        originals[name] = types.FunctionType(function.__code__, function.__globals__, name,
                                             function.__defaults__, function.__closure__)
    module._fastload_thread_workers = _local
    module._fastload_original = originals
    for name, replacement in compiled.items():
        getattr(module, name).__code__ = replacement.__code__


def current_dataset(default: Any) -> Any:
    """The dataset copy of the calling loader thread, ``default`` elsewhere."""
    info = getattr(_local, "info", None)
    return default if info is None else info.dataset


def dataset_state(default: Any = None) -> Any:
    """The calling thread's dataset copy's (``default`` without one) ``state_dict()``, copied, taken under
    its worker draws: a state that is ``torch.get_rng_state()`` is that worker's generator's, as in its
    worker process."""
    with worker_draws():
        return copy.deepcopy(current_dataset(default).state_dict())


GENERATORS = (torch.Generator, random.Random, np.random.Generator, np.random.RandomState)


def _generator_copy(generator):
    """A generator in the state ``generator`` is in now (a torch.Generator as pickling copies it)."""
    if isinstance(generator, torch.Generator):
        clone = torch.Generator(device=generator.device)
        clone.set_state(generator.get_state())
        return clone
    return copy.deepcopy(generator)


def own_generators(dataset: Any) -> None:
    """Give a thread's shallow ``dataset`` copy its own copies of the generators it holds: its attributes
    that are one (``GENERATORS``), and those of its attributes' objects (``dataset.transform.rng``; the
    object is copied shallowly to hold them). A worker process's dataset is a copy of all of them."""
    attributes = getattr(dataset, "__dict__", None)
    if not isinstance(attributes, dict):
        return
    for name, value in list(attributes.items()):
        if isinstance(value, GENERATORS):
            attributes[name] = _generator_copy(value)
            continue
        inner = getattr(value, "__dict__", None)
        if (not isinstance(inner, dict) or isinstance(value, (type, types.ModuleType, types.FunctionType))
                or not any(isinstance(v, GENERATORS) for v in inner.values())):
            continue
        try:
            holder = copy.copy(value)
        except Exception as error:  # noqa: BLE001 -- any failure: share it, and say so
            warnings.warn(f"fastload: could not copy {type(dataset).__name__}.{name} for a loader thread "
                          f"({error!r}); the threads share its generators", stacklevel=3)
            continue
        for inner_name, inner_value in list(vars(holder).items()):
            if isinstance(inner_value, GENERATORS):
                vars(holder)[inner_name] = _generator_copy(inner_value)
        attributes[name] = holder


class ThreadWorkers:
    """One epoch's worker identities: ``init_thread(i)`` makes the calling thread worker ``i`` of ``num_workers``.

    Args:
        dataset: what each thread gets a shallow copy of (``copy_dataset``),
            or shares (fastload's own sources, which no user code mutates).
        base_seed: drawn by the loader each epoch as torch's iterator draws
            it; worker i's seed is ``base_seed + i``, as in torch.
        worker_init_fn: torch's, called with the worker id.
    """

    def __init__(self, dataset: Any, num_workers: int, base_seed: int,
                 worker_init_fn: Callable[[int], None] | None, copy_dataset: bool = True):
        self.dataset = dataset
        self.num_workers = num_workers
        self.base_seed = base_seed
        self.worker_init_fn = worker_init_fn
        self.copy_dataset = copy_dataset
        self._infos: dict[int, Any] = {}  # worker id -> its WorkerInfo, once initialized
        self.restore: list | None = None  # per worker, a resumed state to load into its dataset copy, or None
        self.keep_states = False  # note each copy's state as the threads start (a stateful dataset)
        self._started: dict[int, Any] = {}

    def init_thread(self, index: int) -> None:
        """Run in loader thread ``index`` before it takes work (again each epoch, for persistent workers:
        then the worker is the one it was, and its worker_init_fn has run already). A resumed state's dataset
        copy state is loaded last, as torchdata's workers load it (``restore``)."""
        if index in self._infos:
            _local.info, _local.draws = self._infos[index]
        else:
            self._new_worker(index)
        if self.restore is not None and self.restore[index] is not None:
            with worker_draws():
                try:
                    _local.info.dataset.load_state_dict(copy.deepcopy(self.restore[index]))
                except BaseException as error:
                    error.add_note(f"fastload: raised in the dataset's load_state_dict (the resumed state of "
                                   f"worker {index}) on loader thread {threading.current_thread().name}")
                    raise
        if self.keep_states:
            self._started[index] = dataset_state()

    def _new_worker(self, index: int) -> None:
        seed = self.base_seed + index
        numpy_seed = torch_worker._generate_state(self.base_seed, index)
        generator = torch.Generator().manual_seed(seed)  # the worker process's torch.manual_seed(seed)
        extra = {}
        if hasattr(torch_worker, "_RNG"):  # torch >= 2.14's per-worker generators (older torch has none)
            extra["rng"] = torch_worker._RNG(random_generator=random.Random(seed), torch_generator=generator,
                                             numpy_generator=np.random.default_rng(numpy_seed))
        _local.info = torch_worker.WorkerInfo(id=index, num_workers=self.num_workers, seed=seed,
                                              dataset=self._dataset_copy(), worker_method="thread", **extra)
        _local.draws = WorkerDraws(generator)
        if self.worker_init_fn is not None:
            self._run_worker_init_fn(index, seed, numpy_seed, generator, extra.get("rng"))
        self._infos[index] = _local.info, _local.draws

    def started_states(self) -> list:
        """Each thread's dataset copy's state as this epoch's threads started (None where not kept)."""
        return [self._started.get(index) for index in range(self.num_workers)]

    def _run_worker_init_fn(self, index: int, seed: int, numpy_seed, generator: torch.Generator, rng) -> None:
        with _process_rng_lock, _as_worker_process(seed, numpy_seed):
            try:
                self.worker_init_fn(index)
            except BaseException as error:
                error.add_note(f"fastload: raised in worker_init_fn({index}) on loader thread "
                               f"{threading.current_thread().name}")
                raise
            # The worker's draws go on from where its worker_init_fn left the process's generators
            # (a reseed included); numpy's global generator is another algorithm than rng.numpy_generator.
            generator.set_state(torch.get_rng_state())
            if rng is not None:
                rng.random_generator.setstate(random.getstate())

    def _dataset_copy(self) -> Any:
        if not self.copy_dataset:
            return self.dataset
        try:
            dataset = copy.copy(self.dataset)
        except Exception as error:  # noqa: BLE001 -- any failure: share it, and say so
            warnings.warn(f"fastload: could not copy {type(self.dataset).__name__} for a loader thread "
                          f"({error!r}); the threads share one dataset object", stacklevel=2)
            return self.dataset
        own_generators(dataset)
        return dataset


class Workers:
    """A loader's worker identities across epochs: new ``ThreadWorkers`` each epoch, or, with
    ``persistent_workers``, the same ones (torch's persistent worker processes)."""

    def __init__(self):
        self.current: ThreadWorkers | None = None

    def for_epoch(self, loader, base_seed: int, restore: list | None = None) -> ThreadWorkers:
        """This epoch's workers; ``restore``: per worker, the dataset copy state a resumed epoch loads.
        Persistent workers are kept unless ``num_workers`` or ``worker_init_fn`` was set since (then they
        start again as new workers, with the new settings)."""
        current = self.current
        if not (loader.persistent_workers and current is not None and current.num_workers == loader.num_workers
                and current.worker_init_fn is loader.worker_init_fn):
            install_worker_info()
            self.current = ThreadWorkers(loader.dataset, loader.num_workers, base_seed, loader.worker_init_fn,
                                         copy_dataset=not isinstance(loader.dataset, Source))
        self.current.restore = restore
        self.current.keep_states = stateful(loader.dataset)
        self.current._started = {}
        return self.current


class _as_worker_process:
    """Seed the process's torch (CPU), random and numpy generators as worker process ``seed`` would have
    them; put the caller's states back on exit."""

    def __init__(self, seed: int, numpy_seed):
        self.seed, self.numpy_seed = seed, numpy_seed

    def __enter__(self) -> None:
        self.saved = torch.get_rng_state(), random.getstate(), np.random.get_state(), _cuda_rng_state()
        torch.default_generator.manual_seed(self.seed)
        random.seed(self.seed)
        np.random.seed(self.numpy_seed)

    def __exit__(self, *exc) -> None:
        torch_state, random_state, numpy_state, cuda_state = self.saved
        torch.set_rng_state(torch_state)
        random.setstate(random_state)
        np.random.set_state(numpy_state)
        _set_cuda_rng_state(cuda_state)


def _cuda_rng_state() -> tuple[str, Any]:
    """torch.manual_seed also seeds CUDA: its generators' states, or (before CUDA is initialized) the seed
    calls torch has queued for initialization."""
    if torch.cuda.is_initialized():
        return "states", torch.cuda.get_rng_state_all()
    tracker = getattr(torch.cuda, "_lazy_seed_tracker", None)
    if tracker is None:
        return "none", None
    return "queued", {name: list(value) if isinstance(value, list) else value
                      for name, value in vars(tracker).items()}


def _set_cuda_rng_state(state: tuple[str, Any]) -> None:
    kind, value = state
    if kind == "states" and torch.cuda.is_initialized():
        torch.cuda.set_rng_state_all(value)
    elif kind == "queued" and not torch.cuda.is_initialized():
        vars(torch.cuda._lazy_seed_tracker).update(value)


# torch's functions that draw from a CPU generator and take ``generator=`` (keyword-only in all of them)
RANDOM = frozenset({
    torch.rand, torch.randn, torch.randint, torch.randperm, torch.rand_like, torch.randn_like,
    torch.randint_like, torch.normal, torch.bernoulli, torch.multinomial, torch.poisson, torch.binomial,
    torch._standard_gamma, torch._sample_dirichlet,
    torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.random_, torch.Tensor.bernoulli_,
    torch.Tensor.bernoulli, torch.Tensor.exponential_, torch.Tensor.cauchy_, torch.Tensor.geometric_,
    torch.Tensor.log_normal_, torch.Tensor.multinomial,
})


class WorkerDraws(TorchFunctionMode):
    """While entered (in one thread: torch's mode stack is thread-local), a CPU draw in ``RANDOM`` made
    without a generator draws from ``generator``, as if it were the process's global one; and (once
    ``install_worker_info`` has run) ``torch.manual_seed``, ``seed``, ``initial_seed``, ``get_rng_state``
    and ``set_rng_state`` act on it, as a worker process's act on its own global generator."""

    def __init__(self, generator: torch.Generator):
        super().__init__()
        self.generator = generator

    def __enter__(self):
        if getattr(_local, "drawing", None) is None:
            _local.drawing = []
        _local.drawing.append(self.generator)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            _local.drawing.pop()

    def __torch_function__(self, func, kinds, args=(), kwargs=None):
        if kwargs is None:
            kwargs = {}
        if func in RANDOM and kwargs.get("generator") is None and _draws_on_cpu(args, kwargs):
            kwargs["generator"] = self.generator
        return func(*args, **kwargs)


def _draws_on_cpu(args: tuple, kwargs: dict) -> bool:
    """Whether a random function called with these arguments draws on the CPU: its ``out`` or ``device``,
    else its first tensor argument's device (``Tensor.uniform_``'s self, a ``*_like``'s input), else the
    default device (a factory)."""
    where = kwargs.get("out")
    if where is None:
        where = kwargs.get("device")
    if where is None:
        where = next((arg for arg in args if isinstance(arg, torch.Tensor)), None)
    if isinstance(where, torch.Tensor):
        return where.device.type == "cpu"
    if where is None:
        where = torch.get_default_device()
    return torch.device(where).type == "cpu"


def worker_draws() -> Any:
    """A context in which the calling loader thread's torch draws are its worker's (``WorkerDraws``); one
    that does nothing in any other thread (the training loop's, with ``num_workers=0``, draws from the
    process's generator, as torch's does)."""
    draws = getattr(_local, "draws", None)
    return contextlib.nullcontext() if draws is None else draws


def worker_generator() -> torch.Generator:
    """The generator the calling thread's torch draws come from: its worker's in a loader thread, else the
    process's default one (``num_workers=0``: the training loop's thread draws from it, as torch's does)."""
    draws = getattr(_local, "draws", None)
    return torch.default_generator if draws is None else draws.generator


def no_worker_info() -> "_without_info":
    """Hide the calling thread's WorkerInfo (collate: torch's default_collate would put every batch in
    shared memory for a worker process's pipe)."""
    return _without_info()


class _without_info:
    def __enter__(self) -> None:
        self.info = getattr(_local, "info", None)
        _local.info = None

    def __exit__(self, *exc) -> None:
        _local.info = self.info
