"""fastload.compat.dali's record readers (record_readers, numpy_readers, lmdb_readers) against real DALI 2.4's
CPU readers, on small files written here.

fn.readers.tfrecord (fixed, scalar, string and variable-length features over two files with DALI's
tfrecord2idx index files), fn.readers.webdataset (DALI's grouping of awkward tar members, extension sets,
dtypes, missing components, wds2idx index files), fn.readers.numpy (discovery, files, file_list, regions of
interest), fn.readers.mxnet, fn.readers.caffe / caffe2 (LMDB) and fn.readers.sequence: the same samples, in
the same order (one shard, shard_id/num_shards, pad_last_batch, stick_to_shard, a seeded random_shuffle),
with the same bytes, values, dtypes and shapes as DALI (exact: tolerance 0), over several iterations so that
the stream goes past an epoch's end. fn.decoders.numpy, which DALI 2.4 runs only with a CUDA driver, is
checked against numpy and DALI's fn.cast. What DALI leaves undefined or fails on is refused by name.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import fastload.compat.dali as ours
import fastload.compat.dali.tfrecord as our_tfrec
from fastload.tfrecords import example, frame

from conftest import import_dali


def run_reader(mod, reader, batch_size: int, iterations: int) -> list:
    """``iterations`` batches of the pipeline whose outputs ``reader(mod)`` gives: per output, its layout and per
    sample arrays."""
    @mod.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=3)
    def pipe():
        return tuple(reader(mod))
    pipeline = pipe()
    pipeline.build()
    batches = []
    for _ in range(iterations):
        outputs = pipeline.run()
        batches.append([(out.layout(), [np.array(out.at(i)) for i in range(len(out))]) for out in outputs])
    return batches


def assert_same_stream(reader, batch_size: int = 4, iterations: int = 4) -> None:
    dali = import_dali()
    expected = run_reader(dali, lambda mod: reader(mod, dali), batch_size, iterations)
    got = run_reader(ours, lambda mod: reader(mod, dali), batch_size, iterations)
    assert len(got) == len(expected)
    for b, (want_batch, got_batch) in enumerate(zip(expected, got)):
        assert len(got_batch) == len(want_batch), b
        for k, ((want_layout, want), (got_layout, have)) in enumerate(zip(want_batch, got_batch)):
            assert got_layout == want_layout, (b, k, want_layout, got_layout)
            assert len(have) == len(want), (b, k)
            for i, (x, y) in enumerate(zip(want, have)):
                assert y.dtype == x.dtype and y.shape == x.shape, (b, k, i, x.dtype, x.shape, y.dtype, y.shape)
                np.testing.assert_array_equal(y, x, err_msg=f"batch {b}, output {k}, sample {i}")


# ------------------------------------------------------------------------------------------- tfrecord

def write_tfrecord(folder, name: str, records: list[dict]) -> tuple[str, str]:
    """A TFRecord file of Examples and its DALI index (tfrecord2idx: ``offset size`` per record)."""
    path, index = folder / f"{name}.tfrecord", folder / f"{name}.idx"
    lines, offset = [], 0
    with open(path, "wb") as file:
        for features in records:
            record = frame(example(features))
            file.write(record)
            lines.append(f"{offset} {len(record)}")
            offset += len(record)
    index.write_text("\n".join(lines) + "\n")
    return str(path), str(index)


@pytest.fixture(scope="module")
def tfrecords(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tfrecord")
    rng = np.random.default_rng(11)
    files = []
    for f, count in enumerate((7, 6)):
        records = [{"image/encoded": [bytes(rng.integers(0, 256, 13 + 5 * k, dtype=np.uint8))],
                    "image/class/label": [100 * f + k], "scalar": [int(rng.integers(-2 ** 40, 2 ** 40))],
                    "box": [float(v) for v in rng.normal(size=4)],
                    "points": [float(v) for v in rng.normal(size=2 * (k % 3))],
                    "ids": [int(v) for v in rng.integers(-9, 9, size=k % 4)]} for k in range(count)]
        files.append(write_tfrecord(folder, f"part{f}", records))
    return [p for p, _ in files], [i for _, i in files]


def _tfrecord_reader(paths, indexes, **args):
    def reader(mod, dali):
        tfrec = our_tfrec if mod is ours else dali.tfrecord
        out = mod.fn.readers.tfrecord(path=paths, index_path=indexes, features={
            "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
            "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
            "scalar": tfrec.FixedLenFeature([], tfrec.int64, 0),
            "box": tfrec.FixedLenFeature([2, 2], tfrec.float32, 0.0),
            "points": tfrec.VarLenFeature([2], tfrec.float32, 0.0),
            "ids": tfrec.VarLenFeature(tfrec.int64, 0)}, **args)
        assert list(out) == ["image/encoded", "image/class/label", "scalar", "box", "points", "ids"]
        return out["image/class/label"], out["image/encoded"], out["scalar"], out["box"], out["points"], out["ids"]
    return reader


@pytest.mark.parametrize("args", [{}, {"shard_id": 1, "num_shards": 3},
                                  {"shard_id": 2, "num_shards": 3, "pad_last_batch": True},
                                  {"random_shuffle": True, "seed": 5, "initial_fill": 4},
                                  {"random_shuffle": True, "seed": 7, "shard_id": 1, "num_shards": 2,
                                   "initial_fill": 3, "stick_to_shard": True}])
def test_tfrecord_matches_dali(tfrecords, args):
    assert_same_stream(_tfrecord_reader(*tfrecords, **args), batch_size=4, iterations=5)


def test_tfrecord_names_and_meta(tfrecords):
    import_dali()
    paths, indexes = tfrecords
    assert ours.fn.tfrecord_reader is ours.fn.readers.tfrecord
    assert ours.ops.TFRecordReader.spec is ours.ops.readers.TFRecord.spec

    @ours.pipeline_def(batch_size=5, num_threads=1, device_id=None)
    def pipe():
        reader = ours.ops.readers.TFRecord(path=paths, index_path=indexes, num_shards=2, shard_id=1,
                                           features={"scalar": our_tfrec.FixedLenFeature((), our_tfrec.int64, 0)},
                                           name="records")
        return reader()["scalar"]
    pipeline = pipe()
    pipeline.build()
    assert pipeline.reader_meta("records")["epoch_size"] == 13
    assert pipeline.epoch_size("records") == 13


def test_tfrecord_refusals(tmp_path):
    path, index = write_tfrecord(tmp_path, "r", [{"a": [1]}, {"b": [2.5]}])
    string_list = {"s": our_tfrec.VarLenFeature(our_tfrec.string, "")}
    with pytest.raises(ValueError, match="Tensors of strings"):
        ours.fn.readers.tfrecord(path=path, index_path=index, features=string_list)
    with pytest.raises(ValueError, match="index_path"):
        ours.fn.readers.tfrecord(path=path, features={"a": our_tfrec.VarLenFeature(our_tfrec.int64, 0)})
    with pytest.raises(NotImplementedError, match="shuffle_after_epoch=True"):
        ours.fn.readers.tfrecord(path=path, index_path=index, shuffle_after_epoch=True,
                                 features={"a": our_tfrec.VarLenFeature(our_tfrec.int64, 0)})
    with pytest.raises(NotImplementedError, match="shuffle_after_epoch_seed"):
        ours.fn.readers.tfrecord(path=path, index_path=index, shuffle_after_epoch_seed=3,
                                 features={"a": our_tfrec.VarLenFeature(our_tfrec.int64, 0)})

    @ours.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        return ours.fn.readers.tfrecord(path=path, index_path=index,
                                        features={"a": our_tfrec.FixedLenFeature([], our_tfrec.int64, 0)})["a"]
    pipeline = pipe()
    pipeline.build()
    with pytest.raises(Exception, match="no feature 'a'"):  # DALI gives an uninitialised scalar there
        pipeline.run()


# ----------------------------------------------------------------------------------------- webdataset

def write_tar(path, members: list[tuple[str, bytes | None]]) -> str:
    """A tar of ``members`` in order ((name, None): a folder)."""
    import io
    import tarfile
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return str(path)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two shards with what DALI's grouping meets: keys in folders, a folder entry, a dot file, an upper-case
    extension, a multi-dot extension and two alternatives of one set, a name without extension, a key seen
    again later (a new sample), a duplicate component (the first kept), a component in no output."""
    folder = tmp_path_factory.mktemp("webdataset")
    rng = np.random.default_rng(12)

    def data(n: int) -> bytes:
        return bytes(rng.integers(0, 256, n, dtype=np.uint8))
    first = [("a/000.jpg", data(24)), ("a/000.cls", b"7"), ("a/001.jpg", data(12)), ("a/001.txt", b"t1"),
             ("dir", None), ("002.JPG", data(8)), ("002.cls", b"2"), (".hidden", b"h"), ("003.seg.png", data(6)),
             ("003.jpg", data(40)), ("003.png", data(2)), ("noext", data(4)), ("a/000.jpg", data(16)),
             ("x/.dot.jpg", data(4)), ("004.jpg", data(20)), ("004.jpg", data(4)), ("004.cls", b"44")]
    second = [(f"s/{k:03d}.{e}", data(4 * (k + 1)) if e == "jpg" else str(k).encode())
              for k in range(5) for e in ("jpg", "cls")]
    return [write_tar(folder / "first.tar", first), write_tar(folder / "second.tar", second)]


