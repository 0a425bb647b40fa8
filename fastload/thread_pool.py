"""The thread pool that runs batches: the only module of fastload that starts threads.

A batch is a ``Job``: one task per item (read, decode, augment one sample;
or call ``dataset[i]``), and a ``finish`` step that runs once, on the thread
that completed the job's last item (collate, or normalize the staged batch)
-- or, with ``serial_finish``, on one extra thread that finishes the jobs
in order, at most ``serial_finish`` ahead of the consumer: the device
stage, which issues a batch's GPU work from one thread (nvJPEG serializes
its callers anyway) and must not run further ahead than its output slots.
``handover`` runs on each output in the consumer's thread as it is
returned (the device path makes the consumer's stream wait for the batch).
The consumer keeps at most ``max_in_flight`` jobs queued, takes their
outputs in order, and re-raises a job's error in the training loop;
``on_deliver(False)`` is called for each output handed over,
``on_deliver(False, failed=True)`` for a batch whose error is raised in the
training loop instead (it is consumed: torch's iterator has drawn its
indices, so a state saved after it resumes after it), and
``on_deliver(True)`` once the data has run out (the loader's resume state).

An error in a job (a dataset's, a collate_fn's, a bad file's) is raised
in the training loop and that batch is dropped; the next ``next()`` goes
on with the following batch, as torch's iterator does. A timeout ends the
iteration at once: the stuck threads are told to stop and are not waited
for (they end when their call returns).

``thread_init(i)`` runs first on thread i (worker_init_fn, worker info);
the constructor returns once every thread has run it, and an error in it
is raised by the first ``next()``, as torch raises a worker's. With
``pinned=True`` every job names the thread that runs it (``Job.worker``:
an IterableDataset's worker iterates its own iterator). A job whose output
is ``SKIP`` yields nothing (a worker whose iterator ran out before the
batch it was given).

Shutdown is explicit (``close()``) and automatic: on exhaustion, when the
iterator is garbage-collected (after a ``break``, or an exception or
Ctrl-C that leaves the training loop), on an error or KeyboardInterrupt
raised while waiting for a batch, and at interpreter exit through
``threading._register_atexit``, which runs before Python joins non-daemon
threads (plain ``atexit`` runs after, too late). Every shutdown is bounded:
``close()`` tells the threads to stop and waits for them at most the
loader's ``timeout`` seconds in all (``CLOSE_TIMEOUT`` where ``timeout``
is 0). A thread still inside a call then (a ``__getitem__`` blocked on a
lock or a network read) is reported by a ``StuckThreadWarning`` naming the
thread and the sample it is on, and left behind: threads are daemon
threads, so a stuck one does not keep the interpreter from exiting. The
exit hook joins every thread that can stop first, so only a thread that
was already stuck can be cut short at exit.
"""

from __future__ import annotations

import collections
import itertools
import queue
import threading
import time
import warnings
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol, runtime_checkable

import torch

from .errors import StuckThreadWarning

if TYPE_CHECKING:
    from .transforms import Plan

_LIVE: "weakref.WeakSet[ThreadPool]" = weakref.WeakSet()
_COUNTER = itertools.count()
THREAD_PREFIX = "fastload-"


def _one_intra_op_thread() -> None:
    """Torch ops in this loader thread run on it alone, as torch runs them in its worker processes and its
    pin-memory thread (each calls torch.set_num_threads(1)): N loader threads each fanning an op out to
    every core oversubscribe the machine -- a DALI resize took 934 ms a sample that way, 51 ms on one thread.
    With torch's OpenMP backend the setting is the calling thread's; it also becomes the default of
    threads that start using torch later, as after torch's pin-memory thread."""
    torch.set_num_threads(1)
END = object()  # a job output meaning "the data ran out": iteration stops there
SKIP = object()  # a job output meaning "nothing here": iteration goes on with the next job
# How long close() waits for the threads in all when the loader's timeout is 0 (no limit on a batch): a
# thread between two items stops at once, one in the middle of a sample's read or decode in milliseconds;
# only a call that blocks (a stuck network read, a lock) outlives it. Read at each close().
CLOSE_TIMEOUT = 5.0


def _close_all_at_exit() -> None:
    for pool in list(_LIVE):
        pool.close()


try:
    threading._register_atexit(_close_all_at_exit)
except (AttributeError, RuntimeError):  # not in this Python, or already shutting down
    import atexit
    atexit.register(_close_all_at_exit)


