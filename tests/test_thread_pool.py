import gc
import re
import signal
import subprocess
import sys
import threading
import time
import types
import warnings

import pytest
import torch

import fastload
from fastload import DataLoader, recipes
from fastload import thread_pool as pool_module
from fastload.errors import StuckThreadWarning
from fastload.thread_pool import END, THREAD_PREFIX, Job, LoaderPath, Stages, ThreadPool, batches_ahead

from conftest import ctrl_c_default


def fastload_threads():
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX) and t.is_alive()]


def jobs(count, delay=0.0, fail_at=None):
    for n in range(count):
        def task(report, n=n, i=0):
            time.sleep(delay)
            if n == fail_at:
                raise KeyError(f"bad item in job {n}")
            return n
        yield Job([task, task], lambda results: sum(results))


@pytest.mark.parametrize("threads", [0, 1, 3])
def test_outputs_in_order_and_threads_joined_on_exhaustion(threads):
    pool = ThreadPool(jobs(20), threads, max_in_flight=4, length=20)
    assert list(pool) == [2 * n for n in range(20)]
    assert len(pool) == 20
    assert not fastload_threads()


def test_torch_ops_in_loader_threads_run_on_one_thread_as_in_torchs_workers():
    """torch's workers and pin-memory thread call torch.set_num_threads(1); the loader threads do too (else N
    threads each fan an op out to every core), and the thread that made the pool keeps its own count."""
    before = torch.get_num_threads()
    seen = []

    def job(n):
        def task(report):
            seen.append(torch.get_num_threads())
            return n
        return Job([task], lambda results: results[0])

    assert list(ThreadPool((job(n) for n in range(6)), 2, max_in_flight=2)) == list(range(6))
    assert seen == [1] * 6 and torch.get_num_threads() == before


def test_break_then_garbage_collection_joins_threads():
    pool = ThreadPool(jobs(100, delay=0.001), 2, max_in_flight=4)
    for output in pool:
        if output == 4:
            break
    assert fastload_threads()
    del pool
    gc.collect()
    assert not fastload_threads()


def test_error_reaches_consumer_which_may_go_on_as_with_torch():
    pool = ThreadPool(jobs(10, fail_at=3), 2, max_in_flight=4)
    seen = []
    with pytest.raises(KeyError, match="bad item in job 3"):
        for output in pool:
            seen.append(output)
    assert seen == [0, 2, 4]
    assert list(pool) == [8, 10, 12, 14, 16, 18]  # that batch is dropped, the next ones come
    assert not fastload_threads()  # joined on exhaustion


def test_a_failed_job_gives_its_buffer_back():
    given_back = []
    failing = Job([lambda report: 1 / 0], lambda results: results, discard=lambda: given_back.append(True))
    pool = ThreadPool(iter([failing]), 1, max_in_flight=1)
    with pytest.raises(ZeroDivisionError):
        next(pool)
    assert given_back == [True]
    pool.close()


def test_timeout_names_the_stuck_stage():
    release = threading.Event()

    def stuck(report):
        report("decode", "/data/slow.jpg")
        release.wait(5)
    pool = ThreadPool(iter([Job([stuck], lambda r: r)]), 1, max_in_flight=1, timeout=0.2)
    try:
        with pytest.raises(RuntimeError, match=r"timed out after 0.2 seconds.*/data/slow.jpg in stage 'decode'"):
            next(pool)
    finally:
        release.set()
        pool.close()


def test_end_marker_stops_iteration():
    outputs = iter([Job([lambda r: 1], lambda r: r[0]), Job([lambda r: END], lambda r: r[0]),
                    Job([lambda r: 3], lambda r: r[0])])
    assert list(ThreadPool(outputs, 1, max_in_flight=3)) == [1]


def finishing_jobs(count, log, fail_at=None):
    """Jobs whose finish records (job, thread name) and fails at job ``fail_at``."""
    for n in range(count):
        def finish(results, n=n):
            log.append((n, threading.current_thread().name))
            if n == fail_at:
                raise ValueError(f"finish of job {n} failed")
            return sum(results)
        yield Job([lambda report, n=n: n, lambda report, n=n: n], finish)


def test_serial_finish_runs_in_order_on_one_thread_and_never_too_far_ahead():
    log = []
    pool = ThreadPool(finishing_jobs(30, log), 3, max_in_flight=10, serial_finish=2,
                      handover=lambda output: ("handed", output))
    outputs = []
    for output in pool:
        time.sleep(0.002)  # a slow consumer: the finisher would run ahead if it could
        outputs.append(output)
        assert len(log) <= len(outputs) + 2  # at most serial_finish finished and not yet taken
    assert outputs == [("handed", 2 * n) for n in range(30)]
    assert [n for n, _ in log] == list(range(30))
    assert {name for _, name in log} == {name for _, name in log[:1]} and log[0][1].endswith("-finish")
    assert not fastload_threads()


