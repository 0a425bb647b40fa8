"""fastload.TFRecords: TFRecord files of tf.train.Example as a source -- files written here read by real
DALI (its tfrecord2idx and fn.readers.tfrecord, CPU), DALI's index files accepted, the folder's batches,
CRCs checked, bad records named."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys

import pytest
import torch

import fastload
from fastload import tfrecords
from fastload import transforms as T


def _write(folder, out_dir, per_file=10):
    reference = fastload.ImageFolder(folder)
    items = [(open(path, "rb").read(), label) for path, label in reference.samples]
    paths = [fastload.TFRecords.write(items[start:start + per_file], out_dir / f"train-{n:02d}.tfrecord")
             for n, start in enumerate(range(0, len(items), per_file))]
    return reference, items, paths


def test_examples_round_trip_with_every_list_type():
    features = {"image/encoded": [b"\xff\xd8abc", b""], "image/class/label": [7, -3, 1 << 40],
                "bbox": [0.25, -1.5]}
    parsed = tfrecords.parse_example(tfrecords.example(features))
    assert parsed["image/encoded"] == [b"\xff\xd8abc", b""] and parsed["image/class/label"] == [7, -3, 1 << 40]
    assert parsed["bbox"] == [0.25, -1.5]
    record = tfrecords.frame(b"payload")
    assert tfrecords.unframe(record) == b"payload"
    with pytest.raises(ValueError, match="bad CRC of the record's data"):
        tfrecords.unframe(record[:-5] + b"X" + record[-4:])


def _dali_index(path):
    tool = shutil.which("tfrecord2idx") or os.path.join(os.path.dirname(sys.executable), "tfrecord2idx")
    if not os.path.exists(tool):
        pytest.skip("DALI's tfrecord2idx is not installed")
    index = str(path) + ".idx"
    subprocess.run([sys.executable, tool, str(path), index], check=True, capture_output=True)
    return index


def test_real_dali_reads_what_fastload_writes_and_fastload_takes_dalis_index(image_folder, tmp_path):
    """DALI's own tools are the reference for the format: its tfrecord2idx indexes the files written here
    and its reader gets every image's bytes and label back; fastload reads the same files with those
    index files, in the same order."""
    dali = pytest.importorskip("nvidia.dali")
    import nvidia.dali.fn as dfn
    import nvidia.dali.tfrecord as tfrec
    _, items, paths = _write(image_folder, tmp_path)
    indexes = [_dali_index(path) for path in paths]

    @dali.pipeline_def(batch_size=len(items), num_threads=1, device_id=None)
    def read_all():
        out = dfn.readers.tfrecord(path=paths, index_path=indexes, random_shuffle=False, features={
            "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
            "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1)})
        return out["image/encoded"], out["image/class/label"]

    pipe = read_all()
    pipe.build()
    images, labels = pipe.run()
    assert [images.at(i).tobytes() for i in range(len(items))] == [data for data, _ in items]
    assert [int(labels.at(i)[0]) for i in range(len(items))] == [label for _, label in items]
    source = fastload.TFRecords(paths, index_paths=indexes)
    assert [source.read(i) for i in range(len(items))] == [data for data, _ in items]
    assert source.targets == [label for _, label in items]
    assert source.samples[12][0] == f"{paths[1]}:record 2"


def test_tfrecords_give_the_folders_batches_through_the_fast_path(image_folder, tmp_path):
    _write(image_folder, tmp_path, per_file=8)
    transform = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True)])
    options = dict(batch_size=5, num_workers=2, shuffle=True, seed=5)
    records = fastload.DataLoader(fastload.TFRecords(str(tmp_path / "train-{00..02}.tfrecord"), transform=transform),
                                  **options)
    folder = fastload.DataLoader(fastload.ImageFolder(image_folder, transform), **options)
    assert records.fast_path and len(records) == len(folder)
    for (images, labels), (ref_images, ref_labels) in zip(records, folder, strict=True):
        assert torch.equal(labels, ref_labels) and torch.equal(images, ref_images)
    shifted = fastload.TFRecords(str(tmp_path / "train-*.tfrecord"), label_offset=-1)
    assert shifted.targets == [label - 1 for label in fastload.ImageFolder(image_folder).targets]


def test_bad_records_are_named_and_skippable(image_folder, tmp_path):
    """A record whose data CRC fails after indexing, one without a label, and a file cut inside its last
    record: each a DecodeError naming ``file:record N``, or skipped with on_error="skip"."""
    reference = fastload.ImageFolder(image_folder)
    good = [open(path, "rb").read() for path, _ in reference.samples[:4]]
    path = tmp_path / "mixed.tfrecord"
    with open(path, "wb") as file:
        for i, data in enumerate(good):
            file.write(tfrecords.frame(tfrecords.example({"image/encoded": [data], "image/class/label": [i]})))
        file.write(tfrecords.frame(tfrecords.example({"image/encoded": [good[0]]})))  # record 4: no label
        last = tfrecords.frame(tfrecords.example({"image/encoded": [good[1]], "image/class/label": [1]}))
        file.write(last[:len(last) // 2])  # record 5: cut short
    source = fastload.TFRecords(str(path), transform=T.Compose([T.CenterCrop(8), T.ToImage()]))
    assert len(source.samples) == 6 and source.targets[:4] == [0, 1, 2, 3]
    with pytest.raises(fastload.DecodeError, match=r"mixed.tfrecord:record 4\): no int64 feature"):
        source.read(4)
    with pytest.raises(fastload.DecodeError, match=r"record 5\): the file ends inside this record"):
        source.read(5)
    data = bytearray(path.read_bytes())  # corrupt record 2's image after the index was built
    offset, size = source.ranges[2][1:]
    data[offset + size - 40] ^= 0xFF
    stat = os.stat(path)
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size and mtime: the cached index stays
    with pytest.raises(fastload.DecodeError, match=r"record 2\): bad CRC of the record's data"):
        fastload.TFRecords(str(path)).read(2)
    loader = fastload.DataLoader(fastload.TFRecords(str(path), transform=T.Compose([T.CenterCrop(8), T.ToImage()])),
                                 batch_size=3, on_error="skip")
    delivered = [label for _, labels in loader for label in labels.tolist()]
    assert sorted(set(delivered)) == [0, 1, 3]
    assert {entry[2].rsplit(":", 1)[1] for entry in loader.stats.skipped} == {"record 2", "record 4", "record 5"}


def test_a_dali_index_that_does_not_match_is_refused(image_folder, tmp_path):
    _, _, paths = _write(image_folder, tmp_path, per_file=23)
    stale = tmp_path / "stale.idx"
    stale.write_text("0 100\n100 200\n")
    with pytest.raises(ValueError, match="stale.idx does not describe"):
        fastload.TFRecords(paths, index_paths=[str(stale)])
    bad = tmp_path / "bad.idx"
    bad.write_text("0 x\n")
    with pytest.raises(ValueError, match="bad.idx, line 1: expected 'offset size'"):
        fastload.TFRecords(paths, index_paths=[str(bad)])
    with pytest.raises(FileNotFoundError, match="fastload.TFRecords: nothing matches"):
        fastload.TFRecords(str(tmp_path / "none-*.tfrecord"))
    with pytest.raises(ValueError, match="1 index files for 2"):
        fastload.TFRecords(paths * 2, index_paths=[str(stale)])
    assert struct.calcsize("<QI") == 12


def test_a_name_feature_is_kept_per_record_and_its_index_is_its_own(tmp_path):
    """name_feature (rocAL keys records by image/filename): each record's name, None where absent; the
    cached index of the same file without names is not taken for one with them."""
    path = tmp_path / "named.tfrecord"
    path.write_bytes(b"".join(tfrecords.frame(tfrecords.example(features)) for features in (
        {"image/encoded": [b"\xff\xd8a"], "image/class/label": [3], "image/filename": [b"x.jpg"]},
        {"image/encoded": [b"\xff\xd8b"], "image/class/label": [4]})))
    plain = fastload.TFRecords(str(path))
    assert plain.names == [] and plain.targets == [3, 4]
    named = fastload.TFRecords(str(path), name_feature="image/filename")
    assert named.names == ["x.jpg", None] and named.targets == [3, 4] and named.read(1) == b"\xff\xd8b"
    cut = tmp_path / "cut.tfrecord"  # ends inside the second record's header: that record has no name entry
    cut.write_bytes(path.read_bytes()[:-(len(path.read_bytes()) - named.ranges[1][1]) + 5])
    short = fastload.TFRecords(str(cut), name_feature="image/filename")
    assert short.names == ["x.jpg", None] and 1 in short.problems


def test_a_malformed_cached_index_is_rebuilt(image_folder, tmp_path):
    """A cached index lacking ``records`` (or with malformed ones, or not a JSON object) is rebuilt, not a
    KeyError."""
    import json
    _, _, paths = _write(image_folder, tmp_path, per_file=30)
    good = fastload.TFRecords(paths[0])
    place = paths[0] + ".fastload-idx.json"
    index = json.loads(open(place).read())
    for broken in ({k: v for k, v in index.items() if k != "records"}, {**index, "records": [[0, 1]]},
                   {**index, "records": 3}, "records"):
        with open(place, "w") as out:
            json.dump(broken, out)
        assert fastload.TFRecords(paths[0]).samples == good.samples
        assert json.loads(open(place).read()) == index
