"""fastload.compat.dali.arrays against real DALI 2.4's CPU operators: the same values, dtypes, shapes and output
layouts (``out.layout()``), exactly (tolerance 0: these operators move, pick or fill values; none computes).

Inputs are small, random and of awkward sizes, fed by an external source with a layout; each graph returns
several outputs of one operator under different arguments.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali, run_dali_graph

rng = np.random.default_rng(2024)
IMAGES = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 3)]]


def run(mod, inputs, graph, layout):
    """Every output of ``graph(mod.fn, mod.types, x)`` over ``inputs`` fed as one batch: (layout, per-sample
    arrays) per output."""
    return run_dali_graph(mod, inputs, lambda mod, x: graph(mod.fn, mod.types, x), layout, layouts=True)


def assert_same(graph, inputs=IMAGES, layout="HWC"):
    dali = import_dali()
    theirs, mine = run(dali, inputs, graph, layout), run(ours, inputs, graph, layout)
    assert len(theirs) == len(mine)
    for k, ((a_layout, a_out), (b_layout, b_out)) in enumerate(zip(theirs, mine)):
        assert a_layout == b_layout, (k, a_layout, b_layout)
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, i, a.dtype, b.dtype, a.shape, b.shape)
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f"output {k} sample {i} differs"


def assert_both_refuse(graph, inputs=IMAGES, layout="HWC", match=None):
    """DALI fails on ``graph`` and fastload too, with ValueError or TypeError (``match`` in its message)."""
    dali = import_dali()
    with pytest.raises(Exception):
        run(dali, inputs, graph, layout)
    with pytest.raises((ValueError, TypeError), match=match):
        run(ours, inputs, graph, layout)


# ------------------------------------------------------------------------------------------------- reshape

def test_reshape_matches_dali():
    def graph(fn, types, x):
        return (fn.reshape(x, shape=[-1]), fn.reshape(x, shape=[3, -1]), fn.reshape(x, shape=[-1, 3], layout="XC"),
                fn.reshape(x, rel_shape=[0.5, -1]), fn.reshape(x, rel_shape=[0.3, -1]),
                fn.reshape(x, rel_shape=[-1, 1 / 3]), fn.reshape(x, src_dims=[2, 0, 1]),
                fn.reshape(x, src_dims=[0, -1, 1, 2], layout=""), fn.reshape(x, src_dims=[1, 0], rel_shape=[3, 1]),
                fn.reshape(x, layout="ABC"), fn.reshape(x, src_dims=[0, 1], shape=[-1, 3]))
    evens = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(10, 17, 3), (20, 9, 3), (30, 12, 3)]]
    assert_same(graph, evens)


def test_reshape_with_a_shape_node_matches_dali():
    shapes = [np.array(s, dtype=np.int32) for s in ([17, 13, 3], [9, -1, 3], [3, 31, -1])]
    rels = [np.array(s, dtype=np.float32) for s in ([1, 1, 1], [0.5, -1], [0.2, 1, -1])]

    def graph(fn, types, x):
        shape = fn.external_source(source=lambda: shapes, batch=True)
        rel = fn.external_source(source=lambda: rels[:1] * 3, batch=True)
        inserted = fn.external_source(source=lambda: [np.array([3, 1, 1, -1], dtype=np.float32)] * 3, batch=True)
        return (fn.reshape(x, shape), fn.reshape(x, shape=shape, layout=""), fn.reshape(x, rel_shape=rel),
                fn.reshape(x, fn.cast(fn.shapes(x), dtype=types.INT64)),
                fn.reshape(x, src_dims=[-1, 0, 1, 2], rel_shape=[3, 1, 1, -1], layout="ABCD"),
                fn.reshape(x, src_dims=[-1, 0, 1, 2], rel_shape=inserted, layout="ABCD"))
    assert_same(graph)


def test_reshape_refuses_what_dali_refuses():
    assert_both_refuse(lambda fn, types, x: fn.reshape(x, shape=[5, -1]), match="same size in bytes")
    assert_both_refuse(lambda fn, types, x: fn.reshape(x, rel_shape=[0.5, 2]), match="same size in bytes")
    assert_both_refuse(lambda fn, types, x: fn.reshape(x, src_dims=[0, 1, 2, -1]), match="pass layout=")
    with pytest.raises(ValueError, match="only one extent"):
        ours.fn.reshape(ours.fn.external_source(source=lambda: IMAGES), shape=[-1, -1])
    with pytest.raises(ValueError, match="no-op"):
        ours.fn.reshape(ours.fn.external_source(source=lambda: IMAGES))


def test_reshape_with_a_shape_node_refuses_a_layout_it_cannot_know():
    shapes = [np.array([-1], dtype=np.int32)] * 3
    with pytest.raises(NotImplementedError, match="fn.reshape.*pass layout="):
        run(ours, IMAGES, lambda fn, types, x: fn.reshape(x, fn.external_source(source=lambda: shapes)), "HWC")


def test_reinterpret_matches_dali():
    words = [rng.integers(0, 2 ** 31, size=s, dtype=np.int32) for s in [(5, 6), (7, 2), (3, 4)]]

    def graph(fn, types, x):
        return (fn.reinterpret(x, dtype=types.UINT8), fn.reinterpret(x, dtype=types.INT16, layout="AB"),
                fn.reinterpret(x, dtype=types.FLOAT), fn.reinterpret(x, dtype=types.UINT8, shape=[-1]),
                fn.reinterpret(x, dtype=types.UINT16, shape=[2, -1], layout="XY"),
                fn.reinterpret(x, rel_shape=[-1, 0.5], dtype=types.INT64), fn.reinterpret(x, src_dims=[1, 0]))
    assert_same(graph, words, "HW")


# ----------------------------------------------------------------------------------------------- transpose

def test_transpose_matches_dali():
    def graph(fn, types, x):
        return (fn.transpose(x, perm=[2, 0, 1]), fn.transpose(x, perm=[2, 0, 1], transpose_layout=False),
                fn.transpose(x, perm=[1, 2, 0], output_layout="ABC"), fn.transpose(x),
                fn.transpose(x, perm=[0, 1, 2]))
    assert_same(graph)
    assert_same(lambda fn, types, x: (fn.transpose(x, perm=[1, 0, 2]),
                                      fn.transpose(x, perm=[2, 1, 0], output_layout="XYZ")), layout="")
    floats = [rng.normal(size=s).astype(np.float32) for s in [(2, 3, 5, 4), (3, 1, 2, 7)]]
    assert_same(lambda fn, types, x: fn.transpose(x, perm=[3, 1, 0, 2]), floats, "FHWC")
    assert_both_refuse(lambda fn, types, x: fn.transpose(x, perm=[1, 0]), layout="", match="dimensions")


# ------------------------------------------------------------------------------------------------- one_hot

def test_one_hot_matches_dali():
    scalars = [np.array(v, dtype=np.int32) for v in (3, 0, 7, -1)]
    assert_same(lambda fn, types, x: (
        fn.one_hot(x, num_classes=5), fn.one_hot(x), fn.one_hot(x, num_classes=6, axis_name="K"),
        fn.one_hot(x, num_classes=4, on_value=2.7, off_value=-1.5, dtype=types.INT32),
        fn.one_hot(x, num_classes=4, on_value=300.7, off_value=-1.5, dtype=types.UINT8),
        fn.one_hot(x, num_classes=4, on_value=0.1, dtype=types.FLOAT64),
        fn.one_hot(x, num_classes=4, on_value=-7, dtype=types.INT64)), scalars, "")
    floats = [np.array([v], dtype=np.float32) for v in (2.7, -0.5, 1.0, 9.2)]
    assert_same(lambda fn, types, x: (fn.one_hot(x, num_classes=4), fn.one_hot(x, num_classes=4, axis=0),
                                      fn.one_hot(x, num_classes=4, axis=-1, axis_name="K")), floats, "A")
    labels = [rng.integers(-1, 6, size=(2, n)).astype(np.int64) for n in (3, 5, 1, 4)]
    assert_same(lambda fn, types, x: (
        fn.one_hot(x, num_classes=5), fn.one_hot(x, num_classes=5, axis=0), fn.one_hot(x, num_classes=5, axis=1,
                                                                                       axis_name="K"),
        fn.one_hot(x, num_classes=5, axis=2, axis_name="K", dtype=types.UINT16),
        fn.one_hot(x, num_classes=3, axis=-1, axis_name="K", on_value=5, off_value=2, dtype=types.INT8)),
        labels, "AB")


def test_one_hot_refuses_what_dali_refuses():
    labels = [rng.integers(0, 5, size=(2, 3)).astype(np.int64) for _ in range(2)]
    assert_both_refuse(lambda fn, types, x: fn.one_hot(x, num_classes=5, axis=-2), labels, "AB", "axis")
    assert_both_refuse(lambda fn, types, x: fn.one_hot(x, num_classes=5, axis=3), labels, "AB", "axis")
    assert_both_refuse(lambda fn, types, x: fn.one_hot(x, num_classes=5, axis_name="K"), labels, "", "layout")
    assert_both_refuse(lambda fn, types, x: fn.one_hot(x, num_classes=5, dtype=types.BOOL), labels, "AB", "type")
    assert_both_refuse(lambda fn, types, x: fn.one_hot(x, num_classes=-2), labels, "AB",
                       "fn.one_hot: argument num_classes must not be negative, got -2")
    with pytest.raises(ValueError, match="fn.one_hot: argument num_classes 1099511627776 does not fit DALI's int32"):
        run(ours, labels, lambda fn, types, x: fn.one_hot(x, num_classes=2 ** 40), "AB")  # DALI: 0 classes


# -------------------------------------------------------------------------------------------------- shapes

def test_shapes_matches_dali():
    assert_same(lambda fn, types, x: (fn.shapes(x), fn.shapes(x, dtype=types.INT32), fn.shapes(x, dtype=types.FLOAT64),
                                      fn.shapes(x, dtype=types.UINT32), fn.shapes(fn.reshape(x, shape=[-1])[0])))
    assert_both_refuse(lambda fn, types, x: fn.shapes(x, dtype=types.UINT8), match="fn.shapes")


# ------------------------------------------------------------------------------------------ constant / copy

def test_constant_matches_dali():
    assert_same(lambda fn, types, x: (
        fn.constant(fdata=[1.5, 2.5, 3.5]), fn.constant(idata=[1, 2, 3, 4, 5, 6], shape=[2, 3], layout="AB"),
        fn.constant(fdata=2.7, dtype=types.INT32), fn.constant(idata=[300, -1, 70000], dtype=types.UINT8),
        fn.constant(idata=7), fn.constant(idata=[5], shape=[2, 3]), fn.constant(idata=[1], shape=[]),
        fn.constant(fdata=[-2.5, 2.5, 0.5, 1e10], dtype=types.INT32),
        fn.constant(fdata=[1.5, 0, -2, 0.4, 0.5], dtype=types.BOOL), fn.constant(fdata=[0.1, 7e4], dtype=types.FLOAT16),
        fn.constant(idata=[3], shape=[1, 1, 1], layout="ABC"), fn.constant(idata=[2 ** 40, -2 ** 40]),
        fn.constant(idata=[2 ** 31 + 5, -3], dtype=types.INT64), fn.constant(idata=[3, -1], dtype=types.UINT32),
        fn.constant(idata=[5, -9], dtype=types.FLOAT), fn.constant(fdata=[0.1, 1e39]), x + fn.constant(idata=2)))
    assert_both_refuse(lambda fn, types, x: fn.constant(idata=[1, 2, 3], shape=[2, 2]), match="values")
    assert_both_refuse(lambda fn, types, x: fn.constant(idata=[1, 2], layout="AB"), match="layout")
    assert_both_refuse(lambda fn, types, x: fn.constant(fdata=[0.5], dtype=types.FLOAT64), match="type")
    assert_both_refuse(lambda fn, types, x: fn.constant(idata=[1], fdata=[1.0]), match="exclusive")
    assert_both_refuse(lambda fn, types, x: fn.constant(fdata=[1.0], shape=[-1]),
                       match=r"fn.constant: argument shape has a negative extent: \[-1\]")


def test_copy_and_cast_like_match_dali():
    floats = [(rng.normal(size=s) * 200).astype(np.float32) for s in [(13, 17, 3), (24, 9, 3)]]
    assert_same(lambda fn, types, x: (
        fn.copy(x), fn.cast_like(x, fn.cast(x, dtype=types.INT8)), fn.cast_like(x, fn.cast(x, dtype=types.FLOAT16)),
        fn.cast_like(fn.cast(x, dtype=types.UINT8), x), fn.cast_like(x, fn.reshape(fn.cast(x, dtype=types.INT16),
                                                                                   layout="ABC"))), floats)


# ---------------------------------------------------------------------------------------- squeeze / expand_dims

def test_squeeze_and_expand_dims_match_dali():
    ones = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 1, 3), (1, 1, 3), (24, 1, 9)]]
    assert_same(lambda fn, types, x: (
        fn.squeeze(x, axes=[1]), fn.squeeze(x, axis_names="W"), fn.squeeze(x, axes=1), fn.squeeze(x, axes=[-2, 1]),
        fn.squeeze(x, axes=[1, 7]), fn.expand_dims(x, axes=[0]), fn.expand_dims(x, axes=[0, 4], new_axis_names="FG"),
        fn.expand_dims(x, axes=3, new_axis_names="Z"), fn.expand_dims(x, axes=[2, 0]),
        fn.expand_dims(x, axes=[4, 3], new_axis_names="AB"), fn.expand_dims(x, axes=[0, 1], new_axis_names="XY")),
        ones, "HWC")
    assert_same(lambda fn, types, x: (fn.squeeze(x, axes=[1]), fn.expand_dims(x, axes=[1, 0])), ones, "")
    scalars = [np.array(v, dtype=np.float32) for v in (1.5, -2.0)]
    assert_same(lambda fn, types, x: (fn.expand_dims(x, axes=[0, 1], new_axis_names="XY"),
                                      fn.expand_dims(x, axes=[0])), scalars, "")
    assert_both_refuse(lambda fn, types, x: fn.squeeze(x, axes=[0]), ones, "HWC", "volume")
    assert_both_refuse(lambda fn, types, x: fn.squeeze(x, axes=[1, 1]), ones, "HWC", "twice")
    assert_both_refuse(lambda fn, types, x: fn.squeeze(x, axis_names="W"), ones, "", "layout")
    assert_both_refuse(lambda fn, types, x: fn.squeeze(x), ones, "HWC", "axes")
    assert_both_refuse(lambda fn, types, x: fn.expand_dims(x, axes=[1], new_axis_names="F"), ones, "", "layout")
    assert_both_refuse(lambda fn, types, x: fn.expand_dims(x, axes=[-1]), ones, "HWC", "negative")
    assert_both_refuse(lambda fn, types, x: fn.expand_dims(x, axes=[5]), ones, "HWC", "enough dimensions")
    assert_both_refuse(lambda fn, types, x: fn.expand_dims(x, axes=[0, 1], new_axis_names="F"), ones, "HWC", "names")


# ------------------------------------------------------------------------------- zeros / ones / full (+ _like)

def test_zeros_ones_and_full_match_dali():
    columns = [(rng.normal(size=(2, 1)) * 150).astype(np.float32) for _ in range(3)]
    shapes = [np.array(s, dtype=np.int32) for s in ([2, 3], [1, 4], [2, 7])]

    def graph(fn, types, x):
        shape = fn.external_source(source=lambda: shapes, batch=True)
        return (fn.zeros(shape=[2, 3]), fn.ones(shape=[2, 3], dtype=types.UINT8), fn.zeros(shape=[2, 3], layout="AB"),
                fn.ones(), fn.ones(shape=4, dtype=types.FLOAT16), fn.zeros(shape=shape, layout="XY"),
                fn.ones(shape=shape, dtype=types.FLOAT64), fn.ones(shape=[2, 3], dtype=types.BOOL),
                fn.zeros(shape=[3], dtype=types.UINT64), fn.full(x, shape=[2, 3]), fn.full(x, shape=[3, 2, 1]),
                fn.full(x[0], shape=[2, 1]), fn.full(x, shape=[], layout=""), fn.full(x[0, 0], shape=[4], layout="A"),
                fn.full(x, shape=[3]), fn.full(x[0, 0], shape=shape), fn.zeros_like(x),
                fn.ones_like(x, dtype=types.INT8),
                fn.zeros_like(x, dtype=types.BOOL), fn.full_like(x, x * 2), fn.full_like(x, x[0]),
                fn.full_like(fn.zeros(shape=[2, 3], dtype=types.UINT8), x * 100.6 - 200),
                fn.full_like(fn.ones(shape=[4, 2, 5], dtype=types.INT16), x), fn.full(3, shape=[2]),
                fn.full(2.5, shape=[2, 1]), fn.full_like(x, 7), fn.full_like(x, 2.6), fn.cast_like(x, 2))
    assert_same(graph, columns, "AB")
    assert_both_refuse(lambda fn, types, x: fn.zeros(shape=[2, 3], layout="ABC"), columns, "AB", "layout")
    assert_both_refuse(lambda fn, types, x: fn.full(x, shape=[3, 3]), columns, "AB", "broadcast")
    assert_both_refuse(lambda fn, types, x: fn.full(x), columns, "AB", "shape=")
    assert_both_refuse(lambda fn, types, x: fn.full(x, shape=fn.shapes(x, dtype=types.INT32)), columns, "AB",
                       "layout")
    assert_both_refuse(lambda fn, types, x: fn.zeros(shape=fn.shapes(x)), columns, "AB", "int32")
    negative = [np.array(s, dtype=np.int32) for s in ([2, 3], [1, -4], [2, 7])]
    with pytest.raises(ValueError, match=r"fn.zeros: argument shape has a negative extent in a sample: \[1, -4\]"):
        # (DALI 2.4 crashes, a segmentation fault, on it)
        run(ours, columns, lambda fn, types, x: fn.zeros(shape=fn.external_source(source=lambda: negative,
                                                                                  batch=True)), "AB")


# ------------------------------------------------------------------------------- element_extract / get_property

def test_element_extract_matches_dali():
    frames = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(5, 4, 2, 3), (6, 3, 2, 3)]]
    for layout in ("FHWC", ""):
        assert_same(lambda fn, types, x: (*fn.element_extract(x, element_map=[0, 3, 3]),
                                          fn.element_extract(x, element_map=4), fn.element_extract(x, element_map=[1])),
                    frames, layout)
    signals = [rng.normal(size=n).astype(np.float32) for n in (5, 7)]
    assert_both_refuse(lambda fn, types, x: fn.element_extract(x, element_map=[1]), signals, "F", "two dimensions")
    assert_both_refuse(lambda fn, types, x: fn.element_extract(x, element_map=[1]), frames, "HWCF", "sequence")
    assert_both_refuse(lambda fn, types, x: fn.element_extract(x, element_map=[5]), frames, "FHWC", "out of bounds")
    assert_both_refuse(lambda fn, types, x: fn.element_extract(x, element_map=[-1]), frames, "FHWC", "negative")


def test_get_property_of_layouts_and_external_sources_matches_dali():
    frames = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(5, 4, 2, 3), (6, 3, 2, 3)]]
    for layout in ("FHWC", ""):
        assert_same(lambda fn, types, x: (fn.get_property(x, key="layout"), fn.get_property(x, key="source_info"),
                                          fn.get_property(fn.cast(x, dtype=types.FLOAT), key="layout"),
                                          fn.get_property(fn.transpose(x, perm=[0, 3, 1, 2]), key="layout")),
                    frames, layout)
    assert_both_refuse(lambda fn, types, x: fn.get_property(x, key="image_type"), frames, "FHWC", "image_type")


def test_get_property_source_info_of_a_file_reader_matches_dali(image_folder):
    dali = import_dali()

    def names(mod):
        @mod.pipeline_def(batch_size=5, num_threads=1, device_id=None, seed=1)
        def pipe():
            jpegs, labels = mod.fn.readers.file(file_root=str(image_folder), random_shuffle=True, seed=7)
            images = mod.fn.decoders.image(jpegs)
            return (mod.fn.get_property(jpegs, key="source_info"), mod.fn.get_property(images, key="source_info"),
                    mod.fn.get_property(mod.fn.cast(images, dtype=mod.types.FLOAT), key="source_info"),
                    mod.fn.get_property(labels, key="source_info"), mod.fn.get_property(images, key="layout"))
        p = pipe()
        p.build()
        return [[bytes(np.array(out.at(i))).decode() for i in range(5)] for out in p.run()]
    theirs, mine = names(dali), names(ours)
    assert theirs == mine and theirs[0][0].endswith(".jpg") and theirs[3] == [""] * 5, (theirs, mine)


def test_one_hot_refuses_a_batch_mixing_one_element_samples_with_longer_ones():
    mixed = [np.array(v, dtype=np.int32) for v in ([2], [1, 3, 0], [4])]
    with pytest.raises(NotImplementedError, match="fn.one_hot without axis over a batch mixing"):
        run(ours, mixed, lambda fn, types, x: fn.one_hot(x, num_classes=5), "")
    assert_same(lambda fn, types, x: fn.one_hot(x, num_classes=5, axis=-1), mixed, "")


def test_the_cpu_only_operators_refuse_the_gpu():
    x = ours.fn.external_source(source=lambda: IMAGES, device="gpu")
    with pytest.raises(ValueError, match="fn.zeros runs on the CPU only"):
        ours.fn.zeros(shape=[2], device="gpu")
    with pytest.raises(ValueError, match="fn.full_like runs on the CPU only"):
        ours.fn.full_like(x, 3)
    with pytest.raises(NotImplementedError, match="fn.squeeze: axes given per sample"):
        ours.fn.squeeze(x, axes=ours.fn.external_source(source=lambda: IMAGES))
