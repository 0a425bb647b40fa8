"""The fastload command on a tiny generated folder and on the shared test photos."""

import os
import subprocess
import sys
import time
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from fastload.cli import main
from fastload.cli.inspect_data import escape, jpeg_kind, unescape
from fastload.cli.preview import grid_size

from conftest import TESTDATA

PHOTOS = TESTDATA / "photos" / "hymenoptera_subset" / "train"
needs_photos = pytest.mark.skipif(not PHOTOS.is_dir(), reason="shared test data not present")


@pytest.fixture
def folder_with_bad_files(image_folder, tmp_path):
    """The 23-image folder plus an empty file, a text file and a truncated JPEG named .jpg."""
    import shutil
    root = tmp_path / "data"
    shutil.copytree(image_folder, root)
    bad = root / sorted(os.listdir(root))[0]
    good = next(p for p in sorted(bad.iterdir()) if p.suffix.lower() in (".jpg", ".jpeg"))
    data = good.read_bytes()
    (bad / "empty.jpg").write_bytes(b"")
    (bad / "text.jpg").write_text("not an image\n")
    (bad / "cut.jpg").write_bytes(data[: len(data) // 2])
    return root


def test_inspect_deep_lists_jpegs_libjpeg_warns_about_but_does_not_fail(image_folder, tmp_path, capsys):
    import shutil
    root = tmp_path / "warned"
    shutil.copytree(image_folder, root)
    victim = next(p for p in sorted(root.rglob("*")) if p.suffix.lower() in (".jpg", ".jpeg"))
    data = victim.read_bytes()
    position = data.index(b"\xff\xda") + 300
    victim.write_bytes(data[:position] + b"\xff\xd5" + data[position:])  # a stray marker: libjpeg warns
    assert main(["inspect", str(root), "--deep", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "1 file(s) decode with libjpeg warnings" in out and f"{victim.name}: Corrupt JPEG data" in out


def test_inspect_reports_every_bad_file_and_exits_nonzero(folder_with_bad_files, tmp_path, capsys):
    bad_list = tmp_path / "bad.tsv"
    status = main(["inspect", str(folder_with_bad_files), "--deep", "--no-progress", "--bad-list", str(bad_list)])
    out = capsys.readouterr().out
    assert status == 1
    assert "26 files, fully decoded" in out and "3 file(s) will fail" in out
    assert "empty.jpg: empty file" in out and "text.jpg: not a readable image: unknown format" in out
    assert "cut.jpg: decoding failed" in out
    lines = bad_list.read_text().splitlines()
    assert len(lines) == 3 and all(line.count("\t") == 1 for line in lines)
    # Header-only scanning cannot see the truncation, and says so.
    status = main(["inspect", str(folder_with_bad_files), "--no-progress"])
    out = capsys.readouterr().out
    assert status == 1 and "2 file(s) will fail" in out and "cut.jpg" not in out



def test_inspect_bad_list_escapes_names_that_are_not_utf8_or_hold_tabs_and_newlines(folder_with_bad_files,
                                                                                     tmp_path, capsys):
    r"""A name with a byte that is not UTF-8 crashed the bad list's write, and a tab or newline in a name broke
    its rows: each field is now escaped (\\, \t, \n, \r, \xHH) into one UTF-8 line, unescape gives the bytes back."""
    folder = os.fsencode(folder_with_bad_files / sorted(os.listdir(folder_with_bad_files))[0])
    names = [b"caf\xe9 latin-1.jpg", b"tab\there.jpg", b"new\nline\\x41.jpg", b"cr\rand\xe2\x80\xa8.jpg"]
    for name in names:
        with open(os.path.join(folder, name), "wb") as file:
            file.write(b"not an image")
    bad_list = tmp_path / "bad.tsv"
    status = main(["inspect", str(folder_with_bad_files), "--no-progress", "--bad-list", str(bad_list)])
    out = capsys.readouterr().out
    assert status == 1 and "6 file(s) will fail" in out
    out.encode("utf-8")  # no surrogate escapes printed: a UTF-8 terminal shows them
    assert "caf\\xe9 latin-1.jpg: not a readable image" in out and "tab\\there.jpg" in out
    lines = bad_list.read_bytes().decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines[:-1]) == 6
    fields = [line.split("\t") for line in lines[:-1]]
    assert all(len(row) == 2 for row in fields)
    written = {unescape(path) for path, _ in fields}
    assert {os.path.join(folder, name) for name in names} <= written
    assert os.path.join(folder, b"new\nline\\x41.jpg") in written  # a backslash in a name stays one
    assert all(os.path.exists(path) for path in written)


@pytest.mark.parametrize("text", ["plain/path.jpg", "a\tb\nc\rd\\e", "\x00\x1f\x7f\x85\u2028\u2029 é 猫",
                                  os.fsdecode(b"\xff\xfe\\x")])
def test_bad_list_escape_round_trips(text):
    field = escape(text)
    assert not any(char in field for char in "\t\n\r\x85\u2028\u2029") and field.encode("utf-8")
    assert unescape(field) == os.fsencode(text)
    assert escape("plain/path.jpg") == "plain/path.jpg"

@needs_photos
def test_inspect_on_real_photos_counts_classes_and_formats(capsys):
    assert main(["inspect", str(PHOTOS), "--deep", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "31 files" in out and "ants" in out and "bees" in out
    assert "JPEG baseline" in out and "JPEG progressive" in out and "no file will fail" in out
    assert "width px:     min 193" in out


def test_jpeg_kind_reads_the_frame_marker(image_folder):
    path = next(p for p in sorted(image_folder.rglob("*")) if p.suffix.lower() in (".jpg", ".jpeg"))
    assert jpeg_kind(path.read_bytes()) == "JPEG baseline"
    assert jpeg_kind(b"\xff\xd8\xff\xc2\x00\x11") == "JPEG progressive"


@pytest.mark.parametrize("n, size", [(5, 64), (16, 48)])
def test_preview_writes_a_grid_of_the_expected_size(image_folder, tmp_path, capsys, n, size):
    output = tmp_path / "grid.png"
    assert main(["preview", str(image_folder), "-o", str(output), "--n", str(n), "--size", str(size)]) == 0
    assert f"{n} samples" in capsys.readouterr().out
    with Image.open(output) as grid:
        assert grid.size == grid_size(n, size) and grid.mode == "RGB"
        # Every cell holds a picture, not the white background.
        assert grid.crop((4, 4, 4 + size, 4 + size)).getextrema() != ((255, 255),) * 3


@needs_photos
def test_preview_of_real_photos_with_each_recipe(tmp_path):
    for recipe in ("resnet50-train", "resnet50-eval", "simclr"):
        output = tmp_path / f"{recipe}.png"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert main(["preview", str(PHOTOS), "-o", str(output), "--n", "9", "--size", "96",
                         "--transform", recipe]) == 0
        # every recipe takes the fast path: no "runs as given" warning
        assert not [w for w in caught if issubclass(w.category, UserWarning)], recipe
        with Image.open(output) as grid:
            assert grid.size == grid_size(9, 96)


@pytest.mark.timeout(240)
def test_bench_compares_with_torch_and_plots(image_folder, tmp_path):
    """Run as users do, through the console entry point module, in fresh processes."""
    plot = tmp_path / "bench.png"
    result = subprocess.run([sys.executable, "-m", "fastload", "bench", str(image_folder), "--batch-size", "4",
                             "--workers", "1", "--epochs", "1", "--compare", "torch", "--plot", str(plot),
                             "--no-progress"], capture_output=True, text=True, timeout=230)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "loader" in out and "images/s" in out and "vs torch" in out and "cores busy" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("fastload ", "torch "))}
    assert float(rows["fastload"][2]) > 0 and float(rows["torch"][2]) > 0
    assert "ms per image" in out and "decode" in out and "fastload" in out.split("ms per image")[1]
    assert "1 worker: fastload" in out and "workers:" not in out
    assert "warning: an epoch here is" in out and "under 10 batches of 4" in out  # a small folder's figures
    with Image.open(plot) as image:
        assert image.size[0] > 300


def test_bench_plot_without_matplotlib_is_refused_before_measuring(image_folder, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # (an import of it raises ImportError)
    started = time.monotonic()
    with pytest.raises(SystemExit, match="needs matplotlib"):
        main(["bench", str(image_folder), "--plot", str(tmp_path / "x.png"), "--no-progress"])
    assert time.monotonic() - started < 5 and not (tmp_path / "x.png").exists()


@needs_photos
@pytest.mark.timeout(240)
def test_bench_with_a_worker_sweep_on_real_photos(tmp_path):
    plot = tmp_path / "sweep.png"
    result = subprocess.run([sys.executable, "-m", "fastload", "bench", str(PHOTOS), "--batch-size", "8",
                             "--sweep-workers", "1,2", "--epochs", "1", "--plot", str(plot), "--no-progress"],
                            capture_output=True, text=True, timeout=230)
    assert result.returncode == 0, result.stderr
    assert sum(line.startswith("fastload ") for line in result.stdout.splitlines()) == 4  # 2 tables x 2 runs
    assert plot.is_file()


def test_unknown_loader_and_missing_data_are_clear_errors(image_folder):
    with pytest.raises(SystemExit, match="unknown loader"):
        main(["bench", str(image_folder), "--compare", "dali"])
    with pytest.raises(SystemExit, match="no such folder or file list"):
        main(["inspect", "/nonexistent/data"])
    with pytest.raises(SystemExit, match="not an image folder, and not a file list"):
        main(["inspect", __file__])  # a Python file is neither


def test_preprocess_runs_a_json_pipeline_and_names_bad_files(image_folder, tmp_path, capsys):
    """`fastload preprocess`: the outputs of the good files saved with torch.save, each bad one named, exit 1."""
    import json

    import torch
    pipeline = tmp_path / "p.json"
    pipeline.write_text(json.dumps({"pipeline": [
        {"operation": "Resize", "dest_width": 32, "dest_height": 24},
        {"operation": "CropMirrorNormalize", "crop_height": 16, "crop_width": 16, "start_x": 0.5, "start_y": 0.5,
         "mean": [0.0], "std_dev": [1.0], "is_output": True}]}))
    images = sorted(str(p) for p in image_folder.rglob("*.jpg"))[:3]
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    out = tmp_path / "out.pt"
    assert main(["preprocess", "--pipeline", str(pipeline), *images, str(bad), "-o", str(out)]) == 1
    saved = torch.load(out)
    assert saved["outputs"].shape == (3, 16, 16, 3) and saved["files"] == images
    captured = capsys.readouterr()
    assert "bad.jpg: cannot decode" in captured.err and "3 of 4 images" in captured.out
    with pytest.raises(SystemExit, match="unknown operation 'Blur'"):
        pipeline.write_text(json.dumps({"pipeline": [{"operation": "Blur", "is_output": True}]}))
        main(["preprocess", "--pipeline", str(pipeline), *images, "-o", str(out)])


def test_pack_writes_indexed_shards_that_read_as_the_folder(folder_with_bad_files, tmp_path, capsys):
    """fastload pack: the folder's samples in its order across several shards (a small --shard-size), each
    indexed; the empty file is named and left out (exit 1); TarShards reads back the same bytes and labels."""
    import fastload
    out = tmp_path / "shards"
    assert main(["pack", str(folder_with_bad_files), str(out), "--shard-size", "40KB"]) == 1
    captured = capsys.readouterr()
    assert "empty.jpg: empty file" in captured.err and "indexed" in captured.out
    assert "KB per image" in captured.out and "decode ms per image" in captured.out
    shards = sorted(out.glob("train-*.tar"))
    assert len(shards) > 1 and all((out / (s.name + ".idx.json")).exists() for s in shards)
    kept = [(path, label) for path, label in fastload.ImageFolder(folder_with_bad_files).samples
            if not path.endswith("empty.jpg")]
    assert "1 left out, each named on stderr (exit status 1)" in captured.out
    packed = fastload.TarShards(str(out / "train-*.tar"))
    assert packed.targets == [label for _, label in kept]
    assert [packed.read(i) for i in range(len(kept))] == [open(path, "rb").read() for path, _ in kept]
    # each sample keyed by its file (class folder and name, no extension), its class name beside its label
    keys = [name.rsplit(":", 1)[1] for name, _ in packed.samples]
    assert keys == [os.path.splitext(os.path.relpath(path, folder_with_bad_files))[0].replace(".", "_")
                    for path, _ in kept]
    assert packed.classes == fastload.ImageFolder(folder_with_bad_files).classes
    # re-encoding: an image Pillow cannot identify is named with the reason, not a Python object's repr
    assert main(["pack", str(folder_with_bad_files), str(tmp_path / "small"), "--max-side", "8"]) == 1
    assert "BytesIO" not in capsys.readouterr().err
    # inspect and preview read the shards' byte ranges: the two broken images packed as they were are found
    assert main(["inspect", str(out / "train-*.tar"), "--no-progress"]) == 1
    assert main(["preview", str(out / "train-*.tar"), "-o", str(tmp_path / "grid.png"), "--n", "4"]) == 0


def test_doctor_says_what_the_install_runs_with(capsys, monkeypatch):
    """`fastload doctor`: the extensions built, the decoders, torch and CUDA; exit 1, saying what to do, when
    a core extension is missing (its import fails)."""
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "fastload._jpeg" in out and "built" in out and "libjpeg-turbo" in out and "torch " in out
    assert "no CUDA device visible" in out or "cuda:0" in out
    monkeypatch.setitem(sys.modules, "fastload._jpeg", None)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "fastload._jpeg" in out and "MISSING" in out and "the slower Pillow route" in out


def test_pack_sizes_take_si_and_binary_units():
    import argparse

    from fastload.cli.pack import parse_size, sample_key
    assert parse_size("1GiB") == 2 ** 30 and parse_size("512 MiB") == 512 << 20 and parse_size("1.5kib") == 1536
    assert parse_size("500MB") == 500 * 10 ** 6 and parse_size("40KB") == 40_000 and parse_size("300000") == 300000
    for bad in ("1XB", "GiB", "-1MB", "1 GiBB"):
        with pytest.raises(argparse.ArgumentTypeError, match="a size such as"):
            parse_size(bad)
    taken: set = set()
    assert [sample_key(name, "/d", taken, i) for i, name in enumerate(
        ["/d/c/a.jpg", "/d/c/a.png", "/d/c/a_1.jpg", "/d/x y/b.c.JPEG", "rec.tfrecord:7"])] == \
        ["c/a", "c/a_1", "c/a_1_2", "x_y/b_c", "rec_tfrecord_7"]


def test_pack_reencodes_large_images_and_bench_runs_on_the_shards(image_folder, tmp_path, capsys):
    """--max-side 64: images longer than 64 pixels come back as JPEGs of at most 64; then `fastload bench`
    takes the shards' pattern, fastload beside torch."""
    import io
    import fastload
    out = tmp_path / "small"
    assert main(["pack", str(image_folder), str(out), "--max-side", "64", "--quality", "85"]) == 0
    assert "decode ms per image" in capsys.readouterr().out
    packed = fastload.TarShards(str(out / "train-000000.tar"))
    sizes = [Image.open(io.BytesIO(packed.read(i))).size for i in range(len(packed.samples))]
    assert len(sizes) == 23 and max(max(size) for size in sizes) == 64
    result = subprocess.run([sys.executable, "-m", "fastload", "bench", str(out / "train-*.tar"), "--batch-size", "4",
                             "--workers", "1", "--epochs", "1", "--compare", "torch", "--no-progress"],
                            capture_output=True, text=True, timeout=230)
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0] for line in result.stdout.splitlines() if line.startswith(("fastload ", "torch "))}
    assert rows == {"fastload", "torch"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=12))
def test_pack_keys_are_unique_and_split_back_as_webdataset_splits(names):
    """Any source names give keys that are unique in the pack, and that a member ``key.jpg`` splits back into
    (key, "jpg") as webdataset and TarShards split member names."""
    from fastload.cli.pack import sample_key
    from fastload.tarshards import split_key
    taken: set = set()
    keys = [sample_key(f"/d/{name}.jpg", "/d", taken, index) for index, name in enumerate(names)]
    assert len(set(keys)) == len(keys)
    for key in keys:
        assert split_key(f"{key}.jpg") == (key, "jpg") and split_key(f"{key}.cls") == (key, "cls")
