"""fastload.compat.dali.boxes against real DALI 2.4's CPU operators.

fn.coord_flip and fn.bbox_rotate give DALI's values exactly (tolerance 0; bbox_rotate's float32 steps
included). Inputs are small, random and of awkward sizes.
"""

from __future__ import annotations

import numpy as np

import fastload.compat.dali as ours

from conftest import import_dali

rng = np.random.default_rng(47)


def run(mod, inputs, graph, seed=1, layouts=None):
    """Every output of ``graph(mod, *nodes)`` with one external source per batch in ``inputs``, per sample."""
    batch = len(inputs[0])

    @mod.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=seed)
    def pipe():
        nodes = [mod.fn.external_source(source=(lambda values: (lambda: values))(values), batch=True,
                                        layout=(layouts[k] if layouts else None))
                 for k, values in enumerate(inputs)]
        out = graph(mod, *nodes)
        return tuple(out) if isinstance(out, list) else out
    p = pipe()
    p.build()
    outs = p.run()
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return [[np.array(out.at(i)) for i in range(batch)] for out in outs]


def assert_same(inputs, graph, layouts=None, exact=True):
    dali = import_dali()
    theirs, mine = run(dali, inputs, graph, layouts=layouts), run(ours, inputs, graph, layouts=layouts)
    assert len(theirs) == len(mine)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, i, a.dtype, b.dtype, a.shape, b.shape)
            if exact:
                assert np.array_equal(a, b), f"output {k} sample {i}:\n{a}\n{b}"
    return theirs, mine


def _boxes(n: int, ltrb: bool = True) -> np.ndarray:
    lo = rng.uniform(0, 0.7, size=(n, 2))
    extent = rng.uniform(0.02, 0.3, size=(n, 2))
    return np.concatenate([lo, lo + extent if ltrb else extent], 1).astype(np.float32)


# ------------------------------------------------------------------------------------------ coord_flip

def test_coord_flip_matches_dali():
    points = [rng.uniform(-0.2, 1.2, size=s).astype(np.float32) for s in [(7, 2), (1, 2), (13, 2)]]
    points3 = [rng.uniform(0, 1, size=s).astype(np.float32) for s in [(5, 3), (9, 3), (0, 3)]]
    centre = [np.array(v, np.float32) for v in (0.25, 0.5, 0.8123)]
    flip = [np.array(v, np.int32) for v in (0, 1, 1)]
    assert_same([points, centre, flip], lambda mod, x, c, f: (
        mod.fn.coord_flip(x),
        mod.fn.coord_flip(x, flip_x=0, flip_y=1, center_y=0.37),
        mod.fn.coord_flip(x, layout="yx", flip_x=1, flip_y=1, center_x=c),
        mod.fn.coord_flip(x, flip_y=f, center_x=0.1)))
    assert_same([points3], lambda mod, x: (
        mod.fn.coord_flip(x, flip_z=1, center_z=0.3), mod.fn.coord_flip(x, layout="zxy", flip_y=1, flip_x=0)))


# ----------------------------------------------------------------------------------------- bbox_rotate

def test_bbox_rotate_matches_dali():
    boxes = [_boxes(n) for n in (5, 1, 9)]
    labels = [rng.integers(0, 9, size=(len(b),), dtype=np.int32) for b in boxes]
    angles = [np.array(v, np.float32) for v in (17.5, -93.0, 181.25)]
    shapes = [np.array(v, np.int64) for v in ([31, 40, 3], [13, 17, 3], [24, 9, 3])]
    assert_same([boxes, labels, angles, shapes], lambda mod, b, lab, a, s: (
        *mod.fn.bbox_rotate(b, lab, angle=a, input_shape=s),
        *mod.fn.bbox_rotate(b, lab, angle=a, input_shape=s, keep_size=True, remove_threshold=0.4),
        *mod.fn.bbox_rotate(b, lab, angle=a, input_shape=s, mode="fixed"),
        mod.fn.bbox_rotate(b, angle=a, input_shape=s, mode="halfway", size=[33.7, 21.0]),
        mod.fn.bbox_rotate(b, angle=30.0, input_shape=[24, 37])))


def test_bbox_rotate_layouts_matches_dali():
    wh = [_boxes(n, ltrb=False) for n in (4, 6, 2)]
    pixels = [b * np.float32(40) for b in wh]
    labels = [rng.integers(0, 9, size=(len(b), 1), dtype=np.int32) for b in wh]
    assert_same([wh, pixels, labels], lambda mod, b, p, lab: (
        *mod.fn.bbox_rotate(b, lab, angle=63.0, input_shape=[3, 40, 31], shape_layout="CWH", bbox_layout="xyWH",
                            keep_size=True),
        mod.fn.bbox_rotate(p, angle=-41.0, input_shape=[45, 40], bbox_normalized=False, mode="fixed"),
        mod.fn.bbox_rotate(p, angle=120.0, input_shape=[45, 40], bbox_normalized=False, bbox_layout="xyWH")))