@pytest.mark.parametrize("args", [
    {"ext": ["jpg", "cls;txt", "seg.png;png", "noext"]},
    {"ext": ["jpg", "cls;txt"], "case_sensitive_extensions": False, "shard_id": 1, "num_shards": 2},
    {"ext": ["jpg", "cls"], "missing_component_behavior": "skip", "random_shuffle": True, "seed": 9,
     "initial_fill": 3},
    {"ext": ["jpg", "jpg;cls"], "shard_id": 2, "num_shards": 3, "pad_last_batch": True},
    {"ext": "jpg", "dtypes": "int16"}])
def test_webdataset_matches_dali(shards, args):
    def reader(mod, dali):
        given = dict(args)
        if given.get("dtypes") == "int16":
            given["dtypes"] = [mod.types.INT16]
            given["missing_component_behavior"] = "skip"
            given["paths"] = shards[1:]
        out = mod.fn.readers.webdataset(**{"paths": shards, **given})
        return out if isinstance(out, list) else [out]
    assert_same_stream(reader, batch_size=4, iterations=4)


def test_webdataset_errors(shards):
    with pytest.raises(ValueError, match="Underful sample"):
        ours.fn.readers.webdataset(paths=shards, ext=["jpg", "cls"], missing_component_behavior="error")
    with pytest.raises(ValueError, match="size and dtype"):
        ours.fn.readers.webdataset(paths=shards, ext=["cls"], dtypes=[ours.types.INT32])
    with pytest.raises(ValueError, match="missing_component_behavior"):
        ours.fn.readers.webdataset(paths=shards, ext=["cls"], missing_component_behavior="drop")


