"""fastload.compat.dali.sequences against real DALI 2.4's CPU operators.

Fresh random inputs of awkward shapes (a new seed each run, named in failures; FASTLOAD_TEST_SEED replays
one). fn.sequence_rearrange (constant and per-sample orders, repeated and dropped frames) and fn.per_frame
(each layout rule): values, dtypes, shapes and layouts exact (tolerance 0). What DALI refuses is refused
here too, by name.
"""

from __future__ import annotations

import numpy as np
import pytest

import fastload.compat.dali as ours

from conftest import import_dali


def run(mod, inputs, graph, layouts):
    """Every output of ``graph(mod, *nodes)`` over ``inputs`` (per external source, a batch of samples), per
    sample, as arrays, and the outputs' layouts."""
    size = len(inputs[0])

    @mod.pipeline_def(batch_size=size, num_threads=1, device_id=None, seed=1)
    def pipe():
        nodes = [mod.fn.external_source(source=_feed(batch), batch=True, layout=layout)
                 for batch, layout in zip(inputs, layouts)]
        return graph(mod, *nodes)
    p = pipe()
    p.build()
    outs = p.run()
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return [[np.array(out.at(i)) for i in range(size)] for out in outs], [str(o.layout()) for o in outs]


def _feed(batch):
    return lambda: batch


def compare(graph, inputs, layouts, seed):
    dali = import_dali()
    (theirs, their_layouts), (mine, my_layouts) = run(dali, inputs, graph, layouts), run(ours, inputs, graph, layouts)
    assert their_layouts == my_layouts, (seed, their_layouts, my_layouts)
    for k, (a_out, b_out) in enumerate(zip(theirs, mine, strict=True)):
        for i, (a, b) in enumerate(zip(a_out, b_out, strict=True)):
            where = f"seed {seed}, output {k}, sample {i}"
            assert a.dtype == b.dtype and a.shape == b.shape, (where, a.dtype, b.dtype, a.shape, b.shape)
            np.testing.assert_array_equal(b, a, err_msg=where)


def fails(mod, inputs, graph, layouts) -> str:
    """The error running ``graph`` raises (DALI's, or fastload's), as text."""
    with pytest.raises(Exception) as caught:
        run(mod, inputs, graph, layouts)
    return str(caught.value)


def sequences(seed: int, shapes=((5, 13, 7, 3), (4, 17, 5, 3), (7, 9, 11, 3)), dtype=np.uint8) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if dtype == np.uint8:
        return [rng.integers(0, 256, shape, dtype=np.uint8) for shape in shapes]
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


# ------------------------------------------------------------------------------------- sequence_rearrange

def test_sequence_rearrange_matches_dali(seed):
    """Constant orders (reversed, repeated, dropped, one int) and per-sample int32 orders of their own lengths,
    on FHWC uint8, F** float32 and layout-less 4-D inputs: exact, layout kept."""
    rng = np.random.default_rng(seed)
    frames = sequences(seed)
    orders = [rng.integers(0, len(f), rng.integers(1, 9)).astype(np.int32) for f in frames]

    def graph(mod, x, order):
        fn = mod.fn
        return (fn.sequence_rearrange(x, new_order=[3, 2, 1, 0]), fn.sequence_rearrange(x, new_order=[0, 0, 2, 0, 1]),
                fn.sequence_rearrange(x, new_order=2), fn.sequence_rearrange(x, new_order=order))
    compare(graph, [frames, orders], ["FHWC", None], seed)
    floats = sequences(seed + 1, ((6, 31), (5, 24)), np.float32)
    compare(lambda mod, x, order: mod.fn.sequence_rearrange(x, new_order=order),
            [floats, [np.array([5, 1, 1], np.int32), np.array([4], np.int32)]], ["F*", None], seed)
    blocks = sequences(seed + 2, ((3, 2, 5, 4), (4, 3, 1, 2)), np.float32)
    compare(lambda mod, x: mod.ops.SequenceRearrange(new_order=[2, 1])(x), [blocks], [None], seed)


@pytest.mark.parametrize("case", ["layout", "range", "negative", "empty", "flat", "int64", "2d"])
def test_sequence_rearrange_refuses_what_dali_refuses(case):
    """An input laid out otherwise than "F...", an index out of range, an empty order, a 1-D input, a per-sample
    order not int32 or not 1-D: errors in DALI and here (fastload's name the operator)."""
    dali = import_dali()
    frames, layout, order = [np.zeros((4, 3, 2), np.uint8)], "FHW", [1, 0]
    if case == "layout":
        layout = "HWC"
    elif case == "range":
        order = [4, 0]
    elif case == "negative":
        order = [-1]
    elif case == "empty":
        order = []
    elif case == "flat":
        frames, layout = [np.zeros(4, np.uint8)], "F"
    elif case in ("int64", "2d"):
        order = [np.array([1, 0], np.int64) if case == "int64" else np.array([[1, 0]], np.int32)]

    def graph(mod, x, *given):
        return mod.fn.sequence_rearrange(x, new_order=given[0] if given else order)
    inputs, layouts = ([frames, order], [layout, None]) if case in ("int64", "2d") else ([frames], [layout])
    fails(dali, inputs, graph, layouts)
    assert "fn.sequence_rearrange" in fails(ours, inputs, graph, layouts)


# ------------------------------------------------------------------------------------------------ per_frame

def test_per_frame_matches_dali(seed):
    """An "F..." layout kept, "DHWC" replaced (replace=True), a layout-less input given "F" and "*"s (1-D and
    3-D), on values left as they are: exact."""
    frames = sequences(seed)
    flat = [np.random.default_rng(seed).uniform(size=n).astype(np.float32) for n in (5, 4, 7)]

    def graph(mod, x, plain, v):
        return mod.fn.per_frame(x), mod.fn.per_frame(plain, replace=False), mod.fn.per_frame(v)
    compare(graph, [frames, frames, flat], ["FHWC", None, None], seed)
    compare(lambda mod, x: mod.ops.PerFrame(replace=True)(x), [frames], ["DHWC"], seed)


def test_per_frame_refusals():
    """A layout not starting with "F" without replace, and a 0-D sample, fail in DALI and here; an operator defined
    on the output of a layout-less input (whose layout fastload learns only when a sample runs) is refused by
    name, and external_source(ndim=...) lets it be defined."""
    dali = import_dali()
    frames = [np.zeros((4, 3, 2), np.uint8)]
    for mod in (dali, ours):
        fails(mod, [frames], lambda mod, x: mod.fn.per_frame(x), ["HWC"])
        fails(mod, [[np.array(3.0, np.float32)]], lambda mod, x: mod.fn.per_frame(x), [None])
    with pytest.raises(ValueError, match="fn.per_frame"):
        run(ours, [frames], lambda mod, x: mod.fn.per_frame(x), ["HWC"])
    with pytest.raises(NotImplementedError, match=r"fn.per_frame of an input without a layout"):
        run(ours, [frames], lambda mod, x: mod.fn.sequence_rearrange(mod.fn.per_frame(x), new_order=[1]), [None])

    @ours.pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def pipe():
        x = ours.fn.external_source(source=lambda: frames, batch=True, ndim=3)
        return ours.fn.sequence_rearrange(ours.fn.per_frame(x), new_order=[1])
    p = pipe()
    p.build()
    (out,) = p.run()
    assert out.layout() == "F**" and np.array(out.at(0)).shape == (1, 3, 2)