class Job:
    """One batch in flight: ``tasks[i](report)`` per item, then ``finish(results)``.

    A task may call ``report(stage, what)`` so that a timeout can say which
    stage and which file are stuck; ``what[i]`` names item i (its file or
    sample) before any thread has started it. ``worker``: the one thread
    that runs this job's tasks (None: any). ``taken``: run in the consumer's
    thread as the pool takes the job in order, whatever its output (a
    batch, SKIP, an error): the resume state's record of what made it.
    """

    def __init__(self, tasks: list[Callable[[Callable[[str, str], None]], Any]],
                 finish: Callable[[list], Any], what: list[str] | None = None, worker: int | None = None,
                 discard: Callable[[], None] | None = None, taken: Callable[[], None] | None = None):
        self.tasks = tasks
        self.taken = taken
        self.finish = finish
        self.discard = discard  # run instead of finish when an item failed (gives back a buffer)
        self.worker = worker
        self.results: list = [None] * len(tasks)
        self.stages: list = [("queued", name) for name in (what or [""] * len(tasks))]
        self.remaining = len(tasks)
        self.error: BaseException | None = None
        self.output: Any = None
        self.done = threading.Event()
        self.items_done: threading.Event | None = None  # set: the serial finisher finishes this job
        self._lock = threading.Lock()

    def run_item(self, i: int) -> None:
        if self.error is None:
            def report(stage: str, what: str, _i=i) -> None:
                self.stages[_i] = (stage, what)
            try:
                self.results[i] = self.tasks[i](report)
            except BaseException as error:  # delivered to the consumer, never lost
                with self._lock:
                    self.error = self.error or error
        self.stages[i] = ("done", "")
        with self._lock:
            self.remaining -= 1
            last = self.remaining == 0
        if last:
            if self.items_done is not None:
                self.items_done.set()
            else:
                self._finish()

    def _finish(self) -> None:
        if self.error is None:
            try:
                self.output = self.finish(self.results)
            except BaseException as error:
                self.error = error
        elif self.discard is not None:
            self.discard()
        self.results = None
        self.done.set()

    def stuck(self) -> str:
        pending = [f"{what or 'an item'} in stage '{stage}'" + (" (no loader thread has started it)"
                                                                  if stage == "queued" else "")
                   for stage, what in self.stages if stage != "done"]
        return "; ".join(pending[:4]) or "in stage 'finish' (collate / normalize / copy)"


@dataclass
class Stages:
    """What a path runs in an epoch, declared for ``ThreadPool``.

    ``jobs``: one per batch; its tasks (per sample) run in the pool, then
    its finish runs in the pool, or with ``finish_in_order=k`` in order on
    one extra thread, at most k batches ahead of the training loop.
    ``handover`` runs on each output in the training loop's thread.
    ``pinned``: every job names the thread that runs it. ``in_flight``:
    how many jobs are queued ahead.
    """

    jobs: Iterator[Job]
    in_flight: int
    finish_in_order: int = 0
    handover: Callable[[Any], Any] | None = None
    pinned: bool = False


def batches_ahead(loader, threads: int | None = None) -> int:
    """How many batches a path keeps in flight ahead of the training loop: torch's bound,
    ``prefetch_factor`` (2 when None) per loader thread -- ``threads`` of them, by default the loader's
    ``num_workers`` (one without workers, whose batches the loop's own thread makes)."""
    if threads is None:
        threads = max(loader.num_workers, 1)
    return (loader.prefetch_factor or 2) * threads


@runtime_checkable
class LoaderPath(Protocol):
    """The interface of a loader's path -- the object that turns an epoch's batches into ``Stages`` --, as
    the loader uses it. ``paths.choose_path`` picks one per loader; ``generic.MapPath`` and
    ``IterablePath``, ``batch.CpuPath``, ``device.DevicePath`` and DALI's ``GraphPath``
    (``compat/engine/execution.py``) are the ones there are, and a front end's source can bring its own
    (``fastload_path(loader)``). Written out so that a new path has one contract to meet, not prose.

    Attributes:
        fast: fastload decodes and augments the samples itself (``loader.fast_path``): the CPU fast
            path and the device path.
        on_device: they are decoded and augmented on the loader's device (``loader.device_path``).
        plan: the compiled transform the path runs, or None. At each epoch the loader compiles the
            dataset's transform again and chooses a new path if the plan differs (progressive
            resizing); a path with a plan is a ``sample_reader.SampleReader``, whose ``samples``,
            ``target_transform`` and ``read_bytes`` the loader renews when only those changed.
    """

    fast: bool
    on_device: bool
    plan: Plan | None

    def stages(self, batches: Iterator[list[tuple[int, int]]] | None, epoch: int, order: Any) -> Stages:
        """The epoch's declared stages: ``batches`` of (position in the epoch, dataset index) from
        ``order`` (None for a plain IterableDataset, which has neither), one job each."""
        ...