def write_wds_index(tar_path: str, index_path, version: str = "v1.2") -> str:
    """wds2idx's index of a tar whose members are grouped by key (``version N``, then per sample its
    components ``ext offset size [filename]``)."""
    import tarfile
    groups: list[list[str]] = []
    last = None
    with tarfile.open(tar_path) as archive:
        for member in archive.getmembers():
            key, _, extension = member.name.partition(".")
            if key != last:
                groups.append([])
                last = key
            groups[-1].append(f"{extension} {member.offset_data} {member.size}" +
                              (f" {member.name}" if version == "v1.2" else ""))
    with open(index_path, "w") as file:
        file.write(f"{version} {len(groups)}\n" + "".join(" ".join(group) + "\n" for group in groups))
    return str(index_path)


@pytest.mark.parametrize("version", ["v1.1", "v1.2"])
def test_webdataset_index_files(shards, tmp_path, version):
    index = write_wds_index(shards[1], tmp_path / "second.idx", version)

    def reader(mod, dali):
        return mod.fn.readers.webdataset(paths=shards[1:], index_paths=[index], ext=["cls", "jpg"], shard_id=1,
                                         num_shards=2)
    assert_same_stream(reader, batch_size=3, iterations=3)


# -------------------------------------------------------------------------------------------- numpy

