"""fastload.compat.rocal's Caffe and Caffe2 LMDB readers (``fn.readers.caffe`` / ``caffe2`` + a decoder with
``path=``): real DALI's Caffe and Caffe2 readers are the reference for the LMDBs written here (there is no
Caffe for this Python); rocAL's rules (ROCm/rocAL 0981d5bb: caffe_lmdb_record_reader.cpp,
caffe2_lmdb_record_reader.cpp, caffe_meta_data_reader.cpp, caffe2_meta_data_reader.cpp) and its
tests/python_api/caffe_reader.py and caffe2_reader.py."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

import fastload.compat.rocal.fn as fn
import fastload.compat.rocal.types as types
from fastload.compat.rocal.pipeline import Pipeline
from fastload.compat.rocal.plugin.pytorch import ROCALClassificationIterator
from fastload.sample_data import make_image

from rocal_scripts import CV2_STAND_IN, SCRIPTS, run_rocal_script

lmdb = pytest.importorskip("lmdb")


def jpeg(seed: int, width: int, height: int) -> bytes:
    out = io.BytesIO()
    make_image(seed, width, height).save(out, format="JPEG", quality=90)
    return out.getvalue()


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def field(number: int, value) -> bytes:
    """A protobuf field: an int as a varint, bytes as a length-delimited field."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def datum(image: bytes, label: int | None, encoded=True, shape=(3, 0, 0)) -> bytes:
    """caffe.Datum: channels 1, height 2, width 3, data 4, label 5, encoded 7 (as convert_imageset writes
    an encoded image: its shape fields too)."""
    out = field(1, shape[0]) + field(2, shape[1]) + field(3, shape[2]) + field(4, image)
    out += field(5, label) if label is not None else b""
    return out + field(7, int(encoded))


def tensor_protos(image: bytes, label: int | None, packed=True) -> bytes:
    """caffe2.TensorProtos (protos = 1): the image TensorProto, its encoded bytes in byte_data (5) where
    rocAL reads them (typed BYTE with dims [size, 1, 1], so that DALI, which reads byte_data as raw pixels
    of those dims, hands the same bytes back), then the label's (data_type 2 INT32, int32_data = 4)."""
    image_proto = field(1, len(image)) + field(1, 1) + field(1, 1) + field(2, 3) + field(5, image)
    if label is None:
        label_proto = field(2, 2)
    elif packed:
        label_proto = field(2, 2) + field(4, varint(label))
    else:
        label_proto = field(2, 2) + field(4, label)
    return field(1, image_proto) + field(1, label_proto)


def write_lmdb(folder, records) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(folder), map_size=1 << 26)
    with env.begin(write=True) as txn:
        for key, value in records:
            txn.put(key.encode(), value)
    env.close()
    return str(folder)


@pytest.fixture()
def images():
    """Seven JPEGs of awkward sizes with labels, keyed as Caffe's convert_imageset keys them
    ("%08d_" + the list's path), written here out of key order."""
    items = []
    for n in range(7):
        key = f"{(n * 5) % 7:08d}_n0{n % 3}/img_{n}.JPEG"
        items.append((key, jpeg(n, 40 + 7 * n, 30 + 5 * (n % 3)), 3 * n - 2))
    return items


@pytest.fixture()
def caffe_lmdb(tmp_path, images):
    return write_lmdb(tmp_path / "caffe", [(key, datum(data, label)) for key, data, label in images])


@pytest.fixture()
def caffe2_lmdb(tmp_path, images):
    return write_lmdb(tmp_path / "caffe2", [(key, tensor_protos(data, label, packed=n % 2 == 0))
                                            for n, (key, data, label) in enumerate(images)])


def by_key(images):
    return sorted(images)


@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
def test_real_dali_reads_the_lmdbs_written_here(kind, caffe_lmdb, caffe2_lmdb, images):
    """DALI's readers are the reference for the files: the same images and labels, in key order."""
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def

    @pipeline_def(batch_size=7, num_threads=1, device_id=None)
    def read():
        if kind == "caffe":
            return tuple(dali_fn.readers.caffe(path=caffe_lmdb))
        return tuple(dali_fn.readers.caffe2(path=caffe2_lmdb))

    pipe = read()
    pipe.build()
    data, labels = pipe.run()
    expected = by_key(images)
    assert [bytes(np.array(data[i])) for i in range(7)] == [d for _, d, _ in expected]
    assert [int(np.array(labels[i]).reshape(-1)[0]) for i in range(7)] == [label for _, _, label in expected]


def run_pipeline(kind, path, batch_size=3, decoder="image", layout=types.NHWC, **decoder_args):
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=0, seed=3, rocal_cpu=True, tensor_layout=layout)
    with pipe:
        jpegs, _ = getattr(fn.readers, kind)(path=path)
        images = getattr(fn.decoders, decoder)(jpegs, path=path, **decoder_args)
        pipe.set_outputs(images)
    pipe.build()
    return ROCALClassificationIterator(pipe)


@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
def test_reads_every_record_in_key_order_with_its_label(kind, caffe_lmdb, caffe2_lmdb, images):
    """Batches of 3 over 7 records: key order, each image decoded as PIL decodes it (capped at rocAL's
    1000x1000 it is whole), its label as int64; the last batch filled by repeating the last record (rocAL's
    LAST_BATCH_FILL with pad_last_batch)."""
    path = caffe_lmdb if kind == "caffe" else caffe2_lmdb
    loader = run_pipeline(kind, path)
    expected = by_key(images)
    seen_images, seen_labels = [], []
    for [batch], labels in loader:
        assert labels.dtype == torch.int64 and labels.shape == (3,)
        seen_images.extend(batch)
        seen_labels.extend(labels.tolist())
    assert len(loader) == 3
    order = list(range(7)) + [6, 6]
    assert seen_labels == [expected[i][2] for i in order]
    for got, i in zip(seen_images, order):
        reference = np.asarray(Image.open(io.BytesIO(expected[i][1])).convert("RGB"))
        height, width = reference.shape[:2]
        assert np.array_equal(got[:height, :width].numpy(), reference)


