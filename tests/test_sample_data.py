"""The built-in sample folder: written by threads or processes, the same bytes either way."""

from fastload.sample_data import make_sample_folder


def test_processes_write_the_same_folder_as_threads(tmp_path):
    threads = make_sample_folder(tmp_path / "threads", num_images=6, num_classes=2, workers=2)
    processes = make_sample_folder(tmp_path / "processes", num_images=6, num_classes=2, workers=2, processes=True)
    files = sorted(p.relative_to(threads) for p in threads.rglob("*.JPEG"))
    assert len(files) == 6 and files == sorted(p.relative_to(processes) for p in processes.rglob("*.JPEG"))
    assert all((threads / f).read_bytes() == (processes / f).read_bytes() for f in files)
    assert not list(processes.rglob("*.tmp"))


def test_another_size_replaces_the_folder_and_the_default_has_its_own(tmp_path, monkeypatch):
    """A folder made again with another size holds that size only (not the old images beside the new); the
    built-in sample of another size than the demo's lives in its own folder."""
    from fastload.sample_data import default_sample_root
    root = make_sample_folder(tmp_path / "s", num_images=6, num_classes=2)
    make_sample_folder(root, num_images=3, num_classes=2)
    assert len(list(root.rglob("*.JPEG"))) == 3
    monkeypatch.setenv("FASTLOAD_CACHE", str(tmp_path / "cache"))
    assert default_sample_root() != default_sample_root(16) and default_sample_root().name == "sample-imagenet"