def test_serial_finish_error_reaches_the_consumer_and_close_joins_a_waiting_finisher():
    log = []
    pool = ThreadPool(finishing_jobs(30, log, fail_at=3), 2, max_in_flight=8, serial_finish=1)
    with pytest.raises(ValueError, match="finish of job 3"):
        list(pool)
    assert list(pool) == [2 * n for n in range(4, 30)]  # the failed batch dropped, the rest in order
    assert not fastload_threads()
    # a consumer that stops early: the finisher is blocked, waiting for the consumer to take a job
    pool = ThreadPool(finishing_jobs(30, []), 2, max_in_flight=8, serial_finish=1)
    next(pool)
    time.sleep(0.05)
    pool.close()
    assert not fastload_threads()


def test_an_error_that_leaves_the_loop_stops_the_threads_at_once():
    """The error's traceback must not keep the pool alive: threads stop when the `for` loop is left,
    without waiting for the garbage collector."""
    gc.disable()
    try:
        with pytest.raises(KeyError):
            for _ in ThreadPool(jobs(10, fail_at=3), 2, max_in_flight=4):
                pass
        assert not fastload_threads()
    finally:
        gc.enable()


# -- bounded shutdown: a thread stuck in user code never holds up close(), an error, Ctrl-C or exit --------------

class Blocking(torch.utils.data.Dataset):
    """Integers; ``__getitem__(stuck)`` blocks until ``release`` is set (a hung read, a deadlocked lock)."""

    def __init__(self, size=16, stuck=5):
        self.size, self.stuck = size, stuck
        self.entered, self.release = threading.Event(), threading.Event()

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        if index == self.stuck:
            self.entered.set()
            self.release.wait()
        return index


def _stuck_warnings_within(bound, call):
    """Run ``call()`` on a helper thread; fail (instead of hanging) unless it returns within ``bound`` seconds
    (and a little scheduling slack); the StuckThreadWarning messages it gave, and what it raised."""
    raised = []

    def run():
        try:
            call()
        except BaseException as error:  # noqa: BLE001 -- handed to the test
            raised.append(error)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        helper = threading.Thread(target=run, daemon=True)
        helper.start()
        helper.join(bound + 0.5)
        assert not helper.is_alive(), f"did not return within {bound} s"
    return [str(w.message) for w in caught if issubclass(w.category, StuckThreadWarning)], raised


def _let_go(dataset):
    """Release the stuck call and wait for its (abandoned) thread to end: no test leaves a thread behind."""
    dataset.release.set()
    for thread in fastload_threads():
        thread.join(10)


def test_close_of_a_stuck_job_returns_within_the_timeout_and_names_the_thread_and_item():
    entered, release = threading.Event(), threading.Event()

    def stuck(report):
        report("decode", "/data/slow.jpg")
        entered.set()
        release.wait()
    pool = ThreadPool(iter([Job([lambda r: 1], lambda r: r[0]), Job([stuck], lambda r: r)]), 1,
                      max_in_flight=2, timeout=0.5)
    try:
        assert next(pool) == 1 and entered.wait(5)
        stuck, _ = _stuck_warnings_within(0.5, pool.close)
        assert len(stuck) == 1 and re.search(r"fastload-\d+-0 on /data/slow.jpg \(stage 'decode'\)", stuck[0])
        assert [thread.daemon for thread in fastload_threads()] == [True]
    finally:
        release.set()
        for thread in fastload_threads():
            thread.join(10)


def test_loader_close_with_a_worker_stuck_in_getitem_is_bounded_by_timeout():
    dataset = Blocking()
    loader = DataLoader(dataset, batch_size=2, num_workers=2, timeout=1)
    try:
        iterator = iter(loader)
        assert next(iterator).tolist() == [0, 1]
        assert dataset.entered.wait(5)
        stuck, _ = _stuck_warnings_within(1, loader.close)
        assert len(stuck) == 1 and re.search(r"fastload-\d+-\d on sample 5 \(stage 'dataset\[i\]'\)", stuck[0])
    finally:
        _let_go(dataset)


def test_an_exception_in_the_loop_with_a_stuck_worker_returns_within_the_default_bound(monkeypatch):
    """timeout=0 (no limit on a batch): leaving the loop still waits at most CLOSE_TIMEOUT."""
    monkeypatch.setattr(pool_module, "CLOSE_TIMEOUT", 0.5, raising=False)
    dataset = Blocking()

    def train():
        for _ in DataLoader(dataset, batch_size=2, num_workers=2):
            assert dataset.entered.wait(5)
            raise FloatingPointError("loss is nan")
    try:
        stuck, raised = _stuck_warnings_within(0.5, train)
        assert len(stuck) == 1 and "on sample 5" in stuck[0]
        assert [type(error) for error in raised] == [FloatingPointError]
    finally:
        _let_go(dataset)


