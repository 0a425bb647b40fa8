"""fastload.compat.dali.record_readers against real DALI 2.4's CPU readers, on small files written here.

fn.readers.tfrecord (fixed, scalar, string and variable-length features over two files with DALI's
tfrecord2idx index files; shards, pad_last_batch and a seeded random_shuffle), fn.readers.webdataset,
fn.readers.numpy (with fn.decoders.numpy) and fn.readers.mxnet: the same samples, in the same order, with
the same bytes, values, dtypes and shapes as DALI (exact: tolerance 0), over several iterations so that the
stream goes past an epoch's end. What DALI leaves undefined (a missing TFRecord feature) is refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours
import fastload.compat.dali.tfrecord as our_tfrec
from fastload.tfrecords import example, frame

from conftest import import_dali


def run_reader(mod, reader, batch_size: int, iterations: int) -> list:
    """``iterations`` batches of the pipeline whose outputs ``reader(mod)`` gives: per output, per sample, arrays."""
    @mod.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=3)
    def pipe():
        return tuple(reader(mod))
    pipeline = pipe()
    pipeline.build()
    batches = []
    for _ in range(iterations):
        outputs = pipeline.run()
        batches.append([[np.array(out.at(i)) for i in range(len(out))] for out in outputs])
    return batches


def assert_same_stream(reader, batch_size: int = 4, iterations: int = 4) -> None:
    dali = import_dali()
    expected = run_reader(dali, lambda mod: reader(mod, dali), batch_size, iterations)
    got = run_reader(ours, lambda mod: reader(mod, dali), batch_size, iterations)
    assert len(got) == len(expected)
    for b, (want_batch, got_batch) in enumerate(zip(expected, got)):
        for k, (want, have) in enumerate(zip(want_batch, got_batch)):
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
