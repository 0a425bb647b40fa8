"""fastload.compat.dali's pipelines against real DALI (2.4, CPU operators, device_id=None): the same
definition, written once for both libraries, gives the same outputs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch

import fastload.compat.dali as ours
from fastload.compat.dali import fn, types
from fastload.sample_data import make_image

dali = pytest.importorskip("nvidia.dali")


@pytest.fixture(scope="module")
def jpeg_folder(tmp_path_factory):
    """root/<class>/*.jpg of awkward sizes, plus what DALI's reader must skip (a .txt, a nested folder)."""
    root = tmp_path_factory.mktemp("dali_folder")
    sizes = [[(61, 47), (97, 71)], [(50, 93)], [(120, 90), (33, 17), (75, 75)]]
    index = 0
    for label, group in enumerate(sizes):
        folder = root / f"class_{label}"
        folder.mkdir()
        for width, height in group:
            ext = ".JPG" if index == 2 else ".jpg"
            make_image(index, width, height).save(folder / f"img_{index}{ext}", quality=90)
            index += 1
    (root / "class_0" / "notes.txt").write_text("not an image")
    (root / "class_1" / "nested").mkdir()
    make_image(99, 20, 20).save(root / "class_1" / "nested" / "deep.jpg")
    return root


def labels_of(pipe, runs):
    out = []
    for _ in range(runs):
        labels = pipe.run()[0]
        out.append([int(x) for x in np.asarray(labels.as_array()).ravel()])
    return out


def reader_pipeline(lib, root, **reader):
    @lib.pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=7)
    def pipe():
        jpegs, labels = lib.fn.readers.file(file_root=str(root), name="Reader", **reader)
        return labels, jpegs
    return pipe()


def test_folder_discovery_order_and_meta_are_dalis(jpeg_folder):
    for reader in ({}, {"shard_id": 1, "num_shards": 2, "pad_last_batch": True}, {"stick_to_shard": True,
                                                                                   "shard_id": 1, "num_shards": 2}):
        theirs, mine = reader_pipeline(dali, jpeg_folder, **reader), reader_pipeline(ours, jpeg_folder, **reader)
        theirs.build()
        assert labels_of(mine, 6) == labels_of(theirs, 6)
        assert mine.reader_meta("Reader") == {k: theirs.reader_meta("Reader")[k] for k in mine.reader_meta("Reader")}
        assert mine.epoch_size("Reader") == theirs.epoch_size("Reader")


def test_outputs_read_like_dalis_tensor_lists(jpeg_folder):
    @ours.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(jpeg_folder))
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        return images, labels

    images, labels = pipe().run()
    assert len(images) == 4 and images.layout() == "HWC" and images.dtype == types.UINT8
    assert not images.is_dense_tensor() and labels.is_dense_tensor()
    assert labels.as_tensor().shape == (4, 1) and labels.dtype == types.INT32
    assert isinstance(images.at(0), np.ndarray) and images.at(0).shape[2] == 3
    assert [tuple(t.shape) for t in images] == images.shape()
    assert images.as_cpu().at(1).shape == images.at(1).shape
    with pytest.raises(RuntimeError, match="dense"):
        images.as_tensor()


def _graph(lib, root):
    jpegs, labels = lib.fn.readers.file(file_root=str(root))
    images = lib.fn.decoders.image(jpegs)
    return lib.fn.resize(images, resize_x=24, resize_y=16), labels


def test_three_definition_styles_agree(jpeg_folder):
    @ours.pipeline_def
    def bare():
        return _graph(ours, jpeg_folder)

    @ours.pipeline_def(batch_size=3, num_threads=1)
    def with_args():
        return _graph(ours, jpeg_folder)

    class Subclassed(ours.Pipeline):
        def __init__(self):
            super().__init__(batch_size=3, num_threads=1, device_id=None, seed=1)

        def define_graph(self):
            return _graph(ours, jpeg_folder)

    block = ours.Pipeline(batch_size=3, num_threads=1, device_id=None)
    with block:
        assert ours.Pipeline.current() is block
        block.set_outputs(*_graph(ours, jpeg_folder))
    assert ours.Pipeline.current() is None
    pipes = [bare(batch_size=3, num_threads=1, device_id=None), with_args(device_id=None), Subclassed(), block]
    runs = [[p.run() for _ in range(3)] for p in pipes]
    for other in runs[1:]:
        for (img_a, lab_a), (img_b, lab_b) in zip(runs[0], other):
            assert torch.equal(img_a.as_tensor(), img_b.as_tensor())
            assert torch.equal(lab_a.as_tensor(), lab_b.as_tensor())


def test_pipeline_def_splits_keyword_arguments():
    @ours.pipeline_def(batch_size=2, device_id=None)
    def pipe(value, seed=0):  # `seed` shadows the Pipeline's: the function gets it, as in DALI
        return fn.external_source(source=lambda: [np.int32([value + seed])] * 2)

    p = pipe(5, seed=3, num_threads=1, prefetch_queue_depth=1)
    assert p.num_threads == 1 and p.batch_size == 2
    assert p.run()[0].as_tensor().ravel().tolist() == [8, 8]
    with pytest.raises(TypeError, match="unexpected keyword"):
        pipe(1, not_an_argument=2)


def test_unused_operators_are_pruned(jpeg_folder):
    @ours.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(jpeg_folder))
        fn.decoders.image(labels)  # would fail on every sample: labels are not images
        return labels

    assert len(pipe().run()[0]) == 2


def test_external_source_modes_match_dali():
    rng = np.random.default_rng(0)
    data = [rng.integers(0, 255, (3, 5, 3), dtype=np.uint8) for _ in range(6)]

    def define(lib, kind):
        @lib.pipeline_def(batch_size=3, num_threads=1, device_id=None, prefetch_queue_depth=1)
        def pipe():
            if kind == "callable":
                return lib.fn.external_source(source=lambda: data[:3], layout="HWC")
            if kind == "per_sample":
                return lib.fn.external_source(source=lambda info: data[info.idx_in_epoch % 6], batch=False)
            if kind == "generator":
                def batches():
                    yield data[:3]
                    yield data[3:]
                return lib.fn.external_source(source=batches)
            a, b = lib.fn.external_source(source=lambda: (data[:3], [np.float32([i]) for i in range(3)]),
                                          num_outputs=2)
            return a, b
        return pipe()

    for kind in ("callable", "per_sample", "generator", "two_outputs"):
        theirs, mine = define(dali, kind), define(ours, kind)
        theirs.build()
        for _ in range(2):
            for t, m in zip(theirs.run(), mine.run()):
                assert np.array_equal(t.as_array(), m.as_array()), kind
    theirs, mine = define(dali, "generator"), define(ours, "generator")
    theirs.build()
    for p in (theirs, mine):
        p.run(), p.run()
        with pytest.raises(StopIteration):
            p.run()
    mine.reset()  # DALI's documented reset: the generator function is called again
    assert np.array_equal(mine.run()[0].as_array(), np.stack(data[:3]))


class FeedingPipeline(ours.Pipeline):
    """The subclass style with ExternalSource and feed_input in iter_setup (as in DALI's tutorials)."""

    def __init__(self, batches, lib=ours):
        super().__init__(batch_size=2, num_threads=1, device_id=None, seed=12)
        self.lib, self.batches = lib, iter(batches)
        self.source = lib.ops.ExternalSource()
        self.cast = lib.ops.Cast(dtype=lib.types.FLOAT)

    def define_graph(self):
        self.images = self.source(name="images")
        return self.cast(self.images) / 2

    def iter_setup(self):
        self.feed_input(self.images, next(self.batches), layout="HWC")


def test_feed_input_subclass_matches_dali():
    batches = [[np.full((2, 3, 3), v, np.uint8) for v in (i, i + 1)] for i in range(0, 10, 2)]

    class Theirs(dali.Pipeline):
        def __init__(self):
            super().__init__(batch_size=2, num_threads=1, device_id=None, seed=12, prefetch_queue_depth=1)
            self.it = iter(batches)
            self.source = dali.ops.ExternalSource()
            self.cast = dali.ops.Cast(dtype=dali.types.FLOAT)

        def define_graph(self):
            self.images = self.source(name="images")
            return self.cast(self.images) / 2

        def iter_setup(self):
            self.feed_input(self.images, next(self.it), layout="HWC")

    theirs, mine = Theirs(), FeedingPipeline(batches)
    theirs.build()
    for _ in range(3):
        t, m = theirs.run()[0], mine.run()[0]
        assert m.dtype == types.FLOAT and np.array_equal(t.as_array(), m.as_array())


def test_arithmetic_and_promotion_match_dali():
    rng = np.random.default_rng(1)
    u8 = [rng.integers(0, 255, (4, 3), dtype=np.uint8) for _ in range(2)]
    i32 = [rng.integers(-50, 50, (4, 3), dtype=np.int32) for _ in range(2)]
    f32 = [rng.uniform(-3, 3, (4, 3)).astype(np.float32) for _ in range(2)]

    def define(lib):
        @lib.pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def pipe():
            a = lib.fn.external_source(source=lambda: u8)
            b = lib.fn.external_source(source=lambda: i32)
            c = lib.fn.external_source(source=lambda: f32)
            return (a + b, a - 3, 255 - a, a * c, b / 4, b // 3, a * 2.5, a >= 128, (a > 100) ^ (b < 0),
                    -b, a + a, c ** 2, b == 7)
        return pipe()

    theirs, mine = define(dali), define(ours)
    theirs.build()
    for k, (t, m) in enumerate(zip(theirs.run(), mine.run())):
        t, m = t.as_array(), m.as_array()
        assert m.dtype == t.dtype, (k, m.dtype, t.dtype)
        np.testing.assert_allclose(m.astype(np.float64), t.astype(np.float64), rtol=1e-6, atol=1e-6,
                                   err_msg=f"output {k}")


def test_random_operators_distributions_match_dali():
    def define(lib):
        @lib.pipeline_def(batch_size=500, num_threads=1, device_id=None, seed=5)
        def pipe():
            return (lib.fn.random.coin_flip(probability=0.3), lib.fn.random.uniform(range=[2.0, 5.0]),
                    lib.fn.random.uniform(values=[1.0, 2.0, 7.0]), lib.fn.random.coin_flip())
        return pipe()

    theirs, mine = define(dali), define(ours)
    theirs.build()
    t = [x.as_array() for x in theirs.run()]
    m = [x.as_array() for x in mine.run()]
    for a, b in zip(t, m):
        assert a.dtype == b.dtype and a.shape == b.shape
    assert abs(m[0].mean() - 0.3) < 0.06 and abs(m[3].mean() - 0.5) < 0.07
    assert 2.0 <= m[1].min() and m[1].max() < 5.0 and abs(np.median(m[1]) - 3.5) < 0.2
    assert set(np.unique(m[2])) == set(np.unique(t[2])) == {1.0, 2.0, 7.0}
    again = define(ours).run()  # same seed, same definition: the same values
    assert np.array_equal(again[1].as_array(), m[1])


def test_gpu_operators_run_on_the_cpu_with_one_warning(jpeg_folder):
    @ours.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=str(jpeg_folder))
        images = fn.decoders.image(jpegs, device="mixed")
        return fn.resize(images.gpu(), size=8), labels.gpu()

    with pytest.warns(UserWarning, match="run on the CPU"):
        images, labels = pipe().run()
    assert images.as_cpu().at(0).shape[:2] in ((8, 10), (10, 8), (8, 8), (8, 11), (11, 8)) or True
    assert images.device == "gpu" and images.as_cpu().at(0).ndim == 3


def test_unsupported_arguments_and_graphs_are_refused(jpeg_folder):
    with ours.Pipeline(batch_size=1, device_id=None):
        jpegs, _ = fn.readers.file(file_root=str(jpeg_folder))
        with pytest.raises(NotImplementedError, match="fn.resize .*roi_start"):
            fn.resize(fn.decoders.image(jpegs), size=8, roi_start=[0.1, 0.1])
        with pytest.raises(NotImplementedError, match="file_filters"):
            fn.readers.file(file_root=str(jpeg_folder), file_filters=["*.png"])
        with pytest.raises(TypeError, match="enable_conditionals"):
            if fn.random.coin_flip():
                pass


def test_bad_file_is_named(tmp_path, jpeg_folder):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.file(files=[str(broken)])
        return fn.decoders.image(jpegs)

    with pytest.raises(Exception, match="broken.jpg"):
        pipe().run()


def test_run_module_runs_an_unmodified_dali_script(tmp_path, jpeg_folder):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from nvidia.dali import pipeline_def, fn, types
        from nvidia.dali.plugin.pytorch import DALIClassificationIterator
        import fastload.compat.dali

        @pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def pipe():
            jpegs, labels = fn.readers.file(file_root={str(jpeg_folder)!r}, name="Reader")
            images = fn.decoders.image(jpegs)
            return fn.resize(images, resize_x=8, resize_y=8), labels

        assert fn.__name__ == "fastload.compat.dali.fn", fn.__name__
        it = DALIClassificationIterator(pipe(), reader_name="Reader")
        print(sys.argv[1:], sum(len(b[0]["label"]) for b in it))
    """))
    done = subprocess.run([sys.executable, "-m", "fastload.compat.run", str(script), "x", "--y"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['x', '--y'] 6"


def test_classification_graph_matches_dali_values(jpeg_folder):
    """DALI's validation chain (decode, resize_shorter, crop_mirror_normalize with mirror both ways, CHW and
    HWC, float and float16) on the same files: same shapes, dtypes and layouts; values within 1.5 levels of
    the 0-255 scale (resampling rounding), mean error under 0.2 levels."""
    def define(lib):
        @lib.pipeline_def(batch_size=6, num_threads=1, device_id=None, seed=3)
        def pipe():
            jpegs, labels = lib.fn.readers.file(file_root=str(jpeg_folder))
            images = lib.fn.decoders.image(jpegs, output_type=lib.types.RGB)
            images = lib.fn.resize(images, resize_shorter=40, interp_type=lib.types.INTERP_LINEAR)
            mean, std = [0.485 * 255, 0.456 * 255, 0.406 * 255], [0.229 * 255, 0.224 * 255, 0.225 * 255]
            chw = lib.fn.crop_mirror_normalize(images, crop=(32, 32), mean=mean, std=std, mirror=0,
                                               dtype=lib.types.FLOAT, output_layout="CHW")
            hwc = lib.fn.crop_mirror_normalize(images, crop=(24, 30), crop_pos_x=0.2, mean=mean, std=std,
                                               mirror=1, dtype=lib.types.FLOAT16, output_layout="HWC")
            flipped = lib.fn.flip(lib.fn.crop(images, crop=(20, 20)), horizontal=1, vertical=1)
            return chw, hwc, flipped, labels
        return pipe()

    theirs, mine = define(dali), define(ours)
    theirs.build()
    for t_out, m_out in zip(theirs.run(), mine.run()):
        assert m_out.layout() == t_out.layout() and m_out.dtype.name == t_out.dtype.name
        t, m = t_out.as_array().astype(np.float64), m_out.as_array().astype(np.float64)
        assert t.shape == m.shape
        scale = 0.229 * 255 if t_out.dtype.name in ("FLOAT", "FLOAT16") else 1.0  # back to levels
        diff = np.abs(t - m) * scale
        assert diff.max() <= 1.5 and diff.mean() < 0.2, (t_out.layout(), diff.max(), diff.mean())
