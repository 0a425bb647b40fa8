"""The built-in sample folder: written by threads or processes, the same bytes either way."""

from fastload.sample_data import make_sample_folder


def test_processes_write_the_same_folder_as_threads(tmp_path):
    threads = make_sample_folder(tmp_path / "threads", num_images=6, num_classes=2, workers=2)
    processes = make_sample_folder(tmp_path / "processes", num_images=6, num_classes=2, workers=2, processes=True)
    files = sorted(p.relative_to(threads) for p in threads.rglob("*.JPEG"))
    assert len(files) == 6 and files == sorted(p.relative_to(processes) for p in processes.rglob("*.JPEG"))
    assert all((threads / f).read_bytes() == (processes / f).read_bytes() for f in files)
    assert not list(processes.rglob("*.tmp"))