@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    """.npy files of one dtype and rank (DALI wants both alike in a batch) at the root, in folders (one level
    and deeper), a dot file, a Fortran-order array, and files the default filter leaves out (".NPY", ".npyx")."""
    root = tmp_path_factory.mktemp("numpy")
    rng = np.random.default_rng(13)
    for folder in ("sub/deep", "b", ".hid", "+a"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    shapes = {"z.npy": (13, 17), "a.npy": (24, 9), "B.npy": (5, 31), ".h.npy": (4, 1), "sub/c.npy": (31, 40),
              "sub/deep/q.npy": (3, 3), "b/d.npy": (7, 6), ".hid/x.npy": (2, 2), "+a/k.npy": (11, 5)}
    for name, shape in shapes.items():
        value = rng.normal(size=shape).astype(np.float32)
        np.save(root / name, np.asfortranarray(value) if name == "sub/c.npy" else value)
    (root / "e.NPY").write_bytes((root / "a.npy").read_bytes())
    (root / "f.npyx").write_bytes((root / "a.npy").read_bytes())
    (root / "list.txt").write_text("sub/c.npy\nz.npy\n\n./a.npy\n")
    return str(root)


@pytest.mark.parametrize("args", [{}, {"file_filter": "*.np*"},
                                  {"shard_id": 1, "num_shards": 3, "pad_last_batch": True},
                                  {"random_shuffle": True, "seed": 3, "initial_fill": 3},
                                  {"files": ["sub/c.npy", "z.npy", "a.npy"]}, {"file_list": "list.txt"}])
def test_numpy_matches_dali(arrays, args):
    args = {**args, "file_list": f"{arrays}/{args['file_list']}"} if "file_list" in args else args

    def reader(mod, dali):
        return [mod.fn.readers.numpy(file_root=arrays, **args)]
    assert_same_stream(reader, batch_size=4, iterations=4)


@pytest.mark.parametrize("roi", [{"roi_start": [1, 2], "roi_end": [5, 4]},
                                 {"rel_roi_start": [0.33, 0.5], "rel_roi_end": [0.71, 0.92]},
                                 {"rel_roi_start": [0.25, 0.15], "rel_roi_shape": [0.5, 0.47]},
                                 {"rel_roi_start": [0.5], "roi_axes": [1]},
                                 {"roi_start": [-2, 3], "roi_end": [4, 20], "out_of_bounds_policy": "pad",
                                  "fill_value": 7.5},
                                 {"roi_start": [-2, 3], "roi_end": [4, 20], "out_of_bounds_policy": "trim_to_shape"},
                                 {"roi_start": [3], "roi_shape": [40], "roi_axes": [0], "out_of_bounds_policy": "pad"}])
def test_numpy_roi_matches_dali(arrays, roi):
    def reader(mod, dali):
        return [mod.fn.readers.numpy(file_root=arrays, files=["z.npy", "a.npy", "sub/c.npy", "+a/k.npy"], **roi)]
    assert_same_stream(reader, batch_size=4, iterations=1)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint16, np.int32])
def test_numpy_pad_fills_integers_as_dali_converts(tmp_path, dtype):
    """An integer array's fill_value is rounded (halves away from zero) and saturated to its type."""
    rng = np.random.default_rng(17)
    for k, shape in enumerate([(13, 17), (24, 9)]):
        np.save(tmp_path / f"{k}.npy", rng.integers(0, 100, size=shape).astype(dtype))
    for fill in (2.7, -3.0, 2.5, -2.5, 300.0, 70000.5, -1e10):
        def reader(mod, dali, fill=fill):
            return [mod.fn.readers.numpy(file_root=str(tmp_path), roi_start=[-2, 3], roi_end=[5, 20],
                                         out_of_bounds_policy="pad", fill_value=fill)]
        assert_same_stream(reader, batch_size=2, iterations=1)


