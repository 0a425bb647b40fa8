"""fastload.compat.dali.remap against real DALI 2.4's CPU operators.

fn.grid_mask (default, tile and ratio, rotated, shifted, per-sample arguments; uint8, int16, int32 and
float32): the same values as DALI, exactly (tolerance 0). The operators DALI 2.4 runs on the GPU only are
checked to be GPU-only in its registry and refused by name here. Inputs are small, random and of awkward sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours
from fastload.compat.dali import remap

from conftest import assert_same_as_dali, import_dali

rng = np.random.default_rng(77)
IMAGES = [rng.integers(1, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 1)]]


def assert_same(graph, images=IMAGES, layout="HWC", atol=0.0):
    assert_same_as_dali(graph, images, layout, atol)


def test_grid_mask_matches_dali():
    angles = [np.array(v, dtype=np.float32) for v in (0.3, -2.0, 1.1)]
    tiles = [np.array(v, dtype=np.int32) for v in (5, 8, 11)]

    def graph(mod, x):
        fn = mod.fn
        angle = fn.external_source(source=lambda: angles, batch=True)
        tile = fn.external_source(source=lambda: tiles, batch=True)
        return (fn.grid_mask(x), fn.grid_mask(x, tile=7, ratio=0.3), fn.grid_mask(x, tile=10, ratio=0.6, angle=0.7),
                fn.grid_mask(x, tile=9, angle=2.5, shift_x=3.3, shift_y=-4.1, ratio=0.45),
                fn.grid_mask(x, tile=tile, angle=angle, shift_x=100.5))
    assert_same(graph)
    for images in ([(im.astype(np.int16) - 128) * 3 for im in IMAGES], [im.astype(np.int32) * 999 for im in IMAGES],
                   [im.astype(np.float32) / 9 for im in IMAGES]):
        assert_same(lambda mod, x: mod.fn.grid_mask(x, tile=6, angle=0.4, shift_y=2.5), images)


def test_gpu_only_operators_are_dalis_and_refused_by_name():
    from nvidia.dali import backend
    import_dali()
    cpu, gpu = set(backend.RegisteredCPUOps()), set(backend.RegisteredGPUOps())
    for fn_name, ops_name in remap.GPU_ONLY.items():
        schema = ops_name.replace(".", "__")
        assert schema in gpu and schema not in cpu, schema
        module = ours.fn
        for part in fn_name.split(".")[:-1]:
            module = getattr(module, part)
        with pytest.raises(NotImplementedError, match=f"fn.{fn_name} is not supported \\(GPU-only in DALI 2.4"):
            getattr(module, fn_name.rpartition(".")[2])


def test_grid_mask_refusals_name_the_operator_and_argument():
    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        x = ours.fn.external_source(source=lambda: IMAGES[:1], batch=True, layout="HWC")
        return ours.fn.grid_mask(x, holes=3)
    with pytest.raises(NotImplementedError, match="fn.grid_mask does not support argument.*holes"):
        pipe()

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def on_gpu():
        x = ours.fn.external_source(source=lambda: IMAGES[:1], batch=True, layout="HWC")
        return ours.fn.grid_mask(x.gpu())
    with pytest.raises(NotImplementedError, match="fn.grid_mask on the GPU is not supported"):
        on_gpu()


def _homography() -> np.ndarray:
    m = np.eye(3) + rng.normal(0, 0.1, (3, 3))
    m[:2, 2] = rng.normal(0, 3, 2)
    m[2, :2] = rng.normal(0, 0.004, 2)
    return m.astype(np.float32)


MATRICES = [_homography() for _ in IMAGES]
# one channel count per batch (DALI reads it from the first sample); widths below, at and past the
# 16 columns of OpenCV's vector loop
COLOUR = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (21, 40, 3)]]
GRAY = [im[..., :1].copy() for im in COLOUR]


def _warp(mod, x, interp, **kw):
    matrix = mod.fn.external_source(source=lambda: MATRICES, batch=True)
    return mod.fn.experimental.warp_perspective(x, matrix, interp_type=getattr(mod.types, interp), **kw)


@pytest.mark.parametrize("interp", ["INTERP_LINEAR", "INTERP_NN"])
def test_warp_perspective_matches_dali(interp):
    def graph(mod, x):
        return (_warp(mod, x, interp), _warp(mod, x, interp, pixel_origin="center"),
                _warp(mod, x, interp, inverse_map=False, fill_value=[7.5, 200, 3]),
                _warp(mod, x, interp, border_mode="replicate", size=[20, 33]),
                _warp(mod, x, interp, border_mode="reflect"), _warp(mod, x, interp, border_mode="reflect_101"),
                _warp(mod, x, interp, border_mode="wrap"))
    assert_same(graph, COLOUR)


@pytest.mark.parametrize("interp", ["INTERP_LINEAR", "INTERP_NN"])
def test_warp_perspective_of_other_types_matches_dali(interp):
    def graph(mod, x):
        return _warp(mod, x, interp, fill_value=[1.25]), _warp(mod, x, interp, border_mode="reflect")
    assert_same(graph, [im.astype(np.float32) / 3 for im in COLOUR])
    assert_same(graph, [im.astype(np.uint16) * 250 + 7 for im in GRAY])
    assert_same(graph, [(im.astype(np.int16) - 128) * 200 for im in COLOUR])


def test_warp_perspective_matrix_argument_and_gray_match_dali():
    constant = [1.1, 0.2, -3.0, -0.1, 0.9, 2.5, 0.001, -0.002, 1.0]
    assert_same(lambda mod, x: (mod.fn.experimental.warp_perspective(x, matrix=constant),
                                mod.fn.experimental.warp_perspective(x, matrix=constant, size=[9, 31])), GRAY)
    plain = [im[..., 0].copy() for im in GRAY]
    assert_same(lambda mod, x: mod.fn.experimental.warp_perspective(x, matrix=constant, border_mode="wrap"),
                plain, layout="HW")


def test_warp_perspective_refusals_name_themselves():
    def pipe(graph):
        @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def definition():
            return graph(ours.fn.external_source(source=lambda: COLOUR[:1], batch=True, layout="HWC"))
        return definition()
    name = "fn.experimental.warp_perspective"
    with pytest.raises(NotImplementedError, match=f"{name}: interp_type .* is not supported"):
        pipe(lambda x: ours.fn.experimental.warp_perspective(x, matrix=np.eye(3),
                                                             interp_type=ours.types.INTERP_CUBIC))
    with pytest.raises(NotImplementedError, match=f"{name} on the GPU is not supported"):
        pipe(lambda x: ours.fn.experimental.warp_perspective(x.gpu(), matrix=np.eye(3)))
    with pytest.raises(ValueError, match=f"{name}: matrix must have 9 elements"):
        pipe(lambda x: ours.fn.experimental.warp_perspective(x, matrix=[1, 0, 0, 0, 1, 0]))


def test_the_other_gpu_only_operators_are_dalis_and_refused_with_the_reason():
    from nvidia.dali import backend
    import_dali()
    from fastload.compat.dali import gpu_only
    cpu, gpu = set(backend.RegisteredCPUOps()), set(backend.RegisteredGPUOps())
    for fn_name, ops_name in gpu_only.GPU_ONLY.items():
        schema = ops_name.replace(".", "__")
        assert schema in gpu and schema not in cpu, schema
        for api, dotted in (("fn", fn_name), ("ops", ops_name)):
            module = getattr(ours, api)
            for part in dotted.split(".")[:-1]:
                module = getattr(module, part)
            with pytest.raises(NotImplementedError, match=f"{api}.{dotted} is not supported \\(GPU-only"):
                getattr(module, dotted.rpartition(".")[2])
