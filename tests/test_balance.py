"""fastload.balance: the CPU/GPU split follows the measured rates of stand-in decoders of known speeds.

The stand-ins sleep: the "GPU" decodes a batch in ``gpu_ms`` per image (one call), the "CPU" one image in
``cpu_ms`` on one of ``threads`` reader threads, so the rate-proportional split is known in advance:
CPU share = (threads / cpu_ms) / (threads / cpu_ms + 1 / gpu_ms). The exact checks sleep on a virtual
clock (a busy 2-core CI machine wakes a real sleeper milliseconds late); one check sleeps for real.
"""

import time

import pytest

from fastload.balance import Balance

BATCH = 32


class VirtualClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run_batches(balance: Balance, batches: int, gpu_ms: float, cpu_ms: float, clock=None):
    """Route and "decode" ``batches`` batches of images of one size; the CPU's share of each batch, as
    routed. ``clock``: a ``VirtualClock`` (default: real time and ``time.sleep``)."""
    now, sleep = (clock, clock.sleep) if clock is not None else (time.perf_counter, time.sleep)
    shares = []
    for _ in range(batches):
        to_cpu = 0
        for i in range(BATCH):
            if balance.to_cpu(1000):
                started = now()
                sleep(cpu_ms / 1000)
                balance.cpu_done(now() - started)
                to_cpu += 1
        on_gpu = BATCH - to_cpu
        started = now()
        sleep(on_gpu * gpu_ms / 1000)
        balance.gpu_done(on_gpu, now() - started)
        balance.batch_done(BATCH, 0)
        shares.append(to_cpu / BATCH)
    return shares


def expected(threads, cpu_ms, gpu_ms):
    cpu, gpu = threads / cpu_ms, 1 / gpu_ms
    return cpu / (cpu + gpu)


def test_the_split_converges_to_the_rates_within_two_batches_and_follows_a_change_within_eight():
    """Both sides are measured on the first batch (the CPU gets ``start``, 1/8), so the second batch is
    split in proportion to the rates; after the GPU slows down 4x, the EWMAs (alpha 0.3) bring the split
    within 0.05 of the new proportion in 8 batches (0.7 ** 8 = 6% of the old rate left)."""
    balance, clock = Balance(cpu_threads=2), VirtualClock()
    shares = run_batches(balance, 3, gpu_ms=1, cpu_ms=4, clock=clock)  # CPU 500/s, GPU 1000/s: 1/3 to the CPU
    assert shares[0] == pytest.approx(1 / 8, abs=1 / BATCH)
    assert balance.target() == pytest.approx(expected(2, 4, 1))
    for share in shares[1:]:
        assert share == pytest.approx(expected(2, 4, 1), abs=1 / BATCH)  # whole images of 32
    shares = run_batches(balance, 8, gpu_ms=4, cpu_ms=4, clock=clock)  # the GPU 4x slower: 2/3 to the CPU
    assert balance.share == pytest.approx(expected(2, 4, 4), abs=0.05)
    assert shares[-1] == pytest.approx(expected(2, 4, 4), abs=0.05 + 1 / BATCH)


def test_with_real_sleeps_the_split_heads_for_the_rates():
    """The same stand-ins sleeping for real (12 batches, about 0.6 s): the split moves the right way, by
    about the right amount (one third, then two thirds to the CPU); the margins are a loaded machine's
    late wake-ups."""
    balance = Balance(cpu_threads=2)
    before = run_batches(balance, 6, gpu_ms=1, cpu_ms=4)[-1]
    after = run_batches(balance, 6, gpu_ms=4, cpu_ms=4)[-1]
    assert 0.15 < before < 0.5 and after > before + 0.15


def test_the_cpu_takes_the_smallest_images_and_counts_what_the_gpu_refuses_first():
    sizes = [(i % 8 + 1) * 10_000 for i in range(BATCH)]  # eight sizes, four images each
    balance = Balance(cpu_threads=2)
    balance.gpu_rate, balance.cpu_seconds = 1000.0, 0.002  # CPU 1000/s, GPU 1000/s: half to the CPU
    assert balance.batch_done(BATCH, refused=8) == pytest.approx((16 - 8) / 24)  # refused ones fill it first
    routed = [size for size in sizes * 4 if balance.to_cpu(size)]
    assert set(routed[-8:]) <= {10_000, 20_000, 30_000}  # the smallest third of the sizes, once the window fills


def test_each_side_keeps_an_exploring_share():
    balance = Balance(cpu_threads=1)
    balance.gpu_rate, balance.cpu_seconds = 100_000.0, 0.01  # the GPU 1000x faster
    assert balance.batch_done(BATCH, 0) == pytest.approx(1 / 32)  # the CPU still gets measured
    balance.gpu_rate = 1.0
    assert balance.batch_done(BATCH, 0) == pytest.approx(1 - 1 / 32)  # and so does the GPU
