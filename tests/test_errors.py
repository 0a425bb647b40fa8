"""Bad input, skip budgets, corrupt JPEGs, shutdown in every way a training loop ends, soak and fuzz."""

import gc
import io
import os
import random
import signal
import subprocess
import sys
import threading
import time
import tracemalloc

import pytest
import torch

import fastload
from fastload import transforms as T
from fastload.thread_pool import THREAD_PREFIX
from fastload.sample_data import make_image

from conftest import TESTDATA, ctrl_c_default

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
TRAIN = T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                   T.Normalize(MEAN, STD)])


def _jpeg(seed, width=64, height=48) -> bytes:
    out = io.BytesIO()
    make_image(seed, width, height).save(out, "JPEG", quality=90)
    return out.getvalue()


def _corrupt_but_decodable(seed) -> bytes:
    """A stray marker in the entropy-coded data: libjpeg warns, resyncs and decodes; Pillow says nothing."""
    data = _jpeg(seed, 200, 150)
    position = data.index(b"\xff\xda") + 300
    return data[:position] + b"\xff\xd5" + data[position:]


def _file_list(tmp_path, payloads) -> fastload.FileList:
    """One file per payload, labelled with its own number, so delivery can be accounted for exactly."""
    lines = []
    for number, payload in enumerate(payloads):
        (tmp_path / f"f{number:03d}.jpg").write_bytes(payload)
        lines.append(f"f{number:03d}.jpg {number}")
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    return fastload.FileList(tmp_path / "list.txt", transform=TRAIN)


def _fastload_threads() -> list[str]:
    gc.collect()
    return [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX) and t.is_alive()]


# -- error policy ----------------------------------------------------------------------------
def test_decode_error_is_a_loader_error_and_the_loader_stays_closable(tmp_path):
    source = _file_list(tmp_path, [_jpeg(0), b"", _jpeg(2)])
    loader = fastload.DataLoader(source, batch_size=3, num_workers=2)
    with pytest.raises(fastload.LoaderError) as info:
        next(iter(loader))
    assert isinstance(info.value, fastload.DecodeError) and info.value.path.endswith("f001.jpg")
    assert info.value.reason == "empty file"
    loader.close()
    assert not _fastload_threads()


@pytest.mark.parametrize("budget, raises", [(2, False), (1, True), (0.1, False), (0.05, True)])
def test_skip_budget_as_count_or_fraction(tmp_path, budget, raises):
    payloads = [_jpeg(i) for i in range(20)]
    payloads[4] = payloads[11] = b"not a jpeg"
    loader = fastload.DataLoader(_file_list(tmp_path, payloads), batch_size=5, num_workers=2,
                                 on_error="skip", max_skips=budget)
    if raises:
        with pytest.raises(fastload.LoaderError, match="more than max_skips"):
            list(loader)
    else:
        assert sum(len(y) for _, y in loader) == 20
        assert sorted(entry[1] for entry in loader.stats.skipped) == [4, 11]


def test_a_fraction_of_a_budget_rounds_up_and_the_error_names_it(tmp_path):
    """max_skips=0.001 over 20 samples allows one skip (0.02 rounded up), not none; past it the error says
    the fraction and the count it came to."""
    payloads = [_jpeg(i) for i in range(20)]
    payloads[4] = b"not a jpeg"
    loader = fastload.DataLoader(_file_list(tmp_path, payloads), batch_size=5, on_error="skip", max_skips=0.001)
    assert sum(len(y) for _, y in loader) == 20
    payloads[11] = b"not a jpeg"
    (tmp_path / "f011.jpg").write_bytes(payloads[11])
    with pytest.raises(fastload.LoaderError, match=r"2 samples skipped .* max_skips=0.001 \(1 of the epoch"):
        list(loader)


def test_each_bad_sample_is_recorded_once_and_read_once(tmp_path):
    """A run of bad files: each is recorded once, though several samples try it as their replacement; and a
    folder of bad files only (here 1,500 empty ones) fails in one pass over them, not one pass per sample
    (it took minutes at 20,000 files)."""
    payloads = [_jpeg(i) for i in range(12)]
    payloads[3:8] = [b""] * 5
    loader = fastload.DataLoader(_file_list(tmp_path, payloads), batch_size=4, num_workers=2, on_error="skip")
    assert sum(len(y) for _, y in loader) == 12
    indices = [entry[1] for entry in loader.stats.skipped]
    assert sorted(indices) == [3, 4, 5, 6, 7]

    empty = tmp_path / "empty"
    empty.mkdir()
    source = _file_list(empty, [b""] * 1500)
    loader = fastload.DataLoader(source, batch_size=50, num_workers=2, on_error="skip")
    started = time.monotonic()
    with pytest.raises(fastload.DecodeError, match="no loadable sample left"):
        list(loader)
    assert time.monotonic() - started < 60  # (quadratic: about 1.1 million reads)
    indices = [entry[1] for entry in loader.stats.skipped]
    assert len(indices) == len(set(indices)) == 1500


