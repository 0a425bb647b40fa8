"""fn.coord_transform (issue 39 item 3): points of awkward counts and 2-D/3-D through M (a matrix, a
scalar, a per-sample DataNode) and T, or MT (a fn.transforms output), against real DALI's CPU operator: same
shape, dtype and float32 values (within 2 ulps of the largest output)."""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

dali = pytest.importorskip("nvidia.dali")

BATCH = 4
rng = np.random.default_rng(3)
POINTS2 = [rng.uniform(-100, 100, size=(n, 2)).astype(np.float32) for n in (1, 7, 13, 0)]
POINTS3 = [rng.uniform(-10, 10, size=(n, 3)).astype(np.float32) for n in (5, 2, 11, 3)]
MS = [rng.uniform(-2, 2, size=(2, 2)).astype(np.float32) for _ in range(BATCH)]
ANGLES = [np.float32(a) for a in rng.uniform(-90, 90, size=BATCH)]


def graph(mod):
    fn = mod.fn
    p2 = fn.external_source(source=lambda: POINTS2, batch=True)
    p3 = fn.external_source(source=lambda: POINTS3, batch=True)
    m = fn.external_source(source=lambda: MS, batch=True)
    angle = fn.external_source(source=lambda: ANGLES, batch=True)
    rot = fn.transforms.rotation(angle=angle, center=[5.0, -2.0])
    return (fn.coord_transform(p2, MT=rot),
            fn.coord_transform(p2, M=m, T=[1.5, -7.25]),
            fn.coord_transform(p2, M=2.5, T=3.0),
            fn.coord_transform(p3, M=[1, 2, 3, 4, 5, 6, 7, 8, 9], T=[0.5, 0.25, -1]),
            fn.coord_transform(p3, M=[1, 0, 2, 0, 1, 1], T=[4, 5]),  # 3-D to 2-D
            fn.coord_transform(p2))


def run(mod):
    @mod.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=1)
    def pipe():
        return graph(mod)
    p = pipe()
    p.build()
    return [[np.array(out.at(i)) for i in range(BATCH)] for out in p.run()]


def test_coord_transform_matches_dali():
    theirs, mine = run(dali), run(ours)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.shape == b.shape and a.dtype == b.dtype == np.float32, (k, i, a.shape, b.shape, b.dtype)
            scale = max(1.0, float(np.abs(a).max())) if a.size else 1.0
            np.testing.assert_allclose(b, a, rtol=0, atol=2 * np.finfo(np.float32).eps * scale,
                                       err_msg=f"output {k} sample {i}")


def test_coord_transform_refuses_dtype():
    with pytest.raises(NotImplementedError, match="dtype"):
        ours.fn.coord_transform(ours.fn.external_source(source=lambda: POINTS2, batch=True), dtype=ours.types.INT32)
