"""fastload.compat.rocal's MXNet RecordIO reader (``fn.readers.mxnet`` + ``fn.decoders.image(path=...)``):
real DALI's MXNet reader is the reference for the files written here (there is no MXNet for this
Python); rocAL's rules (ROCm/rocAL 0981d5bb: mxnet_recordio_reader.cpp, mxnet_meta_data_reader.cpp) and
the MXNet branch of its tests/python_api/unit_test.py."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
import torch

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal.pipeline import Pipeline
from fastload.compat.rocal.plugin.pytorch import ROCALClassificationIterator
from fastload.sample_data import make_image

MAGIC = 0xCED7230A


def jpeg(seed: int, width: int, height: int) -> bytes:
    out = io.BytesIO()
    make_image(seed, width, height).save(out, format="JPEG", quality=90)
    return out.getvalue()


def write_records(folder, records, order=None, name="train") -> tuple[str, str]:
    """An MXNet .rec and .idx as MXIndexedRecordIO writes them: per record the magic, (cflag << 29 |
    length), MXNet's IRHeader (flag, float label, id, id2) and the image, padded to 4 bytes; the .idx
    "key\\toffset" lines in ``order`` (record positions; the keys are the positions)."""
    folder.mkdir(exist_ok=True)
    rec, idx = folder / f"{name}.rec", folder / f"{name}.idx"
    offsets = []
    with open(rec, "wb") as file:
        for record in records:
            image_id, label, data = record[:3]
            flag, cflag = (record[3] if len(record) > 3 else 0), (record[4] if len(record) > 4 else 0)
            offsets.append(file.tell())
            payload = struct.pack("<IfQQ", flag, label, image_id, 0) + b"\0" * (4 * flag) + data
            file.write(struct.pack("<II", MAGIC, cflag << 29 | len(payload)) + payload)
            file.write(b"\0" * (-len(payload) % 4))
    idx.write_text("".join(f"{k}\t{offsets[k]}\n" for k in (order if order is not None else range(len(records)))))
    return str(rec), str(idx)


@pytest.fixture()
def records(tmp_path):
    """Seven JPEGs of awkward sizes in one .rec, labels as floats (3.0, 7.9 ...), ids out of order, the
    .idx listing them in a shuffled order."""
    images = [jpeg(n, 40 + 7 * n, 30 + 5 * (n % 3)) for n in range(7)]
    items = [(100 - 3 * n, n * 1.3, data) for n, data in enumerate(images)]
    folder = tmp_path / "mxnet"
    rec, idx = write_records(folder, items, order=[3, 0, 6, 1, 5, 2, 4])
    return folder, rec, idx, items


def test_real_dali_reads_the_files_written_here(records):
    """DALI's fn.readers.mxnet (the reference for the format) gets every image's bytes and label back."""
    dali = pytest.importorskip("nvidia.dali")
    import nvidia.dali.fn as dfn
    _, rec, idx, items = records

    @dali.pipeline_def(batch_size=len(items), num_threads=1, device_id=None)
    def read_all():
        return tuple(dfn.readers.mxnet(path=[rec], index_path=[idx], random_shuffle=False))

    pipe = read_all()
    pipe.build()
    data, labels = pipe.run()
    got = sorted((data.at(i).tobytes(), float(labels.at(i)[0])) for i in range(len(items)))
    assert got == sorted((image, float(np.float32(label))) for _, label, image in items)


def mxnet_pipeline(folder, batch_size=4, build=lambda images: images, **decoder_args) -> Pipeline:
    """The MXNet branch of rocAL's tests/python_api/unit_test.py."""
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=0, seed=1, rocal_cpu=True)
    with pipe:
        jpegs = fn.readers.mxnet(path=str(folder))
        images = fn.decoders.image(jpegs, path=str(folder), output_type=types.RGB, shard_id=0, num_shards=1,
                                   random_shuffle=False, **decoder_args)
        pipe.set_outputs(build(images))
    pipe.build()
    return pipe


