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


def _hostile_frame(length: int, data: bytes = b"") -> bytes:
    """A record header whose length (CRC-valid: the CRC is no secret) says ``length``, then ``data``."""
    head = struct.pack("<Q", length)
    return head + struct.pack("<I", tfrecords.masked_crc(head)) + data


@pytest.mark.parametrize("length", [1 << 62, (1 << 64) - 1, 1 << 33])
@pytest.mark.parametrize("streamed", [False, True])
def test_a_huge_record_length_ends_the_index_there_never_the_source(image_folder, tmp_path, length, streamed):
    """A length field of 2**62 (a MemoryError from the constructor), 2**64-1 (OverflowError) or 8 GiB, its CRC
    valid: the length is compared with what the file holds before anything is read or allocated, the index
    ends at that record with the reason, the records before it read; from a stream too."""
    photos = [open(path, "rb").read() for path, _ in fastload.ImageFolder(image_folder).samples[:2]]
    path = tmp_path / "huge.tfrecord"
    path.write_bytes(b"".join(tfrecords.frame(tfrecords.example({"image/encoded": [p], "image/class/label": [i]}))
                              for i, p in enumerate(photos)) + _hostile_frame(length, b"x" * 100))
    if streamed:
        import io
        index = tfrecords.build_index(None, io.BytesIO(path.read_bytes()), tfrecords.IMAGE_FEATURE,
                                      tfrecords.LABEL_FEATURE)
        assert [r[3] for r in index["records"]][:2] == [None, None]
        assert "the file ends inside this record" in index["records"][2][3] and len(index["records"]) == 3
        return
    source = fastload.TFRecords(str(path))
    assert source.targets == [0, 1, -1] and source.read(1) == photos[1]
    with pytest.raises(fastload.DecodeError, match=rf"huge.tfrecord:record 2\): the file ends inside this record "
                                                   rf"\(truncated: its length says {length} bytes"):
        source.read(2)


@pytest.mark.parametrize("bad, reason", [
    (tfrecords.example({"image/encoded": [b"\xff\xd8"], "image/class/label": [1]})[:-1], "past the end|truncated"),
    # a float_list packed as 5 bytes (a struct.error for the whole source before)
    (b"\x0a\x1b\x0a\x19\x0a\x04bbox\x12\x11\x12\x0f\x0a\x05\x00\x00\x80\x3f\x01" + b"\x00" * 8, "multiple of 4"),
    (b"\x0b\x00", "wire type 3"), (b"\x0a\x05\x0a\x03\x0a\x05a", "past the end"),
    (b"\x0a\x05\x0a\x03\x0a\x01\xff", "can't decode"), (b"\x08\x01", "wire type 0"),
    (b"\x0a\x80", "truncated varint"), (b"\x0a" + b"\xff" * 11, "longer than 64 bits"), (b"\x02", "numbered 0"),
])
def test_an_example_that_cannot_be_parsed_is_that_records_error(image_folder, tmp_path, bad, reason):
    """Truncated varints, packed lists of the wrong length, wire types out of range or not the field's, nested
    lengths past the end: a ValueError from parse_example, so the record's DecodeError, never the source's."""
    with pytest.raises(ValueError, match=reason):
        tfrecords.parse_example(bad)
    photo = open(fastload.ImageFolder(image_folder).samples[0][0], "rb").read()
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(tfrecords.frame(bad) +
                     tfrecords.frame(tfrecords.example({"image/encoded": [photo], "image/class/label": [5]})))
    source = fastload.TFRecords(str(path), transform=T.Compose([T.CenterCrop(8), T.ToImage()]))
    assert source.targets == [-1, 5]
    with pytest.raises(fastload.DecodeError, match=r"bad.tfrecord:record 0\)"):
        source.read(0)
    loader = fastload.DataLoader(source, batch_size=2, on_error="skip")
    assert {label for _, labels in loader for label in labels.tolist()} == {5}


def test_a_label_pushed_past_int64_by_label_offset_is_that_records_error(image_folder, tmp_path):
    photo = open(fastload.ImageFolder(image_folder).samples[0][0], "rb").read()
    path = fastload.TFRecords.write([(photo, (1 << 63) - 1), (photo, 4)], tmp_path / "edge.tfrecord")
    assert fastload.TFRecords(path).targets == [(1 << 63) - 1, 4]
    source = fastload.TFRecords(path, label_offset=1)
    assert source.targets == [-1, 5]
    with pytest.raises(fastload.DecodeError, match=r"record 0\): its label 9223372036854775807 \+ label_offset 1 "
                                                   r"is outside int64"):
        source.read(0)
    with pytest.raises(ValueError, match="outside int64"):
        tfrecords.example({"label": [1 << 63]})