def test_invalid_policies_are_refused(tmp_path):
    source = _file_list(tmp_path, [_jpeg(0)])
    for options in ({"on_error": "ignore"}, {"on_corrupt": "fix"}, {"max_skips": -1}, {"max_skips": 1.5}):
        with pytest.raises(ValueError):
            fastload.DataLoader(source, **options)


def test_corrupt_jpeg_is_delivered_and_recorded_or_refused(tmp_path):
    payloads = [_jpeg(0), _corrupt_but_decodable(1), _jpeg(2)]
    source = _file_list(tmp_path, payloads)
    delivered = fastload.DataLoader(source, batch_size=3)
    images, labels = next(iter(delivered))
    assert labels.tolist() == [0, 1, 2] and torch.isfinite(images).all()
    [(epoch, index, path, warning)] = delivered.stats.corrupt
    assert (epoch, index) == (0, 1) and path.endswith("f001.jpg") and "Corrupt JPEG data" in warning
    with pytest.raises(fastload.DecodeError, match="corrupt JPEG data.*on_corrupt='error'"):
        next(iter(fastload.DataLoader(source, batch_size=3, on_corrupt="error")))
    skipping = fastload.DataLoader(source, batch_size=3, on_corrupt="error", on_error="skip")
    assert next(iter(skipping))[1].tolist() == [0, 2, 2] and len(skipping.stats.skipped) == 1


def test_header_over_the_pixel_cap_fails_fast_without_allocating(tmp_path):
    import struct
    data = bytearray(_jpeg(0))
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", 65000, 65000)
    loader = fastload.DataLoader(_file_list(tmp_path, [bytes(data)]), batch_size=1)
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(fastload.DecodeError, match="exceeds max_image_pixels"):
        next(iter(loader))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert time.perf_counter() - started < 2 and peak < 50 << 20


# -- shutdown --------------------------------------------------------------------------------
def test_exception_in_collate_fn_reaches_the_loop_and_threads_stop(image_folder):
    def collate(samples):
        raise KeyError("collate bug")
    loader = fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=4, num_workers=2,
                                 collate_fn=collate)
    with pytest.raises(KeyError, match="collate bug"):
        list(loader)
    assert not _fastload_threads()


def test_keyboard_interrupt_in_the_training_loop_stops_the_threads(image_folder):
    loader = fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=2, num_workers=2)
    with pytest.raises(KeyboardInterrupt):
        for i, _ in enumerate(loader):
            if i == 1:
                raise KeyboardInterrupt
    assert not _fastload_threads()  # the iterator was collected with the traceback


def test_garbage_collection_of_the_loader_stops_its_threads(image_folder):
    loader = fastload.DataLoader(fastload.ImageFolder(image_folder, TRAIN), batch_size=2, num_workers=3)
    iterator = iter(loader)
    next(iterator)
    del loader, iterator
    assert not _fastload_threads()


@pytest.mark.parametrize("ending", ["exit", "sigint"])
def test_interpreter_exit_with_the_loader_running(image_folder, ending):
    """sys.exit mid-epoch, and Ctrl-C in a training loop: the process ends promptly, nothing hangs."""
    script = f'''
import os, signal, sys, time, torch, fastload
from fastload import transforms as T
loader = fastload.DataLoader(fastload.ImageFolder({str(image_folder)!r}, T.Compose([T.RandomResizedCrop(16),
    T.ToDtype(torch.float32, scale=True)])), batch_size=2, num_workers=2, prefetch_factor=4)
for epoch in range(1000):
    for i, batch in enumerate(loader):
        if {ending!r} == "exit":
            print("exiting", flush=True)
            sys.exit(3)
        print("looping", flush=True)
        time.sleep(0.05)
'''
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, preexec_fn=ctrl_c_default)
    if ending == "sigint":
        assert process.stdout.readline().strip() == "looping"
        process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode in ((3,) if ending == "exit" else (1, -signal.SIGINT)), stderr
    if ending == "sigint":
        assert "KeyboardInterrupt" in stderr


# -- soak ------------------------------------------------------------------------------------
def _open_files() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