def test_numpy_refusals(arrays):
    with pytest.raises(NotImplementedError, match="GPUDirect"):
        ours.fn.readers.numpy(file_root=arrays, device="gpu")
    with pytest.raises(ValueError, match="cannot be mixed"):
        ours.fn.readers.numpy(file_root=arrays, roi_start=[1, 1], rel_roi_end=[0.5, 0.5])
    with pytest.raises(TypeError, match="fn.readers.numpy: file_list must be a path"):
        ours.fn.readers.numpy(file_list=3)  # not a file descriptor to read (and close)
    with pytest.raises(RuntimeError, match="fn.readers.numpy: cannot open file_list '/nonexistent/list.txt'"):
        ours.fn.readers.numpy(file_list="/nonexistent/list.txt")

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return ours.fn.readers.numpy(file_root=arrays, files=["z.npy"], roi_start=[0, 0], roi_end=[14, 3])
    pipeline = pipe()
    pipeline.build()
    with pytest.raises(Exception, match="out of the array's bounds"):
        pipeline.run()


def _npy_bytes(array: np.ndarray) -> np.ndarray:
    import io
    buffer = io.BytesIO()
    np.save(buffer, array)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


@pytest.mark.parametrize("dtype", [None, "INT8", "FLOAT", "UINT16"])
def test_decoders_numpy(dtype):
    """DALI 2.4's CPU decoders.numpy needs a CUDA driver (it fails without one): the arrays are checked
    against numpy's reading of the files, converted by real DALI's fn.cast (ConvertSat, which DALI's decoder
    converts with)."""
    from conftest import run_dali_graph
    dali = import_dali()
    rng = np.random.default_rng(14)
    values = [rng.normal(scale=300, size=(13, 17)).astype(np.float32),
              np.asfortranarray(rng.normal(scale=300, size=(24, 9)).astype(np.float32)),
              (rng.normal(scale=300, size=(3, 31)).astype(np.float32) * 2).round() / 2]  # halves: the rounding
    encoded = [_npy_bytes(v) for v in values]
    want = run_dali_graph(dali, [np.ascontiguousarray(v) for v in values],
                          lambda mod, x: mod.fn.cast(x, dtype=getattr(mod.types, dtype)) if dtype else x + 0,
                          layout="")
    got = run_dali_graph(ours, encoded, lambda mod, x: mod.fn.decoders.numpy(
        x, **({"dtype": getattr(mod.types, dtype)} if dtype else {})), layout="")
    for x, y in zip(want[0], got[0]):
        assert y.dtype == x.dtype and y.shape == x.shape
        np.testing.assert_array_equal(y, x)


# -------------------------------------------------------------------------------------------- mxnet

def recordio_record(image: bytes, label, flag_labels=None) -> bytes:
    """One MXNet image record: magic, length, ImageRecordIOHeader (flag, label, ids), labels, image, padding."""
    import struct
    labels = np.asarray(flag_labels if flag_labels is not None else [], dtype="<f4").tobytes()
    data = struct.pack("<IfQQ", 0 if flag_labels is None else len(flag_labels), label, 7, 0) + labels + image
    return struct.pack("<II", 0xCED7230A, len(data)) + data + bytes(-len(data) % 4)