def test_random_crop_decoder_reads_the_records_and_shards_split_them(caffe_lmdb, caffe2_lmdb, images):
    """rocAL's image_random_crop and image_slice have Caffe/Caffe2 branches that read ``path``; two shards
    see disjoint halves of the key order (plus the pad)."""
    loader = run_pipeline("caffe2", caffe2_lmdb, batch_size=2, decoder="image_random_crop")
    labels = [label for _, batch_labels in loader for label in batch_labels.tolist()]
    assert sorted(set(labels)) == sorted(label for _, _, label in images)
    shards = []
    for shard in (0, 1):
        loader = run_pipeline("caffe", caffe_lmdb, batch_size=2,
                              decoder="image_slice", shard_id=shard, num_shards=2)
        shards.append({label for _, batch_labels in loader for label in batch_labels.tolist()})
    assert not shards[0] & shards[1] and shards[0] | shards[1] == {label for _, _, label in images}


def test_refusals_name_the_record_and_the_reason(tmp_path, images):
    """Where rocAL would read another record's image, lose a label or fail: refused, naming the key."""
    key, data, label = images[0]

    def build(kind, records, folder):
        path = write_lmdb(tmp_path / folder, records)
        return run_pipeline(kind, path)

    with pytest.raises(ValueError, match="no '.'"):
        build("caffe", [("00000001_img", datum(data, 1))], "nodot")
    # "b.png" is looked up as "b.JPEG": the first key at or after it is "b.JPEG0", another record
    with pytest.raises(ValueError, match=r"landing:b.png: .*would read the record 'b.JPEG0'"):
        build("caffe", [("b.png", datum(data, 1)), ("b.JPEG0", datum(data, 2))], "landing")
    with pytest.raises(ValueError, match="raw pixels"):
        build("caffe", [(key, datum(b"\0" * 12, 1, encoded=False, shape=(3, 2, 2)))], "raw")
    build_path = write_lmdb(tmp_path / "fine", [(key, datum(data, 1))])
    with pytest.raises(ValueError, match="AnnotatedDatum"):
        build("caffe", [(key, field(1, datum(data, 1)) + field(2, 0))], "annotated")
    with pytest.raises(ValueError, match=f"{key}.*no int32_data"):
        build("caffe2", [(key, tensor_protos(data, None))], "nolabel")
    with pytest.warns(UserWarning, match="1 records of no TensorProto .* skipped, as rocAL skips them"):
        skipping = build("caffe2", [(key, tensor_protos(data, 4)), ("zz.JPEG", b"")], "skipping")
    assert [labels.tolist() for _, labels in skipping] == [[4, 4, 4]]
    with pytest.raises(ValueError, match="no second TensorProto"):
        build("caffe2", [(key, field(1, field(5, data)))], "onlyimage")
    with pytest.raises(ValueError, match="reads its own path"):
        pipe = Pipeline(batch_size=1, num_threads=1, device_id=0, rocal_cpu=True)
        with pipe:
            jpegs, _ = fn.readers.caffe(path=build_path)
            fn.decoders.image(jpegs)
    with pytest.raises(ValueError, match="not an LMDB folder"):
        run_pipeline("caffe", str(tmp_path))
    for kind in ("caffe", "caffe2"):
        with pytest.raises(NotImplementedError, match=f"readers.{kind}\\(bbox=True\\)"):
            with Pipeline(batch_size=1, num_threads=1, device_id=0, rocal_cpu=True):
                getattr(fn.readers, kind)(path=str(tmp_path), bbox=True)




@pytest.mark.parametrize("kind", ["caffe", "caffe2"])
def test_rocals_caffe_reader_scripts_run_unmodified(kind, caffe_lmdb, caffe2_lmdb, tmp_path):
    """tests/python_api/caffe_reader.py and caffe2_reader.py (vendored unchanged in tests/data/rocal), in
    their classification mode, through ``python -m fastload.compat.run``; a cv2 module beside them saves
    what they draw. Shuffled, batches of 4 over 7 records: caffe_reader.py runs 2 epochs (--num-epochs),
    caffe2_reader.py its 1; every saved image is 224x224 NHWC and, mirrored back from BGR, one of the
    records' images resized."""
    path = caffe_lmdb if kind == "caffe" else caffe2_lmdb
    (tmp_path / "cv2.py").write_text(CV2_STAND_IN)
    script = (SCRIPTS / f"{kind}_reader.py").read_text()
    done = run_rocal_script(tmp_path, f"{kind}_reader.py", script, "--image-dataset-path", path, "--classification",
                            "--batch-size", "4", "--num-epochs", "2", "--NHWC")
    assert f"{kind.upper()} READER (CLASSIFCATION/ DETECTION)  SUCCESS" in done.stdout
    saved = sorted((tmp_path / "output_folder" / f"{kind}_reader" / "classification").glob("*.npy"))
    assert len(saved) == (16 if kind == "caffe" else 8)
    assert all(np.load(f).shape == (224, 224, 3) for f in saved)
