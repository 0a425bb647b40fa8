"""loader.stats: the last epoch's rate stays put once the epoch has ended, and Stats prints short."""

import gc
import time

import torch

import fastload
from fastload import transforms as T
from fastload.stats import Stats

TRAIN = T.Compose([T.RandomResizedCrop(16), T.ToDtype(torch.float32, scale=True)])


def _loader(folder, **kwargs):
    return fastload.DataLoader(fastload.ImageFolder(folder, TRAIN), batch_size=4, num_workers=2, **kwargs)


def _rate_is_frozen(stats) -> bool:
    before = stats.images_per_s
    time.sleep(0.3)
    return stats.images_per_s == before > 0


def test_the_rate_of_an_epoch_that_ran_out_stays_put(image_folder):
    loader = _loader(image_folder)
    list(loader)
    assert loader.stats.images == 23
    assert _rate_is_frozen(loader.stats)
    assert loader.stats.ended is not None
    assert loader.stats.images_per_s == loader.stats.images / loader.stats.elapsed
    assert f"{loader.stats.images_per_s:.0f} img/s" in str(loader.stats)


def test_the_rate_runs_while_the_epoch_runs_and_starts_again_with_the_next(image_folder):
    loader = _loader(image_folder)
    list(loader)
    iterator = iter(loader)
    next(iterator)
    first = loader.stats.images_per_s
    time.sleep(0.05)
    assert loader.stats.images_per_s < first  # the clock runs
    list(iterator)
    assert _rate_is_frozen(loader.stats)


def test_a_break_out_of_the_loop_stops_the_rate(image_folder):
    loader = _loader(image_folder)
    for _ in loader:
        break
    assert _rate_is_frozen(loader.stats)


def test_closing_the_loader_stops_the_rate(image_folder):
    loader = _loader(image_folder)
    iterator = iter(loader)
    next(iterator)
    loader.close()
    assert _rate_is_frozen(loader.stats)


def test_an_earlier_epochs_iterator_collected_late_does_not_stop_the_current_epoch(image_folder):
    loader = _loader(image_folder)
    first = iter(loader)
    next(first)
    second = iter(loader)  # a new epoch while the first iterator is still held
    del first
    gc.collect()
    assert loader.stats.ended is None
    list(second)
    # (batches the first iterator's threads finished before it was collected may count here too)
    assert loader.stats.ended is not None and loader.stats.images >= 23


def test_repr_counts_and_never_raises():
    stats = Stats()
    stats.count_batch(8)
    for index in range(1000):
        stats.record("skipped", (0, index, f"/data/img_{index}.jpg", "bad"))
    text = repr(stats)
    assert text.startswith("Stats(images=8, batches=1, images_per_s=") and "skipped=1000" in text
    assert "img_" not in text and len(text) < 400  # counts, not the lists
    stats.device("torchvision (nvjpeg)", 3 << 20, 0)
    assert "decoder='torchvision (nvjpeg)'" in repr(stats)
    assert repr(Stats.__new__(Stats)) == "Stats(...)"  # half-made: no error

    def broken():
        raise OSError("no network")
    assert repr(Stats(retries=broken)) == "Stats(...)"