_STUCK_SCRIPT = '''
import sys, threading, time, warnings, torch, fastload, fastload.thread_pool
fastload.thread_pool.CLOSE_TIMEOUT = 1.0  # the bound where timeout=0 (default 5 s)
shown = warnings.showwarning
def show(message, category, *args, **kwargs):  # when fastload gave up on the stuck thread, since "ready"
    if category.__name__ == "StuckThreadWarning":
        sys.stderr.write(f"gave up after {time.monotonic() - READY:.3f} s\\n")
    shown(message, category, *args, **kwargs)
warnings.showwarning = show
class Blocking(torch.utils.data.Dataset):
    entered = threading.Event()
    def __len__(self):
        return 16
    def __getitem__(self, index):
        if index == 5:
            self.entered.set()
            threading.Event().wait()  # never returns
        return index
loader = fastload.DataLoader(Blocking(), batch_size=2, num_workers=2, timeout=float(sys.argv[2]))
iterator = iter(loader)
next(iterator)
Blocking.entered.wait()
READY = time.monotonic()
print("ready", flush=True)
if sys.argv[1] == "interrupt":
    for batch in iterator:  # waits for the stuck batch: Ctrl-C arrives here
        pass
'''


@pytest.mark.parametrize("how, timeout", [("exit", 1.0), ("interrupt", 0.0)])
def test_interpreter_exit_and_ctrl_c_return_within_the_bound_with_a_stuck_worker(tmp_path, how, timeout):
    """A worker blocked forever in __getitem__: the interpreter still exits (the threads are daemon threads,
    the exit hook waits at most the timeout), and Ctrl-C while waiting for its batch raises KeyboardInterrupt
    within CLOSE_TIMEOUT; both name the stuck thread and sample."""
    script = tmp_path / "stuck.py"
    script.write_text(_STUCK_SCRIPT)
    process = subprocess.Popen([sys.executable, str(script), how, str(timeout)], preexec_fn=ctrl_c_default,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "ready\n", process.stderr.read() if process.poll() is not None else ""
        started = time.monotonic()
        if how == "interrupt":
            time.sleep(0.2)
            process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    bound = timeout or 1.0
    # fastload's part, timed in the process: it gives up on the stuck thread within the bound (+ the 0.2 s
    # before Ctrl-C, and scheduling); the interpreter's own teardown after that (2-5 s on a loaded 2-core
    # machine) is only bounded against a hang
    gave_up = float(re.search(r"gave up after ([0-9.]+) s", stderr).group(1))
    assert gave_up < bound + 1.0 and time.monotonic() - started < bound + 20, stderr
    assert "StuckThreadWarning" in stderr and "on sample 5 (stage 'dataset[i]')" in stderr, stderr
    if how == "interrupt":
        assert "KeyboardInterrupt" in stderr and process.returncode != 0, stderr
    else:
        assert process.returncode == 0, stderr


class _Numbers(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(8))


def test_the_paths_a_loader_chooses_meet_the_path_protocol(image_folder):
    """The CPU fast path, the map-style and the iterable path are ``LoaderPath``s (the device path and DALI's
    GraphPath subclass it too), and their stages are ``Stages``; an object without the attributes is not one."""
    folder = fastload.ImageFolder(str(image_folder), transform=recipes.resnet50_train(16))
    loaders = [DataLoader(folder, batch_size=4), DataLoader(list(range(8)), batch_size=4),
               DataLoader(_Numbers(), batch_size=4)]
    assert [type(loader.path).__name__ for loader in loaders] == ["CpuPath", "MapPath", "IterablePath"]
    assert all(isinstance(loader.path, LoaderPath) for loader in loaders)
    assert (loaders[0].path.fast, loaders[0].path.on_device, loaders[1].path.plan) == (True, False, None)
    stages = loaders[1].path.stages(iter([[(0, 0), (1, 1)]]), 0, None)
    assert isinstance(stages, Stages) and stages.in_flight == 2
    assert not isinstance(object(), LoaderPath)


def test_batches_ahead_is_prefetch_factor_per_thread():
    """torch's bound: prefetch_factor (2 when None) per worker, one worker's worth without workers; the device
    path asks for one thread's."""
    def loader(workers, factor):
        return types.SimpleNamespace(num_workers=workers, prefetch_factor=factor)
    assert [batches_ahead(loader(*case)) for case in [(0, None), (3, None), (3, 4), (0, 5)]] == [2, 6, 12, 5]
    assert batches_ahead(loader(8, 3), threads=1) == 3


def test_the_old_module_name_is_the_thread_pool_itself():
    """``fastload.pipeline`` (the module's old name) is ``fastload.thread_pool``: a setting made through it,
    such as CLOSE_TIMEOUT, is the pool's."""
    import fastload.pipeline
    assert fastload.pipeline is pool_module
    from fastload.pipeline import THREAD_PREFIX as old
    assert old == THREAD_PREFIX