def test_records_in_offset_order_with_truncated_labels_decode_as_the_files_do(records, tmp_path):
    """The records in the order of their offsets (not the .idx's), labels int(float) (1.3 -> 1, 7.8 -> 7),
    the last batch filled with the last record; the images are what the file reader decodes from the
    same JPEGs."""
    folder, _, _, items = records
    loader = ROCALClassificationIterator(mxnet_pipeline(folder, build=lambda images: fn.resize(
        images, resize_width=40, resize_height=30)))
    assert len(loader) == 2
    batches = [(images.clone(), labels.tolist()) for (images,), labels in loader]
    assert [label for _, labels in batches for label in labels] == [int(label) for _, label, _ in items] + [7]
    files = tmp_path / "files" / "c"
    files.mkdir(parents=True)
    for n, (_, _, data) in enumerate(items):
        (files / f"{n}.jpg").write_bytes(data)
    reference = Pipeline(batch_size=7, num_threads=1, rocal_cpu=True)
    with reference:
        jpegs, _ = fn.readers.file(file_root=str(files.parent))
        reference.set_outputs(fn.resize(fn.decoders.image(jpegs, file_root=str(files.parent)), resize_width=40,
                                        resize_height=30))
    reference.build()
    (expected,), _ = next(iter(ROCALClassificationIterator(reference)))
    assert torch.equal(torch.cat([images for images, _ in batches])[:7], expected)


def test_shards_follow_the_file_readers_rule(records):
    folder, _, _, items = records
    shards = []
    for shard_id in range(2):
        pipe = Pipeline(batch_size=2, num_threads=1, rocal_cpu=True)
        with pipe:
            jpegs = fn.readers.mxnet(path=str(folder))
            pipe.set_outputs(fn.decoders.image(jpegs, path=str(folder), shard_id=shard_id, num_shards=2))
        pipe.build()
        shards.append([label for _, labels in ROCALClassificationIterator(pipe) for label in labels.tolist()])
    labels = [int(label) for _, label, _ in items]
    assert shards[0][:3] == labels[:3] and shards[1][:4] == labels[3:]


def test_what_rocal_reads_wrongly_or_skips_is_refused_or_warned_by_name(tmp_path):
    images = [jpeg(n, 20, 16) for n in range(4)]
    extra = tmp_path / "extra"
    write_records(extra, [(1, 1.0, images[0]), (2, 2.0, images[1], 2), (3, 3.0, images[2])])
    with pytest.warns(UserWarning, match="1 records with extra labels"):
        pipe = mxnet_pipeline(extra, batch_size=2)
    assert [labels.tolist() for _, labels in ROCALClassificationIterator(pipe)] == [[1, 3]]

    same = tmp_path / "same"
    write_records(same, [(5, 1.0, images[0]), (5, 2.0, images[1])])
    with pytest.raises(ValueError, match="share the id 5"):
        mxnet_pipeline(same)
    parts = tmp_path / "parts"
    write_records(parts, [(1, 1.0, images[0]), (2, 1.0, images[1], 0, 1)])
    with pytest.raises(NotImplementedError, match="multi-part record"):
        mxnet_pipeline(parts)
    huge = tmp_path / "huge"
    write_records(huge, [(1, 3e9, images[0])])
    with pytest.raises(ValueError, match="the label 3000000000.0 is no int32"):
        mxnet_pipeline(huge)
    two = tmp_path / "two"
    write_records(two, [(1, 1.0, images[0])])
    write_records(two, [(2, 1.0, images[1])], name="val")
    with pytest.raises(ValueError, match="holds 2 .rec files"):
        mxnet_pipeline(two)
    bad = tmp_path / "bad"
    _, idx = write_records(bad, [(1, 1.0, images[0])])
    with open(idx, "a") as file:
        file.write("3 x\n")
    with pytest.raises(ValueError, match="line 2 is not 'key offset'"):
        mxnet_pipeline(bad)
    good = tmp_path / "good"
    write_records(good, [(1, 1.0, images[0])])
    with pytest.raises(NotImplementedError, match="image_random_crop after fn.readers.mxnet"):
        with Pipeline(batch_size=1, rocal_cpu=True):
            fn.decoders.image_random_crop(fn.readers.mxnet(path=str(good)))
    with pytest.raises(ValueError, match="reads its path's images and the reader its path's labels"):
        with Pipeline(batch_size=1, rocal_cpu=True):
            fn.decoders.image(fn.readers.mxnet(path=str(good)), path=str(extra))
