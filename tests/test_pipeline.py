import gc
import threading
import time

import pytest

from fastload.pipeline import END, THREAD_PREFIX, Job, ThreadPipeline


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
    pipeline = ThreadPipeline(jobs(20), threads, max_in_flight=4, length=20)
    assert list(pipeline) == [2 * n for n in range(20)]
    assert len(pipeline) == 20
    assert not fastload_threads()


def test_break_then_garbage_collection_joins_threads():
    pipeline = ThreadPipeline(jobs(100, delay=0.001), 2, max_in_flight=4)
    for output in pipeline:
        if output == 4:
            break
    assert fastload_threads()
    del pipeline
    gc.collect()
    assert not fastload_threads()


def test_error_reaches_consumer_which_may_go_on_as_with_torch():
    pipeline = ThreadPipeline(jobs(10, fail_at=3), 2, max_in_flight=4)
    seen = []
    with pytest.raises(KeyError, match="bad item in job 3"):
        for output in pipeline:
            seen.append(output)
    assert seen == [0, 2, 4]
    assert list(pipeline) == [8, 10, 12, 14, 16, 18]  # that batch is dropped, the next ones come
    assert not fastload_threads()  # joined on exhaustion


def test_a_failed_job_gives_its_buffer_back():
    given_back = []
    failing = Job([lambda report: 1 / 0], lambda results: results, discard=lambda: given_back.append(True))
    pipeline = ThreadPipeline(iter([failing]), 1, max_in_flight=1)
    with pytest.raises(ZeroDivisionError):
        next(pipeline)
    assert given_back == [True]
    pipeline.close()


def test_timeout_names_the_stuck_stage():
    release = threading.Event()

    def stuck(report):
        report("decode", "/data/slow.jpg")
        release.wait(5)
    pipeline = ThreadPipeline(iter([Job([stuck], lambda r: r)]), 1, max_in_flight=1, timeout=0.2)
    try:
        with pytest.raises(RuntimeError, match=r"timed out after 0.2 seconds.*/data/slow.jpg in stage 'decode'"):
            next(pipeline)
    finally:
        release.set()
        pipeline.close()


def test_end_marker_stops_iteration():
    outputs = iter([Job([lambda r: 1], lambda r: r[0]), Job([lambda r: END], lambda r: r[0]),
                    Job([lambda r: 3], lambda r: r[0])])
    assert list(ThreadPipeline(outputs, 1, max_in_flight=3)) == [1]


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
    pipeline = ThreadPipeline(finishing_jobs(30, log), 3, max_in_flight=10, serial_finish=2,
                              handover=lambda output: ("handed", output))
    outputs = []
    for output in pipeline:
        time.sleep(0.002)  # a slow consumer: the finisher would run ahead if it could
        outputs.append(output)
        assert len(log) <= len(outputs) + 2  # at most serial_finish finished and not yet taken
    assert outputs == [("handed", 2 * n) for n in range(30)]
    assert [n for n, _ in log] == list(range(30))
    assert {name for _, name in log} == {name for _, name in log[:1]} and log[0][1].endswith("-finish")
    assert not fastload_threads()


def test_serial_finish_error_reaches_the_consumer_and_close_joins_a_waiting_finisher():
    log = []
    pipeline = ThreadPipeline(finishing_jobs(30, log, fail_at=3), 2, max_in_flight=8, serial_finish=1)
    with pytest.raises(ValueError, match="finish of job 3"):
        list(pipeline)
    assert list(pipeline) == [2 * n for n in range(4, 30)]  # the failed batch dropped, the rest in order
    assert not fastload_threads()
    # a consumer that stops early: the finisher is blocked, waiting for the consumer to take a job
    pipeline = ThreadPipeline(finishing_jobs(30, []), 2, max_in_flight=8, serial_finish=1)
    next(pipeline)
    time.sleep(0.05)
    pipeline.close()
    assert not fastload_threads()


def test_an_error_that_leaves_the_loop_stops_the_threads_at_once():
    """The error's traceback must not keep the pipeline alive: threads stop when the `for` loop is left,
    without waiting for the garbage collector."""
    gc.disable()
    try:
        with pytest.raises(KeyError):
            for _ in ThreadPipeline(jobs(10, fail_at=3), 2, max_in_flight=4):
                pass
        assert not fastload_threads()
    finally:
        gc.enable()
