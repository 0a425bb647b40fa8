"""fn.transforms (issue 39 item 3, geometry chain): translation, scale, rotation, shear and combine give
DALI's 2x3 float32 matrices -- same shape, dtype and values within float32 rounding -- for constant and
per-sample (DataNode) arguments, about a ``center``, chained onto an input ``T`` in both orders. The
rest of fn.transforms is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

dali = pytest.importorskip("nvidia.dali")

BATCH = 5
rng = np.random.default_rng(39)
ANGLES = [rng.uniform(-180, 180, size=()).astype(np.float32) for _ in range(BATCH)]
OFFSETS = [rng.uniform(-50, 50, size=2).astype(np.float32) for _ in range(BATCH)]


def graph(mod):
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


def run(mod):
    @mod.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=1)
    def pipe():
        return graph(mod)
    p = pipe()
    p.build()
    return [[np.array(out.at(i)) for i in range(BATCH)] for out in p.run()]


def test_transforms_match_dali():
    theirs, mine = run(dali), run(ours)
    assert len(theirs) == len(mine)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine)):
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert a.shape == b.shape == (2, 3), (k, i, a.shape, b.shape)
            assert a.dtype == b.dtype == np.float32, (k, i)
            # float32 outputs: DALI composes in float32/float64 internally; allow a few ulps of the magnitude
            np.testing.assert_allclose(b, a, rtol=0, atol=4 * np.finfo(np.float32).eps * max(1.0, np.abs(a).max()),
                                       err_msg=f"output {k} sample {i}")


def test_other_transforms_are_refused_by_name():
    with pytest.raises(NotImplementedError, match="fn.transforms.crop"):
        ours.fn.transforms.crop
    with pytest.raises(NotImplementedError, match="does not support argument"):
        ours.fn.transforms.rotation(angle=1.0, axis=[0, 0, 1])
