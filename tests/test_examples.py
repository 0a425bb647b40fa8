"""The examples run as the README says, on CPU, on a tiny folder."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"


def _train_ddp(folder, checkpoint, *args):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(EXAMPLES / "train_ddp.py"), "--data", str(folder), "--image-size", "32", "--batch-size", "2",
               "--checkpoint", str(checkpoint), "--checkpoint-every", "3", *args]
    result = subprocess.run(command, capture_output=True, text=True, timeout=280,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def _batches(output: str) -> dict[int, str]:
    return {int(step): batch for step, batch in re.findall(r"step +(\d+) loss \S+ batch (\w+)", output)}


@pytest.mark.timeout(600)
def test_train_ddp_two_ranks_on_cpu_resumes_mid_epoch_with_the_same_batches(image_folder, tmp_path):
    # 23 images, 2 ranks, drop_last: 11 samples = 5 batches of 2 per rank and epoch.
    uninterrupted = _batches(_train_ddp(image_folder, tmp_path / "a.pt", "--steps", "7"))
    assert sorted(uninterrupted) == list(range(1, 8))
    _train_ddp(image_folder, tmp_path / "b.pt", "--steps", "3")
    resumed_output = _train_ddp(image_folder, tmp_path / "b.pt", "--steps", "7", "--resume")
    assert "resumed at step 3 (epoch 0)" in resumed_output
    resumed = _batches(resumed_output)
    assert sorted(resumed) == [4, 5, 6, 7]  # the rest of epoch 0, then epoch 1
    assert all(resumed[step] == uninterrupted[step] for step in resumed)


@pytest.mark.timeout(300)
def test_train_ddp_with_the_torch_loader(image_folder, tmp_path):
    output = _train_ddp(image_folder, tmp_path / "t.pt", "--steps", "2", "--loader", "torch", "--workers", "0")
    assert sorted(_batches(output)) == [1, 2]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("data", [["--loader", "fastload"], ["--loader", "torch", "--workers", "1"], ["--synthetic"]])
def test_train_resnet50_reports_step_time_on_one_core(image_folder, data):
    command = [sys.executable, str(EXAMPLES / "train_resnet50.py"), "--data", str(image_folder), "--arch", "resnet18",
               "--image-size", "32", "--batch-size", "4", "--steps", "2", "--warmup", "1", "--cpus", "1", *data]
    result = subprocess.run(command, capture_output=True, text=True, timeout=280)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    name = "synthetic" if data == ["--synthetic"] else data[1]
    assert re.search(rf"resnet18 on cpu, 1 cores, data: {name}.*: [\d.]+ ms/step, [\d.]+ images/s", result.stdout)


def test_serve_json_pipeline_example_answers_a_top5():
    result = subprocess.run([sys.executable, str(EXAMPLES / "serve_json_pipeline.py")], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "'status': 'ok'" in result.stdout and result.stdout.count("class ") == 5