class ThreadPool:
    """Runs ``jobs`` on ``num_threads`` threads and yields their outputs in order.

    With ``num_threads=0`` everything runs in the consumer's thread, as
    torch's DataLoader does with ``num_workers=0``.
    """

    def __init__(self, jobs: Iterator[Job], num_threads: int, max_in_flight: int,
                 timeout: float = 0, on_wait: Callable[[float], None] | None = None,
                 thread_init: Callable[[int], None] | None = None, length: int | None = None,
                 on_deliver: Callable[[bool], None] | None = None, serial_finish: int = 0,
                 handover: Callable[[Any], Any] | None = None, pinned: bool = False):
        self._jobs = jobs
        self._handover = handover
        self._on_deliver = on_deliver
        self._max_in_flight = max(1, max_in_flight)
        self._timeout = timeout
        self._on_wait = on_wait
        self._length = length
        self._in_flight: collections.deque[Job] = collections.deque()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()  # tasks any thread may run
        # pinned: each thread's own queue; else all threads take from the one queue
        self._queues = [queue.SimpleQueue() if pinned else self._queue for _ in range(num_threads)]
        self._exhausted = False
        self._closed = False
        self._inits = _Inits(num_threads if thread_init is not None else 0)
        # per thread, what it is doing now (None: waiting for work), for close() to name a stuck one
        self._busy: list = [None] * (num_threads + 1)
        pool_id = next(_COUNTER)
        self._threads = [threading.Thread(target=self._work,
                                          args=(self._queues[i], thread_init, i, self._inits, self._busy),
                                          name=f"{THREAD_PREFIX}{pool_id}-{i}", daemon=True)
                         for i in range(num_threads)]
        self._finishing: queue.SimpleQueue | None = None
        if serial_finish and num_threads:
            self._finishing = queue.SimpleQueue()
            self._finish_ahead = threading.Semaphore(serial_finish)
            self._threads.append(threading.Thread(
                target=self._finish_in_order, args=(self._finishing, self._finish_ahead, self._busy),
                name=f"{THREAD_PREFIX}{pool_id}-finish", daemon=True))
        _LIVE.add(self)
        torch.get_num_threads()  # this thread's intra-op threads set up before the workers lower the default
        for thread in self._threads:
            thread.start()
        self._init_error = self._inits.wait(timeout)

    @staticmethod
    def _work(tasks: queue.SimpleQueue, thread_init, index: int, inits: "_Inits", busy: list) -> None:
        # A staticmethod holding only the queues: a running thread must not keep
        # the pool alive, or garbage collection could never close it.
        _one_intra_op_thread()
        if thread_init is not None:
            busy[index] = "worker_init_fn"
            try:
                thread_init(index)  # worker info, torch's worker_init_fn(worker_id): once per thread
            except BaseException as error:
                inits.done(error)
                return
            finally:
                busy[index] = None
            inits.done(None)
        while True:
            item = tasks.get()
            if item is None:
                return
            job, i = item
            busy[index] = item
            job.run_item(i)
            # A waiting thread must not hold its last job: a failed job's error, once raised in the
            # training loop, references the pool (its traceback), which could then never be collected.
            busy[index] = item = job = None

    @staticmethod
    def _finish_in_order(jobs: queue.SimpleQueue, ahead: threading.Semaphore, busy: list) -> None:
        _one_intra_op_thread()
        while True:
            job = jobs.get()
            if job is None:
                return
            job.items_done.wait()
            ahead.acquire()  # released as the consumer takes a job, or by close()
            busy[-1] = (job, None)
            job._finish()
            busy[-1] = job = None

    def _fill(self) -> None:
        while not self._exhausted and len(self._in_flight) < self._max_in_flight:
            job = next(self._jobs, None)
            if job is None:
                self._exhausted = True
                return
            self._in_flight.append(job)
            if self._finishing is not None:
                job.items_done = threading.Event()
                if not job.tasks:
                    job.items_done.set()
                self._finishing.put(job)
            if self._threads:
                if not job.tasks and self._finishing is None:
                    job._finish()
                tasks = self._queue if job.worker is None else self._queues[job.worker]
                for i in range(len(job.tasks)):
                    tasks.put((job, i))

    def __iter__(self):
        return self

    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        try:
            if self._init_error is not None:
                raise self._init_error
            return self._next_output()
        except _JobFailed as failed:  # that batch is dropped; the iteration can go on
            error = failed.error
            if not isinstance(error, Exception):  # a KeyboardInterrupt or SystemExit in a task (no threads)
                self.close()
        except _TimedOut as timed_out:
            self.close(join=False)
            error = RuntimeError(str(timed_out))
        except BaseException:
            self.close()
            raise
        # The error's traceback keeps this frame: it must not keep the pool (and its threads) alive once
        # the training loop has let go of it, as a `for` loop the error leaves does.
        del self
        raise error  # outside the handler: the error keeps its own cause and context

    def _next_output(self) -> Any:
        while True:
            self._fill()
            if not self._in_flight:
                self._ended()
                raise StopIteration
            job = self._in_flight.popleft()
            if not self._threads:
                for i in range(len(job.tasks)):
                    job.run_item(i)
                if not job.tasks:
                    job._finish()
            started = time.perf_counter()
            if not job.done.wait(self._timeout if self._timeout > 0 else None):
                raise _TimedOut(f"DataLoader timed out after {self._timeout} seconds waiting "
                                f"for a batch: {job.stuck()}")
            if self._on_wait is not None:
                self._on_wait(time.perf_counter() - started)
            if self._finishing is not None:
                self._finish_ahead.release()
            if job.taken is not None:
                job.taken()
            if job.error is not None:
                if self._on_deliver is not None and isinstance(job.error, Exception):
                    self._on_deliver(False, failed=True)  # consumed: torch's sampler has moved past it too
                raise _JobFailed(job.error)
            if job.output is END:
                self._ended()
                raise StopIteration
            if job.output is SKIP:
                continue
            self._fill()  # keep the threads busy while the training step runs
            if self._on_deliver is not None:
                self._on_deliver(False)
            return job.output if self._handover is None else self._handover(job.output)

    def _ended(self) -> None:
        if self._on_deliver is not None and not self._closed:
            self._on_deliver(True)

    def __len__(self) -> int:
        if self._length is None:
            raise TypeError("this loader's length is unknown (an IterableDataset without __len__)")
        return self._length

    def close(self, join: bool = True) -> None:
        """Stop queued work, stop every thread and wait for them -- at most the ``timeout`` in all
        (``CLOSE_TIMEOUT`` where it is 0); warn, naming each thread still running and the sample it is on
        (``join=False``: do not wait). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for job in self._in_flight:
            job.error = job.error or RuntimeError("thread pool closed")
            if job.items_done is not None:
                job.items_done.set()  # the serial finisher skips it (it has an error)
        self._in_flight.clear()
        for tasks in self._queues:
            tasks.put(None)
        if self._finishing is not None:
            self._finishing.put(None)
            for _ in range(self._max_in_flight + 1):
                self._finish_ahead.release()
        _LIVE.discard(self)
        if join:
            self._join()

    def _join(self) -> None:
        bound = self._timeout if self._timeout > 0 else CLOSE_TIMEOUT
        deadline = time.monotonic() + bound
        current = threading.current_thread()
        for thread in self._threads:
            if thread is not current:
                thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [f"{thread.name} on {_doing(self._busy[i])}"
                 for i, thread in enumerate(self._threads) if thread is not current and thread.is_alive()]
        if stuck:
            warnings.warn(f"fastload: {len(stuck)} loader thread(s) did not stop within {bound:g} s of close() "
                          f"and are left running as daemon threads, each until its call returns: "
                          f"{'; '.join(stuck)}", StuckThreadWarning, stacklevel=3)

    def __del__(self) -> None:
        self.close()


def _doing(entry) -> str:
    """What a thread's ``_busy`` entry says it is doing."""
    if entry is None:
        return "no sample (between two)"
    if isinstance(entry, str):
        return entry
    job, i = entry
    if i is None:
        return "the finish step of a batch (collate / normalize / copy)"
    stage, what = job.stages[i]
    return f"{what or f'item {i} of a batch'} (stage '{stage}')"


class _JobFailed(Exception):
    """A job's error, on its way to the training loop."""

    def __init__(self, error: BaseException):
        self.error = error


class _TimedOut(Exception):
    """No batch within the timeout."""


class _Inits:
    """Counts the threads whose ``thread_init`` has run; keeps the first error."""

    def __init__(self, threads: int):
        self._pending = threads
        self._error: BaseException | None = None
        self._changed = threading.Condition()

    def done(self, error: BaseException | None) -> None:
        with self._changed:
            self._pending -= 1
            self._error = self._error or error
            self._changed.notify_all()

    def wait(self, timeout: float) -> BaseException | None:
        """Wait until every thread has run its init: the first error, or a timeout's (timeout > 0)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._pending == 0 or self._error is not None,
                                          timeout if timeout > 0 else None):
                return _TimedOut(f"DataLoader timed out after {timeout} seconds waiting for "
                                 f"{self._pending} loader thread(s) to run worker_init_fn")
            return self._error
