"""Real processes: torchrun with 2 and 3 ranks on CPU (gloo), and a 2-node launch on loopback."""

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fastload.order import num_shard_samples

SCRIPT = Path(__file__).parent / "distributed" / "shards.py"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _torchrun(*args, timeout=240):
    command = [sys.executable, "-m", "torch.distributed.run", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _load(out_dir: Path, mode: str, world: int) -> list[dict]:
    return [json.loads((out_dir / f"{mode}-{rank}.json").read_text()) for rank in range(world)]


def _check(per_rank: list[dict], world: int) -> None:
    for key in per_rank[0]["results"]:
        size, drop_last, even = (int(x) for x in key.split("-"))
        ranks = [r["results"][key] for r in per_rank]
        for epoch in range(2):
            got = [r["epochs"][epoch] for r in ranks]
            union = [label for labels in got for label in labels]
            if not even:  # evaluation: every sample exactly once, shards differ by at most one
                assert len(set(union)) == len(union), key
                if not drop_last:  # (drop_last would also drop each rank's incomplete batch)
                    assert sorted(union) == list(range(size)), key
                    assert max(map(len, got)) - min(map(len, got)) <= 1
                    assert [r["len"] for r in ranks] == [math.ceil(len(labels) / 2) for labels in got]
                continue
            per = num_shard_samples(size, world, bool(drop_last))  # DistributedSampler's count
            if drop_last:  # the loader's drop_last also drops each rank's incomplete last batch (of 2)
                per -= per % 2
            assert all(len(labels) == per for labels in got), key
            if drop_last:  # disjoint, the tail dropped
                assert len(set(union)) == len(union) == per * world, key
            else:  # all of the epoch, padded by repeating its head
                assert set(union) == set(range(size)) and len(union) == per * world, key
            batches = {r["batches"][epoch] for r in ranks}
            assert len(batches) == 1, f"{key}: ranks would step a different number of times: {batches}"
        assert ranks[0]["epochs"][0] != ranks[0]["epochs"][1], f"{key}: set_epoch did not reshuffle"


@pytest.mark.timeout(300)
def test_torchrun_ranks_get_disjoint_equal_shards_from_every_rank_source(numbered_list, tmp_path):
    """Three ranks (a size they do not divide: padded shards), each finding its rank from torch.distributed,
    from torchrun's environment, or from arguments, alike. Two ranks: the loopback launch below, and the
    Lightning, Accelerate, DDP-example and resume tests."""
    world = 3
    for mode in ("dist", "env", "args"):
        _torchrun("--standalone", f"--nproc_per_node={world}", str(SCRIPT), str(numbered_list), str(tmp_path),
                  mode)
    per_mode = {mode: _load(tmp_path, mode, world) for mode in ("dist", "env", "args")}
    _check(per_mode["dist"], world)
    assert per_mode["dist"][0]["results"] == per_mode["env"][0]["results"] == per_mode["args"][0]["results"]
    for rank in range(world):
        assert per_mode["dist"][rank]["results"] == per_mode["args"][rank]["results"]


@pytest.mark.timeout(300)
def test_two_node_launch_on_loopback(numbered_list, tmp_path):
    """torchrun --nnodes=2: two launchers, one process each, meeting at 127.0.0.1 (static rendezvous)."""
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launchers = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
                                   f"--node_rank={node}", "--nproc_per_node=1", "--master_addr=127.0.0.1",
                                   f"--master_port={port}", str(SCRIPT), str(numbered_list), str(tmp_path), "dist"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
                 for node in (0, 1)]
    for launcher in launchers:
        output, _ = launcher.communicate(timeout=240)
        assert launcher.returncode == 0, output[-3000:]
    per_rank = _load(tmp_path, "dist", 2)
    assert [r["local_rank"] for r in per_rank] == ["0", "0"]  # one process per node
    _check(per_rank, 2)
