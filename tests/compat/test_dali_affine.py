"""fastload.compat.dali.affine against real DALI's CPU operators (the geometry chain).

fn.transforms: translation, scale, rotation, shear and combine give DALI's 2x3 float32 matrices -- same
shape, dtype and values (equal to the bit; the test allows 1 ulp of the largest entry) -- for constant and
per-sample (DataNode) arguments, about a ``center``, chained onto an input ``T`` in both orders;
fn.transforms.crop likewise, in 1-D, 2-D and 3-D; 1-D and 3-D translation, scale, rotation (about a
per-sample axis) and shear likewise (nd_graph); any other name or argument is refused.
fn.coord_transform: points of awkward counts and 2-D/3-D through M (a
matrix, a scalar, a per-sample DataNode) and T, or MT (a fn.transforms output): same shape, dtype and
float32 values (within 2 ulps of the largest output)."""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali


TRANSFORMS_BATCH = 5
rng = np.random.default_rng(39)
ANGLES = [rng.uniform(-180, 180, size=()).astype(np.float32) for _ in range(TRANSFORMS_BATCH)]
OFFSETS = [rng.uniform(-50, 50, size=2).astype(np.float32) for _ in range(TRANSFORMS_BATCH)]

POINTS_BATCH = 4
rng = np.random.default_rng(3)
POINTS2 = [rng.uniform(-100, 100, size=(n, 2)).astype(np.float32) for n in (1, 7, 13, 0)]
POINTS3 = [rng.uniform(-10, 10, size=(n, 3)).astype(np.float32) for n in (5, 2, 11, 3)]
MS = [rng.uniform(-2, 2, size=(2, 2)).astype(np.float32) for _ in range(POINTS_BATCH)]
POINT_ANGLES = [np.float32(a) for a in rng.uniform(-90, 90, size=POINTS_BATCH)]


def transforms_graph(mod):
    fn = mod.fn
    angle = fn.external_source(source=lambda: ANGLES, batch=True)
    offset = fn.external_source(source=lambda: OFFSETS, batch=True)
    t = fn.transforms.translation(offset=offset)
    s = fn.transforms.scale(scale=[1.5, 0.25], center=[7.0, -3.5])
    r = fn.transforms.rotation(angle=angle, center=[13.0, 29.0])
    sh = fn.transforms.shear(shear=[0.3, -0.2], center=[2.0, 1.0])
    sha = fn.transforms.shear(angles=[10.0, -25.0])
    chained = fn.transforms.rotation(t, angle=33.0)
    chained_rev = fn.transforms.scale(r, scale=[2.0, 3.0], reverse_order=True)
    comb = fn.transforms.combine(t, s, r)
    comb_rev = fn.transforms.combine(t, sh, r, reverse_order=True)
    const = fn.transforms.translation(offset=[3.0, -4.0])
    uniform = fn.transforms.scale(scale=[0.5, 0.5])
    return t, s, r, sh, sha, chained, chained_rev, comb, comb_rev, const, uniform


def coord_graph(mod):
    fn = mod.fn
    p2 = fn.external_source(source=lambda: POINTS2, batch=True)
    p3 = fn.external_source(source=lambda: POINTS3, batch=True)
    m = fn.external_source(source=lambda: MS, batch=True)
    angle = fn.external_source(source=lambda: POINT_ANGLES, batch=True)
    rot = fn.transforms.rotation(angle=angle, center=[5.0, -2.0])
    return (fn.coord_transform(p2, MT=rot),
            fn.coord_transform(p2, M=m, T=[1.5, -7.25]),
            fn.coord_transform(p2, M=2.5, T=3.0),
            fn.coord_transform(p3, M=[1, 2, 3, 4, 5, 6, 7, 8, 9], T=[0.5, 0.25, -1]),
            fn.coord_transform(p3, M=[1, 0, 2, 0, 1, 1], T=[4, 5]),  # 3-D to 2-D
            fn.coord_transform(p2))


def run(mod, graph, batch: int) -> list[list[np.ndarray]]:
    """Every output of ``graph`` built with ``mod`` (real DALI or fastload's), per sample, as arrays."""
    @mod.pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=1)
    def pipe():
        return graph(mod)
    p = pipe()
    p.build()
    return [[np.array(out.at(i)) for i in range(batch)] for out in p.run()]


def assert_matches_dali(graph, batch: int, ulps: int, shape=None) -> None:
    """fastload's outputs have DALI's shapes (``shape`` when given), float32, and DALI's values within
    ``ulps`` float32 ulps of each output's largest magnitude (at least 1)."""
    dali = import_dali()
    theirs, mine = run(dali, graph, batch), run(ours, graph, batch)
    assert len(theirs) == len(mine)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.shape == b.shape and (shape is None or a.shape == shape), (k, i, a.shape, b.shape)
            assert a.dtype == b.dtype == np.float32, (k, i, b.dtype)
            scale = max(1.0, float(np.abs(a).max())) if a.size else 1.0
            np.testing.assert_allclose(b, a, rtol=0, atol=ulps * np.finfo(np.float32).eps * scale,
                                       err_msg=f"output {k} sample {i}")


