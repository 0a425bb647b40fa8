"""fastload.compat.dali.python_function against real DALI 2.4's CPU operators.

fn.python_function and fn.dl_tensor_python_function give DALI's outputs exactly (values, types, shapes,
layouts; tolerance 0), per sample and with batch_processing=True: in-place and wrapping arithmetic, transposed
and strided results, 0-d results, several inputs and outputs, output_layouts, no inputs, under both executor
settings; the functions are called in DALI's order (one operator over the batch, sample by sample) whatever
the loader threads.
fn.torch_python_function (the PyTorch plugin's) cannot run in DALI without CUDA (it makes a CUDA stream when
called), so it is checked against DALI's python_function doing the same arithmetic in numpy. The refusals
(num_outputs=0, the GPU, wrong results) name the operator and the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fastload.compat.dali as ours

from conftest import import_dali, run_dali_graph

rng = np.random.default_rng(5)
IMAGES = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in [(13, 17, 3), (24, 9, 3), (31, 40, 3)]]


def run(mod, graph, images=IMAGES, layout="HWC", **pipeline):
    """Each output's layout and per-sample arrays."""
    return run_dali_graph(mod, images, graph, layout, layouts=True, **pipeline)


def assert_same(theirs, mine):
    assert len(theirs) == len(mine)
    for k, ((layout_a, a_out), (layout_b, b_out)) in enumerate(zip(theirs, mine)):
        assert layout_a == layout_b, (k, layout_a, layout_b)
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            assert (a.dtype, a.shape) == (b.dtype, b.shape), (k, i, a.dtype, b.dtype, a.shape, b.shape)
            np.testing.assert_array_equal(b, a, err_msg=f"output {k} sample {i}")


def _bump(a):
    return a + np.uint8(200)  # uint8 wraps


def graph(mod, x):
    fn = mod.fn
    pair = fn.python_function(x, x, function=lambda a, b: (a.astype(np.int32) - b[::-1], np.array(a.sum())),
                              num_outputs=2, output_layouts=["HWC", ""])
    return (fn.python_function(x, function=_bump), fn.python_function(x, function=lambda a: a.transpose(2, 0, 1),
                                                                     output_layouts="CHW"),
            fn.python_function(x, function=lambda a: a[1::2, ::3]),
            fn.python_function(x, function=lambda a: np.array(a.max())),
            fn.python_function(x, function=lambda a: a.astype(np.float32) / 3), *pair,
            fn.python_function(function=lambda: np.array([1.5, 2.5])),
            fn.python_function(x, function=lambda a: a, output_layouts="HWC"))


@pytest.mark.parametrize("executor", [{}, {"exec_async": False, "exec_pipelined": False}])
def test_python_function_matches_dali(executor):
    assert_same(run(import_dali(), graph, **executor), run(ours, graph, **executor))


def test_dl_tensor_python_function_per_sample_matches_dali():
    def tripled(capsule):
        return torch.utils.dlpack.to_dlpack(torch.utils.dlpack.from_dlpack(capsule).float() * 3)

    def g(mod, x):
        return (mod.fn.dl_tensor_python_function(x, function=tripled, batch_processing=False),
                *mod.fn.dl_tensor_python_function(x, x, function=lambda a, b: (a, b), num_outputs=2,
                                                 batch_processing=False, synchronize_stream=False))
    assert_same(run(import_dali(), g), run(ours, g))


def test_torch_python_function_does_what_python_function_does_in_dali():
    import fastload.compat.dali.plugin.pytorch as dalitorch

    def theirs(mod, x):
        return (mod.fn.python_function(x, function=lambda a: a.astype(np.float32) * 2),
                *mod.fn.python_function(x, function=lambda a: (a[:, :, ::-1].copy(), np.array(a.shape, np.int64)),
                                        num_outputs=2, output_layouts=["HWC", ""]))

    def mine(mod, x):
        return (dalitorch.fn.torch_python_function(x, function=lambda t: t.float() * 2),
                *mod.ops.TorchPythonFunction(function=lambda t: (t.flip(2), torch.tensor(t.shape)), num_outputs=2,
                                             output_layouts=["HWC"])(x))
    assert_same(run(import_dali(), theirs), run(ours, mine))
    seen = []
    run(ours, lambda mod, x: dalitorch.fn.torch_python_function(x, function=lambda t: seen.append(t) or t))
    assert all(type(t) is torch.Tensor and t.dtype == torch.uint8 for t in seen) and len(seen) == len(IMAGES)