@pytest.fixture(scope="module")
def recordio(tmp_path_factory):
    """Two RecordIO files (single and multi-value labels, an empty image) and one index over both, its
    offsets into the files taken back to back and listed out of order (as DALI reads them: sorted)."""
    folder = tmp_path_factory.mktemp("mxnet")
    rng = np.random.default_rng(15)
    paths, lines, offset = [], [], 0
    for f, count in enumerate((5, 4)):
        path = folder / f"part{f}.rec"
        with open(path, "wb") as file:
            for k in range(count):
                image = bytes(rng.integers(0, 256, 0 if (f, k) == (0, 2) else 9 + 3 * k, dtype=np.uint8))
                labels = [float(v) for v in rng.normal(size=k)] if k % 2 else None
                record = recordio_record(image, float(10 * f + k) + 0.25, labels)
                file.write(record)
                lines.append(f"{len(lines)}\t{offset}")
                offset += len(record)
        paths.append(str(path))
    index = folder / "all.idx"
    index.write_text("\n".join(lines[::-1]) + "\n")
    return paths, str(index)


@pytest.mark.parametrize("args", [{}, {"shard_id": 1, "num_shards": 2},
                                  {"shard_id": 2, "num_shards": 3, "pad_last_batch": True},
                                  {"random_shuffle": True, "seed": 4, "initial_fill": 3}])
def test_mxnet_matches_dali(recordio, args):
    paths, index = recordio

    def reader(mod, dali):
        return mod.fn.readers.mxnet(path=paths, index_path=index, **args)
    assert_same_stream(reader, batch_size=4, iterations=4)


# --------------------------------------------------------------------------------------- caffe, caffe2

def _field(number: int, payload: bytes) -> bytes:
    from fastload.tfrecords import _encode_varint
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def _varint_field(number: int, value: int) -> bytes:
    from fastload.tfrecords import _encode_varint
    return _encode_varint(number << 3) + _encode_varint(value & (1 << 64) - 1)


def caffe_datum(data: bytes, label: int | None, raw_shape=None) -> bytes:
    """A caffe.Datum: channels 1, height 2, width 3, data 4, label 5, encoded 7."""
    out = b""
    if raw_shape is not None:
        height, width, channels = raw_shape
        out += _varint_field(1, channels) + _varint_field(2, height) + _varint_field(3, width)
    out += _field(4, data)
    if label is not None:
        out += _varint_field(5, label)
    return out + (_varint_field(7, 0) if raw_shape is not None else b"")


def write_lmdb(path, records: list[tuple[bytes, bytes]]) -> str:
    lmdb = pytest.importorskip("lmdb")
    env = lmdb.open(str(path), map_size=1 << 22)
    with env.begin(write=True) as txn:
        for key, value in records:
            txn.put(key, value)
    env.close()
    return str(path)


@pytest.fixture(scope="module")
def caffe_dbs(tmp_path_factory):
    """Two Caffe LMDBs, keys written out of order (LMDB keeps them sorted), encoded and raw images."""
    folder = tmp_path_factory.mktemp("caffe")
    rng = np.random.default_rng(16)
    paths = []
    for f, count in enumerate((6, 3)):
        records = []
        for k in range(count):
            key = f"{(k * 7) % count:08d}_{f}".encode()
            if k % 3 == 2:
                shape = (3 + k, 2 + f, 3)
                value = caffe_datum(bytes(rng.integers(0, 256, math.prod(shape), dtype=np.uint8)), k - 2, shape)
            else:
                value = caffe_datum(bytes(rng.integers(0, 256, 11 + k, dtype=np.uint8)), 100 * f + k)
            records.append((key, value))
        paths.append(write_lmdb(folder / f"db{f}", records))
    return paths


@pytest.mark.parametrize("args", [{}, {"shard_id": 1, "num_shards": 2}, {"label_available": False},
                                  {"random_shuffle": True, "seed": 2, "initial_fill": 3, "pad_last_batch": True}])
def test_caffe_matches_dali(caffe_dbs, args):
    def reader(mod, dali):
        out = mod.fn.readers.caffe(path=caffe_dbs, **args)
        return out if isinstance(out, list) else [out]
    assert_same_stream(reader, batch_size=1, iterations=11)  # (DALI's batches cannot mix encoded and raw images)