def test_many_epochs_with_skips_and_breaks_do_not_grow(tmp_path):
    payloads = [_jpeg(i, 40 + i % 7, 30 + i % 5) for i in range(24)]
    payloads[5] = b"broken"
    loader = fastload.DataLoader(_file_list(tmp_path, payloads), batch_size=4, num_workers=2, on_error="skip")
    threads_before = threading.active_count()
    tracemalloc.start()
    measurements = []
    for epoch in range(12):
        for i, _ in enumerate(loader):
            if epoch % 3 == 2 and i == 2:
                break  # an early break every third epoch
        gc.collect()
        measurements.append((threading.active_count(), _open_files(), tracemalloc.get_traced_memory()[0]))
    tracemalloc.stop()
    assert threading.active_count() == threads_before and not _fastload_threads()
    assert len({(threads, files) for threads, files, _ in measurements[1:]}) == 1
    python_heap = [heap for _, _, heap in measurements]
    assert max(python_heap[2:]) - python_heap[1] < 256 << 10  # the skip records are the only growth
    # Sample 5 is in the second batch, read before every break: recorded once per epoch, no more.
    assert [(epoch, index) for epoch, index, _, _ in loader.stats.skipped] == [(e, 5) for e in range(12)]


# -- fuzz ------------------------------------------------------------------------------------
def _mutate(data: bytes, rng: random.Random) -> bytes:
    kind = rng.choice(["truncate", "flip", "header", "marker", "zero"])
    data = bytearray(data)
    if kind == "truncate":
        return bytes(data[: rng.randrange(0, len(data))])
    if kind == "flip":
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "header":
        position = rng.randrange(2, min(len(data), 700))
        data[position:position + 2] = rng.randbytes(2)
    elif kind == "marker":
        position = rng.randrange(2, len(data))
        data[position:position] = bytes([0xFF, rng.choice([0xC0, 0xC4, 0xD8, 0xD9, 0xDA, 0xDB, 0xDD, 0xFF])])
    else:
        start = rng.randrange(len(data))
        data[start:start + rng.randint(1, 400)] = bytes(min(400, len(data) - start))
    return bytes(data)


@pytest.mark.timeout(120)
def test_fuzzed_jpegs_never_crash_or_hang_and_every_file_is_accounted_for(tmp_path):
    rng = random.Random(1234)
    originals = [_jpeg(i, rng.randint(8, 120), rng.randint(8, 120)) for i in range(12)]
    payloads = [_mutate(rng.choice(originals), rng) if i % 4 else rng.choice(originals) for i in range(160)]
    loader = fastload.DataLoader(_file_list(tmp_path, payloads), batch_size=16, num_workers=2,
                                 on_error="skip", timeout=60)
    delivered = []
    for images, labels in loader:
        assert images.shape[1:] == (3, 16, 16) and torch.isfinite(images).all()
        delivered += labels.tolist()
    skipped = {index for _, index, _, _ in loader.stats.skipped}
    assert len(delivered) == len(payloads)  # batch shapes held
    assert set(delivered) | skipped == set(range(len(payloads)))  # nothing vanished
    assert not set(delivered) & skipped  # a reported file was never delivered
    assert skipped and all(reason for *_, reason in loader.stats.skipped)


# -- the shared odd and broken files, through the whole loader ---------------------------------
@pytest.mark.skipif(not (TESTDATA / "jpeg_zoo").is_dir(), reason="shared test data not present")
def test_every_test_file_through_the_loader_gets_torchvisions_verdict_and_pixels(tmp_path):
    """Each zoo file and photo is delivered with the pixels torchvision's loader gives, or reported
    with a reason exactly when torchvision's loader fails on it."""
    import torchvision.io
    from torchvision.datasets.folder import pil_loader
    from torchvision.transforms import v2
    files = sorted(p for folder in ("jpeg_zoo", "photos") for p in (TESTDATA / folder).rglob("*")
                   if p.is_file() and not p.name.endswith((".tsv", ".md")))
    (tmp_path / "list.txt").write_text("".join(f"{path} {number}\n" for number, path in enumerate(files)))
    transform = T.Compose([T.Resize((24, 20)), T.ToDtype(torch.uint8)])
    loader = fastload.DataLoader(fastload.FileList(tmp_path / "list.txt", transform=transform), batch_size=1,
                                 num_workers=2, on_error="skip", dct_scaling=False, timeout=60)
    delivered = {}
    for images, labels in loader:
        delivered.setdefault(labels.item(), images[0])
    reported = {index: reason for _, index, _, reason in loader.stats.skipped}
    reference = v2.Compose([v2.Resize((24, 20)), v2.PILToTensor()])
    for number, path in enumerate(files):
        try:
            expected = reference(pil_loader(str(path)))
        except Exception:
            if path.read_bytes()[8:12] == b"WEBP":  # a Pillow without WebP: torchvision decodes it
                expected = reference(torchvision.io.decode_image(str(path), mode=torchvision.io.ImageReadMode.RGB))
                assert number not in reported and torch.equal(delivered[number], expected), path.name
                continue
            assert number in reported and number not in delivered, f"{path.name}: torchvision fails, fastload did not"
            continue
        assert number not in reported, f"{path.name}: torchvision decodes it, fastload reported {reported.get(number)}"
        assert torch.equal(delivered[number], expected), path.name
    assert len(delivered) + len(reported) == len(files)
