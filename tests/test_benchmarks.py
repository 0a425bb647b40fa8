"""The benchmark scripts still run (tiny inputs, CPU): a check of the scripts, not a measurement."""

import json
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


def test_bench_gpu_runs_on_the_cpu(tmp_path):
    """Every loader of bench_gpu.py, on the CPU (fastload's device path in the interpreter), a few tiny
    batches: more images than the folder holds, which the loaders and the decode-only ceiling read again."""
    from fastload.sample_data import make_image
    root = tmp_path / "folder"
    for i in range(12):  # small photos: the device path's fused kernel runs interpreted, row by source row
        (root / f"class_{i % 2}").mkdir(parents=True, exist_ok=True)
        make_image(i, 96 + 8 * (i % 3), 72 + 8 * (i % 2)).save(root / f"class_{i % 2}" / f"img_{i}.JPEG", quality=90)
    env = dict(os.environ, TRITON_INTERPRET="1")
    loaders = "fastload CPU decode,torch + v2,torch + GPU normalize,decode-only"
    result = subprocess.run([sys.executable, str(BENCHMARKS / "bench_gpu.py"), str(root), "--device", "cpu",
                             "--batch-size", "4", "--size", "48", "--workers", "1", "--warmup", "2",
                             "--batches", "2", "--loaders", loaders, "--json", str(tmp_path / "out.json")],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    measured = [row["name"] for row in json.loads((tmp_path / "out.json").read_text())["results"]]
    assert measured == loaders.split(","), result.stdout  # none skipped
    assert "skipped" not in result.stdout


def test_bench_compat_runs(tmp_path):
    """bench_compat.py: real DALI, fastload.compat.dali and the native loader, one tiny epoch each, twice."""
    import pytest
    pytest.importorskip("nvidia.dali")
    from fastload.sample_data import make_sample_folder
    root = make_sample_folder(tmp_path / "folder", num_images=8, num_classes=2)
    result = subprocess.run([sys.executable, str(BENCHMARKS / "bench_compat.py"), str(root), "--batch-size", "4",
                             "--workers", "1", "--epochs", "1", "--rounds", "2", "--json", str(tmp_path / "out.json")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    for row in ("dali", "fastload.compat.dali", "fastload"):
        assert f"\n{row} " in result.stdout
    rounds = json.loads((tmp_path / "out.json").read_text())["rounds"]
    assert len(rounds) == 2 and all(r[name]["images"] == 8 for r in rounds for name in r)
    rocal = subprocess.run([sys.executable, str(BENCHMARKS / "bench_compat.py"), str(root), "--batch-size", "4",
                            "--workers", "1", "--epochs", "1", "--rounds", "1", "--loaders",
                            "fastload.compat.rocal,fastload-rocal-recipe"], capture_output=True, text=True, timeout=600)
    assert rocal.returncode == 0, rocal.stderr
    assert "\nfastload.compat.rocal " in rocal.stdout and "\nfastload-rocal-recipe " in rocal.stdout


def test_bench_serve_runs(tmp_path):
    """bench_serve.py: both servers started, measured in turn at two concurrency levels, twice, on a few
    requests; the medians and each round's requests/s written."""
    result = subprocess.run([sys.executable, str(BENCHMARKS / "bench_serve.py"), "--model", "resnet18",
                             "--requests", "6", "--concurrency", "1,3", "--rounds", "2",
                             "--json", str(tmp_path / "out.json")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "out.json").read_text())
    results = written["results"]
    assert written["device"] == "cpu" and written["cores"] >= 1
    assert set(results) == {"fastload@1", "fastload@3", "baseline@1", "baseline@3"}
    assert all(r["requests_per_s"] > 0 and r["p99_ms"] >= r["p50_ms"] for r in results.values())
    assert all(len(r["rounds_requests_per_s"]) == 2 for r in results.values())


def test_bench_serve_model_only_runs():
    """bench_serve.py --model-only: the model alone at two batch sizes, both layouts, its table."""
    result = subprocess.run([sys.executable, str(BENCHMARKS / "bench_serve.py"), "--model", "resnet18",
                             "--model-only", "1,2"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "batch 1 / best batch" in result.stdout and "channels_last" in result.stdout


def test_bench_shards_runs(tmp_path):
    """bench_shards.py: the folder, local tar shards (indexed, streaming), webdataset's own loader, TFRecords
    and tar shards over HTTP (indexed, streaming), one tiny epoch each; every loader sees every image; over
    HTTP each image is about one ranged request, or its shard's one whole request."""
    from fastload.sample_data import make_sample_folder
    root = make_sample_folder(tmp_path / "folder", num_images=12, num_classes=2)
    result = subprocess.run([sys.executable, str(BENCHMARKS / "bench_shards.py"), str(root), "--batch-size", "4",
                             "--workers", "1", "--epochs", "1", "--shard-images", "5", "--latency-ms", "1",
                             "--json", str(tmp_path / "out.json")], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    results = {r["name"]: r for r in json.loads((tmp_path / "out.json").read_text())["results"]}
    assert set(results) == {"folder", "tar", "tar-stream", "webdataset", "tfrecord", "tar-http", "tar-http-stream"}
    assert all(r["images"] == 12 for r in results.values())
    assert "fastload tar / webdataset:" in result.stdout
    assert set(json.loads((tmp_path / "out.json").read_text())["vs_webdataset"]) == {"tar", "tar-stream"}
    assert 1 <= results["tar-http"]["requests_per_image"] < 1.5  # one per image, plus the index's reads
    # streaming: a request per shard of 5 images, each epoch (the cache holds 4 shards of the 3: none again)
    assert results["tar-http-stream"]["requests_per_image"] < 0.5



def test_bench_shards_webdataset_with_two_workers(tmp_path):
    """webdataset deals whole shards to its workers: with 2 workers and 3 shards, one worker reads 2 and the
    other 1, and the epoch still counts every image once; with more workers than shards the benchmark
    refuses before running anything (a worker given no shard would deliver nothing)."""
    import importlib.util

    import pytest
    from fastload.sample_data import make_sample_folder
    root = make_sample_folder(tmp_path / "folder", num_images=12, num_classes=2)
    arguments = [str(root), "--batch-size", "4", "--epochs", "1", "--shard-images", "5", "--loaders", "webdataset",
                 "--json", str(tmp_path / "out.json")]
    result = subprocess.run([sys.executable, str(BENCHMARKS / "bench_shards.py"), *arguments, "--workers", "2"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert [r["images"] for r in json.loads((tmp_path / "out.json").read_text())["results"]] == [12]
    spec = importlib.util.spec_from_file_location("bench_shards", BENCHMARKS / "bench_shards.py")
    bench_shards = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_shards)
    with pytest.raises(SystemExit, match="lower --shard-images"):  # 3 shards, 4 workers: before any child runs
        bench_shards.main([*arguments, "--workers", "4"])


def test_gpu_checks_script_parses_and_its_steps_start(tmp_path):
    """benchmarks/gpu_checks.sh: bash parses it, every Python step it runs answers --help, and its summary
    reads the results a run leaves (its GPU_CHECKS_DRY=1 mode runs every step tiny here, in about 5
    minutes: too long for the suite)."""
    import shutil
    import pytest
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    script = BENCHMARKS / "gpu_checks.sh"
    assert subprocess.run([bash, "-n", str(script)], capture_output=True, timeout=30).returncode == 0
    text = script.read_text()
    steps = ["benchmarks/bench_gpu.py", "benchmarks/bench_scaling.py", "benchmarks/bench_serve.py",
             "examples/train_resnet50.py"]
    for step in steps:
        assert step in text
    for step in ("tests", "ceilings", "loader", "scaling", "train", "serve"):  # each through run(): a timeout
        assert f"run {step} " in text
    assert 'timeout "$limit" "$@"' in text
    for step in steps[:2]:  # the others import torchvision models at start; their flags are checked by their tests
        result = subprocess.run([sys.executable, str(BENCHMARKS.parent / step), "--help"], capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0 and "usage" in result.stdout, result.stderr
    out = tmp_path / "out"
    out.mkdir()
    (out / "steps.tsv").write_text("tests\tok\t12\tpython -m pytest tests/gpu\nserve\ttimeout(100s)\t100\tx\n")
    (out / "loader.json").write_text(json.dumps({"args": {"batch_size": 256, "batches": 30, "workers": 16,
                                                          "images": 6000},
                                                 "results": [{"name": "fastload GPU decode:nvimgcodec",
                                                              "images_per_s": 1.0, "cores_busy": 1.0,
                                                              "gpu_peak_mb": 1.0, "decoder": "d", "lanes": 2}]}))
    (out / "train.log").write_text("== python examples/train_resnet50.py\nresnet18: 1.0 ms/step\nnoise\n")
    result = subprocess.run([sys.executable, str(BENCHMARKS / "bench_gpu.py"), "--summary", str(out)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for expected in ("timeout(100s)", "fastload GPU decode:nvimgcodec", "lanes 2", "ms/step"):
        assert expected in result.stdout
    assert "noise" not in result.stdout


def test_gil_compat_measures_a_window_of_the_rocal_loader(tmp_path):
    """gil_compat.py: py-spy attached to the rocAL loader after its warm-up; the held time and the images
    of the window give a positive figure per image (skipped where py-spy is not installed: it is no extra)."""
    import shutil

    import pytest
    if not (shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))):
        pytest.skip("py-spy is not installed")
    from fastload.sample_data import make_sample_folder
    root = make_sample_folder(tmp_path / "folder", num_images=8, num_classes=2)
    result = subprocess.run([sys.executable, str(BENCHMARKS / "gil_compat.py"), str(root), "--batch-size", "4",
                             "--workers", "1", "--seconds", "2"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["loader"] == "fastload.compat.rocal" and measured["images_per_s"] > 0
    assert measured["gil_us_per_image"] > 0 and measured["window_s"] == 2