def test_two_live_pipelines_read_one_lmdb_as_dalis_do(caffe_dbs):
    """LMDB opens an environment once per process: two pipelines over the same folders, both alive (a
    training and a validation pipeline, or one rebuilt), share it, and each reads DALI's stream."""
    dali = import_dali()

    def pipeline(mod):
        @mod.pipeline_def(batch_size=1, num_threads=2, device_id=None, seed=3)
        def pipe():
            return tuple(mod.fn.readers.caffe(path=caffe_dbs))
        built = pipe()
        built.build()
        return built
    first, second, theirs = pipeline(ours), pipeline(ours), pipeline(dali)
    for _ in range(10):
        want = [np.array(out.at(0)) for out in theirs.run()]
        for got in (first.run(), second.run()):
            for k, (x, out) in enumerate(zip(want, got)):
                np.testing.assert_array_equal(np.array(out.at(0)), x, err_msg=f"output {k}")


def tensor_proto(kind: int, values=None, dims=(), data: bytes | None = None) -> bytes:
    """A caffe2.TensorProto: dims 1, data_type 2, float_data 3 / int32_data 4 (packed), byte_data 5,
    string_data 6, int64_data 10."""
    import struct

    from fastload.tfrecords import _encode_varint
    out = b"".join(_varint_field(1, d) for d in dims) + _varint_field(2, kind)
    if kind == 1:
        out += _field(3, struct.pack(f"<{len(values)}f", *values))
    elif kind == 2:
        out += _field(4, b"".join(_encode_varint(v & (1 << 64) - 1) for v in values))
    elif kind == 10:
        out += _field(10, b"".join(_encode_varint(v & (1 << 64) - 1) for v in values))
    elif kind == 3:
        out += _field(5, data)
    elif kind == 4:
        out += _field(6, data)
    return out


def tensor_protos(*protos: bytes) -> bytes:
    return b"".join(_field(1, p) for p in protos)


CAFFE2_CASES = {  # name: (reader arguments, record k -> its protos)
    "single": ({}, lambda rng, k: [tensor_proto(4, data=bytes(rng.integers(0, 256, 9 + k, dtype=np.uint8))),
                                   tensor_proto(2, [k - 3])]),
    "raw dense": ({"label_type": 2}, lambda rng, k: [
        tensor_proto(3, dims=(4, 3, 2), data=bytes(rng.integers(0, 256, 24, dtype=np.uint8))),
        tensor_proto(1, [float(v) for v in rng.normal(size=k % 3 + 1)])]),
    "extra and bbox": ({"additional_inputs": 2, "bbox": True}, lambda rng, k: [
        tensor_proto(4, data=bytes(rng.integers(0, 256, 6, dtype=np.uint8))), tensor_proto(1, [0.5 * k]),
        tensor_proto(10, [int(v) for v in rng.integers(-2 ** 40, 2 ** 40, size=k + 1)]),
        tensor_proto(2, [int(v) for v in rng.integers(-9, 9, size=3)]),
        tensor_proto(2, [int(v) for v in rng.integers(0, 99, size=4)])]),
    "no label": ({"label_type": 4, "additional_inputs": 1}, lambda rng, k: [
        tensor_proto(4, data=bytes(rng.integers(0, 256, 3 + k, dtype=np.uint8))), tensor_proto(1, [1.5] * k)]),
}


@pytest.mark.parametrize("case", sorted(CAFFE2_CASES))
def test_caffe2_matches_dali(tmp_path, case):
    args, protos = CAFFE2_CASES[case]
    rng = np.random.default_rng(17)
    path = write_lmdb(tmp_path / "db", [(f"{k:04d}".encode(), tensor_protos(*protos(rng, k))) for k in range(7)])

    def reader(mod, dali):
        out = mod.fn.readers.caffe2(path=path, shard_id=1, num_shards=2, **args)
        return out if isinstance(out, list) else [out]
    assert_same_stream(reader, batch_size=3, iterations=3)


