"""fastload.compat.dali.reductions against real DALI 2.4's CPU operators.

fn.reductions.{min, max, sum, mean, mean_square, rms, std_dev, variance} over every integer input type and
float32: full, axes, negative axes, axis_names, keep_dims and axes=[]; sum's, mean's, mean_square's and rms's
dtype (wrapping in a narrow type); std_dev/variance with a mean of either shape and ddof. Hints that DALI's
schema for the operator lacks are refused as DALI refuses them (KeyError). Output types, shapes
and layouts are DALI's exactly; integer values are exact (tolerance 0), float32 values within rtol 1e-5 (DALI
sums pairwise in float32, fastload in float64); a uint16 square wraps in int as DALI's. Inputs are random, of
awkward sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali, run_dali_graph

rng = np.random.default_rng(2024)
SHAPES = [(13, 17, 3), (24, 9, 3), (5, 31, 3)]


def _images(dtype, low=0, high=256):
    return [rng.integers(low, high, size=s).astype(dtype) for s in SHAPES]


def assert_same(graph, images, layout="HWC", rtol=2e-6):
    dali = import_dali()
    theirs = run_dali_graph(dali, images, graph, layout)
    mine = run_dali_graph(ours, images, graph, layout)
    assert len(theirs) == len(mine)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, i, a.dtype, b.dtype, a.shape, b.shape)
            if a.dtype.kind == "f":
                np.testing.assert_allclose(b, a, rtol=rtol, atol=0, err_msg=f"output {k} sample {i}")
            else:
                np.testing.assert_array_equal(b, a, err_msg=f"output {k} sample {i}")


def _all(fn, x, **kw):
    r = fn.reductions
    m = r.mean(x, **kw)
    return (r.min(x, **kw), r.max(x, **kw), r.sum(x, **kw), m, r.mean_square(x, **kw), r.rms(x, **kw),
            r.std_dev(x, m, **kw), r.variance(x, m, **kw))


@pytest.mark.parametrize("dtype,low,high", [(np.uint8, 0, 256), (np.int8, -128, 128), (np.uint16, 0, 65536),
                                            (np.int16, -32768, 32768), (np.uint32, 0, 1 << 20),
                                            (np.int32, -(1 << 20), 1 << 20), (np.int64, -(1 << 20), 1 << 20),
                                            (np.uint64, 0, 1 << 20), (np.float32, -50, 50)])
def test_every_reduction_and_type_matches_dali(dtype, low, high):
    images = _images(dtype, low, high)
    if dtype == np.float32:
        images = [im + rng.random(im.shape, dtype=np.float32) for im in images]
    assert_same(lambda mod, x: (*_all(mod.fn, x), *_all(mod.fn, x, axes=[0, 1])), images, rtol=1e-5)


def test_axes_names_and_kept_dims_match_dali():
    def graph(mod, x):
        r = mod.fn.reductions
        return (r.sum(x, axes=-1), r.max(x, axis_names="W", keep_dims=True), r.min(x, axis_names="HC"),
                r.mean(x, axes=[2, 0], keep_dims=True), r.sum(x, axes=[]), r.mean(x, axes=[]),
                r.rms(x, axes=1), r.sum(x, keep_dims=True), r.mean_square(x, axis_names="CH"))
    assert_same(graph, _images(np.uint8))
    dali = import_dali()
    for mod in (dali, ours):  # the layouts too: reduced letters dropped, or all kept
        @mod.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def pipe():
            x = mod.fn.external_source(source=lambda: _images(np.uint8)[:1], batch=True, layout="HWC")
            r = mod.fn.reductions
            return r.sum(x, axes=[0, 1]), r.sum(x, axes=[0, 1], keep_dims=True), r.max(x, axis_names="W")
        p = pipe()
        p.build()
        assert [out.layout() for out in p.run()] == ["C", "HWC", "HC"], mod


def test_sum_and_mean_types_match_dali():
    """dtype: the input's type wraps (a uint8 sum modulo 256; an integer mean is that sum over n,
    truncated toward zero), the widest type or float32."""

    def graph(mod, x, kinds):
        r, types = mod.fn.reductions, mod.types
        outs = []
        for kind in kinds:
            outs += [r.sum(x, dtype=getattr(types, kind)), r.sum(x, axes=1, dtype=getattr(types, kind))]
        own = kinds[0]
        outs += [r.mean(x, dtype=getattr(types, own)), r.mean(x, axes=[0, 2], dtype=getattr(types, own)),
                 r.mean(x, dtype=types.FLOAT)]
        return tuple(outs)
    assert_same(lambda mod, x: graph(mod, x, ["UINT8", "UINT64", "FLOAT"]), _images(np.uint8))
    assert_same(lambda mod, x: graph(mod, x, ["INT8", "INT64", "FLOAT"]), _images(np.int8, -128, 128))
    assert_same(lambda mod, x: graph(mod, x, ["INT32", "INT64", "FLOAT"]), _images(np.int32, -9999, 9999))
    small = [np.array([[1, 2], [2, 2]], np.int8), np.array([[-1, -2], [-2, -2]], np.int8),
             np.array([[-3, -3, -4]], np.int8)]
    assert_same(lambda mod, x: (mod.fn.reductions.mean(x, dtype=mod.types.INT8),
                                mod.fn.reductions.mean(x, axes=1, dtype=mod.types.INT8)), small, layout="HW")


@pytest.mark.parametrize("dtype,wide,low,high", [(np.uint8, "UINT64", 0, 256), (np.int8, "INT64", -128, 128),
                                                 (np.uint16, "UINT64", 0, 65536), (np.int32, "INT64", -9999, 9999)])
def test_mean_square_and_rms_types_match_dali(dtype, wide, low, high):
    """mean_square's dtype: its kind's widest type or float32; rms's: the input's type (the squares wrap in
    it, the root truncated) or float32."""
    own = {np.uint8: "UINT8", np.int8: "INT8", np.uint16: "UINT16", np.int32: "INT32"}[dtype]

    def graph(mod, x):
        r, types = mod.fn.reductions, mod.types
        return (r.mean_square(x, dtype=getattr(types, wide)), r.mean_square(x, axes=1, dtype=types.FLOAT),
                r.mean_square(x, axes=[], dtype=getattr(types, wide)), r.rms(x, dtype=getattr(types, own)),
                r.rms(x, axes=[0, 2], keep_dims=True, dtype=getattr(types, own)), r.rms(x, axes=1, dtype=types.FLOAT))
    assert_same(graph, _images(dtype, low, high), rtol=1e-5)


def test_hints_of_other_schemas_are_refused_as_dali_refuses_them():
    """DALI accepts a decoder's or reader's hint only on operators whose schema has it (KeyError elsewhere)."""
    dali = import_dali()
    for mod in (dali, ours):
        for graph in (lambda fn, x: fn.reductions.sum(x, hw_decoder_load=.5),
                      lambda fn, x: fn.reductions.rms(x, jpeg_fancy_upsampling=True),
                      lambda fn, x: fn.random.normal(x, lazy_init=True), lambda fn, x: fn.one_hot(x, affine=False)):
            with pytest.raises(KeyError, match="is not defined for operator"):
                run_dali_graph(mod, _images(np.uint8), lambda m, x: graph(m.fn, x), "HWC")
        out = run_dali_graph(mod, _images(np.uint8), lambda m, x: m.fn.reductions.sum(x, bytes_per_sample_hint=64,
                                                                                        preserve=True), "HWC")
        assert out[0][0].dtype == np.uint64


def test_std_dev_and_variance_with_kept_mean_and_ddof_match_dali():
    def graph(mod, x):
        r = mod.fn.reductions
        kept = r.mean(x, axes=[0, 1], keep_dims=True)
        dropped = r.mean(x, axis_names="W")
        return (r.std_dev(x, kept, axes=[0, 1]), r.variance(x, kept, axes=[0, 1], keep_dims=True, ddof=1),
                r.std_dev(x, dropped, axis_names="W", ddof=2), r.variance(x, dropped, axes=1, ddof=-1),
                r.variance(x, r.mean(x), ddof=3))
    assert_same(graph, _images(np.int16, -500, 500), rtol=1e-5)


def _pipe(graph, images, layout="HWC"):
    @ours.pipeline_def(batch_size=len(images), num_threads=1, device_id=None)
    def pipe():
        return graph(ours.fn.external_source(source=lambda: images, batch=True, layout=layout))
    p = pipe()
    p.build()
    return p.run()


def test_refusals_name_the_operator_and_argument():
    r = ours.fn.reductions
    with pytest.raises(ValueError, match="fn.reductions.sum: arguments axes and axis_names are mutually"):
        _pipe(lambda x: r.sum(x, axes=[0], axis_names="H"), _images(np.uint8))
    with pytest.raises(ValueError, match="fn.reductions.max: axis index out of range: 3"):
        _pipe(lambda x: r.max(x, axes=[3]), _images(np.uint8))
    with pytest.raises(ValueError, match="axis 'Q' is not in the input's layout"):
        _pipe(lambda x: r.min(x, axis_names="Q"), _images(np.uint8))
    with pytest.raises(TypeError, match="fn.reductions.mean of torch.uint8 input: dtype torch.int32"):
        _pipe(lambda x: r.mean(x, dtype=ours.types.INT32), _images(np.uint8))
    with pytest.raises(TypeError, match=r"fn.reductions.mean_square of torch.uint8 input: dtype torch.uint8 is not"):
        _pipe(lambda x: r.mean_square(x, dtype=ours.types.UINT8), _images(np.uint8))  # DALI: unsupported types
    with pytest.raises(TypeError, match="fn.reductions.min has no argument dtype"):
        _pipe(lambda x: r.min(x, dtype=ours.types.FLOAT), _images(np.uint8))
    with pytest.raises(TypeError, match="fn.reductions.rms: unsupported input type torch.float64"):
        _pipe(lambda x: r.rms(x), _images(np.float64))
    with pytest.raises(ValueError, match="fn.reductions.std_dev: the mean input's shape"):
        _pipe(lambda x: r.std_dev(x, r.mean(x, axes=[0]), axes=[1]), _images(np.uint8))
    with pytest.raises(NotImplementedError, match="fn.reductions.variance does not support argument.*squash"):
        _pipe(lambda x: r.variance(x, r.mean(x), squash=1), _images(np.uint8))
    assert ours.ops.reductions.StdDev is not None and ours.fn.reductions.mean_square is not None