def test_transforms_match_dali():
    # measured equal to the bit (float32 angles, cosf/sinf and products as DALI computes them); 1 ulp of
    # slack for a C library whose cosf/sinf round otherwise
    assert_matches_dali(transforms_graph, TRANSFORMS_BATCH, ulps=1, shape=(2, 3))


CROP_STARTS = [rng.uniform(-1, 1, size=2).astype(np.float32) for _ in range(TRANSFORMS_BATCH)]


def crop_graph(mod):
    fn = mod.fn
    start = fn.external_source(source=lambda: CROP_STARTS[:TRANSFORMS_BATCH], batch=True)
    t = fn.transforms.translation(offset=[3.0, -4.0])
    return (fn.transforms.crop(from_start=[0.9, 0.2], from_end=[0.1, 0.8], to_start=[10, 20], to_end=[0, 5]),
            fn.transforms.crop(from_start=[0.9, 0.2], from_end=[0.1, 0.8], to_start=[10, 20], to_end=[0, 5],
                               absolute=True),
            fn.transforms.crop(from_start=start, to_start=[-3.0, 7.5], to_end=[17.0, 2.25]),  # per sample
            fn.transforms.crop(t, to_end=[640.0, 480.0]),
            fn.transforms.crop(t, from_start=[0.25, 0.5], to_end=[64.0, 48.0], reverse_order=True))


def crop_nd_graph(mod):
    fn = mod.fn
    return (fn.transforms.crop(from_start=0.1, from_end=0.9, to_start=2.0, to_end=5.0),  # 1-D
            fn.transforms.crop(to_start=[3.0, 1, 2], to_end=[4.0, 5, 6]))  # 3-D


def test_transforms_crop_matches_dali():
    # DALI computes the scale and offset in float32, as done here: measured equal to the bit
    assert_matches_dali(crop_graph, TRANSFORMS_BATCH, ulps=1, shape=(2, 3))
    assert_matches_dali(crop_nd_graph, 1, ulps=1)


AXES = [rng.uniform(-1, 1, size=3).astype(np.float32) for _ in range(TRANSFORMS_BATCH)]


def nd_graph(mod):
    fn = mod.fn
    angle = fn.external_source(source=lambda: ANGLES, batch=True)
    axis = fn.external_source(source=lambda: AXES, batch=True)
    t3 = fn.transforms.translation(offset=[1.0, 2.0, 3.0])
    return (fn.transforms.translation(offset=3.0),  # 1-D, as DALI infers it
            fn.transforms.scale(scale=2.0, ndim=2),
            fn.transforms.scale(scale=[1.0, 2.0, 3.0], center=[1.0, 1.0, 1.0]),
            fn.transforms.rotation(angle=angle, axis=axis, center=[1.0, 2.0, 3.0]),  # per-sample axis
            fn.transforms.rotation(t3, angle=30.0, axis=[0.0, 1.0, 0.0]),
            fn.transforms.shear(shear=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),
            fn.transforms.shear(t3, angles=[10.0, 20, 30, 40, 5, 6], center=[1.0, 0, 2], reverse_order=True),
            fn.transforms.scale(t3, scale=0.5),  # a scalar takes the input's dimensionality
            fn.transforms.combine(t3, fn.transforms.rotation(angle=angle, axis=[0.0, 0.0, 1.0])))


def test_nd_transforms_match_dali():
    # equal to the bit on an AMD EPYC, a shear's angles included (glibc's tanf, which DALI calls); on an Intel
    # Xeon one entry of a 3-D rotation's translation column (center - R center) came 1 ulp away from DALI's
    # compiled arithmetic, for the same inputs: 1 ulp of slack, as the 2-D tests allow
    assert_matches_dali(nd_graph, TRANSFORMS_BATCH, ulps=1)


def test_other_transforms_are_refused_by_name():
    with pytest.raises(NotImplementedError, match="fn.transforms.perspective"):
        ours.fn.transforms.perspective
    with pytest.raises(NotImplementedError, match="does not support argument"):
        ours.fn.transforms.rotation(angle=1.0, axis=[0, 0, 1], degrees=True)


def test_coord_transform_matches_dali():
    assert_matches_dali(coord_graph, POINTS_BATCH, ulps=2)


def test_coord_transform_refuses_dtype():
    with pytest.raises(NotImplementedError, match="dtype"):
        ours.fn.coord_transform(ours.fn.external_source(source=lambda: POINTS2, batch=True), dtype=ours.types.INT32)
