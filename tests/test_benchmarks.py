"""The benchmark scripts still run (tiny inputs, CPU): a check of the scripts, not a measurement."""

import os
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_bench_kernels_runs_in_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    result = subprocess.run([sys.executable, str(BENCHMARKS / "bench_kernels.py"), "--device", "cpu", "--batch", "2",
                             "--size", "12", "--sides", "15", "30", "--iters", "1"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    for row in ("fused kernel", "torchvision per-sample", "torchvision batched", "copy bandwidth"):
        assert row in result.stdout