def test_a_function_changing_its_input_in_place_changes_only_its_copy():
    """DALI hands a view of the upstream buffer (its other consumers then see the change, in an order DALI does
    not define); fastload hands each call a writeable copy."""
    def bump(a):
        a += 200
        return a
    (_, bumped), (_, after) = run(ours, lambda mod, x: (mod.fn.python_function(x, function=bump),
                                                          mod.fn.python_function(x, function=lambda a: a)))
    for b, a, im in zip(bumped, after, IMAGES):
        assert np.array_equal(b, im + np.uint8(200)) and np.array_equal(a, im)


def test_calls_run_one_at_a_time_in_dali_order():
    """DALI calls a Python operator over the whole batch, sample by sample in order, before the next operator;
    fastload does too, whatever its loader threads."""
    images = [np.full((3 + i, 5, 3), i, np.uint8) for i in range(8)]

    def order(mod):
        calls = []

        def first(x):
            calls.append(("first", int(x[0, 0, 0])))
            return x + np.uint8(1)

        def second(x, y):
            calls.append(("second", int(x[0, 0, 0])))
            return y

        @mod.pipeline_def(batch_size=8, num_threads=4, device_id=None, seed=1)
        def pipe():
            x = mod.fn.external_source(source=lambda: images, batch=True, layout="HWC")
            return mod.fn.python_function(mod.fn.python_function(x, function=first), x, function=second)
        p = pipe()
        p.build()
        p.run()
        return calls[:16]  # DALI may have begun the next batch
    assert order(ours) == order(import_dali())


def _batch_graph(mod, x):
    fn = mod.fn

    def stats(batch, other):
        return ([a.astype(np.float32) * (k + 1) for k, a in enumerate(batch)],
                [np.array([len(batch), b.shape[0]], np.int64) for b in other])

    def capsules(batch):
        return [torch.utils.dlpack.to_dlpack(torch.utils.dlpack.from_dlpack(c).flip(0)) for c in batch]
    return (*fn.python_function(x, x, function=stats, num_outputs=2, batch_processing=True,
                                output_layouts=["HWC", ""]),
            fn.dl_tensor_python_function(x, function=capsules))  # batch_processing=True: its default


def test_batch_processing_matches_dali():
    assert_same(run(import_dali(), _batch_graph), run(ours, _batch_graph))


def _refused(error, match, g):
    with pytest.raises(error, match=match):
        run(ours, g, IMAGES[:1])


def test_refusals_name_the_operator_and_argument():
    _refused(ValueError, r"fn.python_function: output 0 has 2 sample\(s\) for a batch of 1",
             lambda mod, x: mod.fn.python_function(x, function=lambda batch: batch * 2, batch_processing=True))
    _refused(TypeError, r"fn.python_function: with batch_processing=True, each output must be a list",
             lambda mod, x: mod.fn.python_function(x, function=np.stack, batch_processing=True))  # DALI: TypeError
    _refused(NotImplementedError, r"fn.python_function\(num_outputs=0\) is not supported",
             lambda mod, x: mod.fn.python_function(x, function=print, num_outputs=0))
    _refused(NotImplementedError, r"fn.python_function\(device='gpu'\) is not supported",
             lambda mod, x: mod.fn.python_function(x.gpu(), function=lambda a: a))
    _refused(TypeError, "fn.python_function: the function must return numpy arrays, got list",
             lambda mod, x: mod.fn.python_function(x, function=lambda a: [1, 2]))
    _refused(TypeError, "fn.torch_python_function: the function must return torch tensors, got ndarray",
             lambda mod, x: mod.fn.torch_python_function(x, function=lambda t: t.numpy()))
    _refused(TypeError, "fn.python_function: the function returned None",
             lambda mod, x: mod.fn.python_function(x, function=lambda a: None))
    _refused(ValueError, "fn.python_function: unexpected number of outputs from the Python function: got 3",
             lambda mod, x: mod.fn.python_function(x, function=lambda a: (a, a, a), num_outputs=2)[0])
    _refused(TypeError, "fn.python_function: the output of a multi-output Python function operator must be a tuple",
             lambda mod, x: mod.fn.python_function(x, function=lambda a: a, num_outputs=2)[0])
    _refused(TypeError, "fn.python_function: expected inputs of type DataNode, input 1 is a int",
             lambda mod, x: mod.fn.python_function(x, 3, function=lambda a, b: a))
    _refused(ValueError, "fn.python_function: output_layouts has 2 layouts for 1 output",
             lambda mod, x: mod.fn.python_function(x, function=lambda a: a, output_layouts=["HWC", "CHW"]))
    _refused(ValueError, "fn.python_function: output 1's layout 'HWC' does not fit its 1 dimension",
             lambda mod, x: mod.fn.python_function(x, function=lambda a: (a, np.array(a.shape)), num_outputs=2,
                                                   output_layouts="HWC")[1])
    _refused(ZeroDivisionError, "division by zero", lambda mod, x: mod.fn.python_function(x, function=lambda a: 1 / 0))
