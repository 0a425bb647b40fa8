"""fastload's loader under PyTorch Lightning's Trainer and Hugging Face Accelerate, in real processes (CPU, gloo).

Both must leave the loader as it is: it shards itself (every rank a
disjoint part of the epoch) and keeps its fast path; Accelerate's
save_state/load_state must resume it mid-epoch.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastload.order import num_shard_samples

SCRIPTS = Path(__file__).parent / "frameworks"


# What libstdc++ prints when a C++ thread object is destroyed still running: once in ~40 torchrun runs of
# accelerate_train.py a rank aborts so in torch's gloo teardown at exit, after the barrier and
# destroy_process_group, its work done and written (tests/frameworks/accelerate_train.py's end).
GLOO_TEARDOWN_ABORT = "terminate called without an active exception"


def _run(command, cwd, outputs=()):
    """Run ``command``; it must exit 0. A run that wrote all its ``outputs`` and then aborted with
    GLOO_TEARDOWN_ABORT is run once more, which must then exit 0: the abort is torch's, at exit, not the
    loader's, and a second one in a row would still fail the test."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=280, env=env, cwd=cwd)
    if result.returncode != 0 and outputs and GLOO_TEARDOWN_ABORT in result.stderr and \
            all(Path(path).exists() for path in outputs):
        for path in outputs:
            Path(path).unlink()
        result = subprocess.run(command, capture_output=True, text=True, timeout=280, env=env, cwd=cwd)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _check_epoch(per_rank: list[list[int]], size: int, world: int) -> None:
    """DistributedSampler's shards: equal, disjoint but for the padding, covering the epoch."""
    per = num_shard_samples(size, world, False)
    assert all(len(labels) == per for labels in per_rank)
    union = [label for labels in per_rank for label in labels]
    assert set(union) == set(range(size)) and len(union) == per * world


@pytest.mark.timeout(300)
def test_lightning_trainer_ddp_keeps_the_loader_and_its_shards(numbered_list, tmp_path):
    pytest.importorskip("lightning")
    _run([sys.executable, str(SCRIPTS / "lightning_train.py"), str(numbered_list), str(tmp_path)], cwd=tmp_path)
    ranks = [json.loads((tmp_path / f"lightning-{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2]
    size = len(numbered_list.read_text().splitlines())
    for epoch in ("0", "1"):
        _check_epoch([r["seen"][epoch] for r in ranks], size, 2)
    assert ranks[0]["seen"]["0"] != ranks[0]["seen"]["1"], "each epoch must reshuffle"


@pytest.mark.timeout(300)
def test_accelerate_prepare_keeps_the_loader_and_save_state_resumes_it(numbered_list, tmp_path):
    pytest.importorskip("accelerate")
    state = tmp_path / "state"
    for mode in ("full", "save", "resume"):
        _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
              str(SCRIPTS / "accelerate_train.py"), str(numbered_list), str(tmp_path), mode, str(state)],
             cwd=tmp_path, outputs=[tmp_path / f"accelerate-{mode}-{rank}.json" for rank in (0, 1)])
    seen = {mode: [json.loads((tmp_path / f"accelerate-{mode}-{rank}.json").read_text())["seen"] for rank in (0, 1)]
            for mode in ("full", "save", "resume")}
    _check_epoch(seen["full"], len(numbered_list.read_text().splitlines()), 2)
    for rank in (0, 1):
        assert len(seen["save"][rank]) == 6  # three steps of two
        assert seen["save"][rank] + seen["resume"][rank] == seen["full"][rank]