def test_caffe2_refusals(tmp_path):
    path = write_lmdb(tmp_path / "db", [(b"0", tensor_protos(tensor_proto(4, data=b"x"), tensor_proto(2, [1]),
                                                            tensor_proto(2, [1, 2, 3, 4])))])
    for label_type in (1, 3):  # DALI 2.4 fails on both
        with pytest.raises(NotImplementedError, match=f"label_type={label_type}"):
            ours.fn.readers.caffe2(path=path, label_type=label_type, num_labels=5)

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        return tuple(ours.fn.readers.caffe2(path=path))
    pipeline = pipe()
    pipeline.build()
    with pytest.raises(Exception, match="bounding box"):  # the extra proto: DALI 2.4 takes it for a box
        pipeline.run()


# ----------------------------------------------------------------------------------------- sequence

@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    """Streams of PNG and JPEG frames (names out of creation order), one too short for a sequence, a
    non-image file in a stream and an image beside the streams (neither is a frame)."""
    from PIL import Image
    root = tmp_path_factory.mktemp("sequence")
    rng = np.random.default_rng(18)
    for stream, (count, ext) in {"b": (5, "png"), "a": (7, "png"), "c1": (2, "png"), "10": (4, "jpg")}.items():
        (root / stream).mkdir()
        for k in range(count):
            Image.fromarray(rng.integers(0, 256, (13, 17, 3), dtype=np.uint8)).save(
                root / stream / f"{(k * 3) % count:03d}_{stream}.{ext}")
    (root / "a" / "zz.txt").write_text("not a frame")
    (root / "top.png").write_bytes((root / "a" / "000_a.png").read_bytes())
    return str(root)


@pytest.mark.parametrize("args", [{"sequence_length": 3}, {"sequence_length": 2, "step": 2, "stride": 2},
                                  {"sequence_length": 3, "shard_id": 1, "num_shards": 2, "pad_last_batch": True},
                                  {"sequence_length": 2, "random_shuffle": True, "seed": 6, "initial_fill": 4}])
def test_sequence_matches_dali(streams, args):
    import warnings

    def reader(mod, dali):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # DALI deprecates fn.readers.sequence
            return [mod.fn.readers.sequence(file_root=streams, **args)]
    assert_same_stream(reader, batch_size=3, iterations=4)


def test_two_record_readers_in_one_pipeline(tmp_path):
    """Each reader reads its own records (the second through its spec's read, not as a file)."""
    first = write_tfrecord(tmp_path, "x", [{"v": [k]} for k in range(5)])
    second = write_tfrecord(tmp_path, "y", [{"v": [100 + k]} for k in range(3)])

    def reader(mod, dali):
        tfrec = our_tfrec if mod is ours else dali.tfrecord
        return [mod.fn.readers.tfrecord(path=path, index_path=index, features={
            "v": tfrec.FixedLenFeature([1], tfrec.int64, 0)})["v"] for path, index in (first, second)]
    assert_same_stream(reader, batch_size=2, iterations=4)


def test_mxnet_images_decode_as_in_dali(tmp_path):
    """The reader's bytes feed fn.decoders.image as fn.readers.file's do (the graph runs per sample)."""
    import io

    from PIL import Image
    rng = np.random.default_rng(19)
    path, lines = tmp_path / "images.rec", []
    with open(path, "wb") as file:
        for k, shape in enumerate([(13, 17, 3), (24, 9, 3), (31, 40, 3)]):
            encoded = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).save(encoded, "JPEG", quality=85)
            lines.append(f"{k}\t{file.tell()}")
            file.write(recordio_record(encoded.getvalue(), float(k)))
    (tmp_path / "images.idx").write_text("\n".join(lines) + "\n")

    def reader(mod, dali):
        images, labels = mod.fn.readers.mxnet(path=str(path), index_path=str(tmp_path / "images.idx"))
        return [mod.fn.decoders.image(images), labels]
    assert_same_stream(reader, batch_size=2, iterations=2)


def test_lmdb_missing_is_refused_by_name(monkeypatch, tmp_path):
    import sys
    monkeypatch.setitem(sys.modules, "lmdb", None)  # import lmdb now raises ImportError
    with pytest.raises(NotImplementedError, match="lmdb module"):
        ours.fn.readers.caffe(path=str(tmp_path))
