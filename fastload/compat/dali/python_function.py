"""DALI's Python operators: ``fn.python_function``, ``fn.torch_python_function`` (the PyTorch plugin's, also
``nvidia.dali.plugin.pytorch.fn.torch_python_function``) and ``fn.dl_tensor_python_function``.

Matched against real DALI 2.4's CPU operators (tests/compat/test_dali_python_function.py):

- Each is a batch operator (``BatchOp``, ``engine/graph.py``): a sample's run stops at it, and once the batch
  has got there the function is called one call at a time, as DALI's: per sample in batch order
  (``batch_processing=False``), or once with the whole batch (``batch_processing=True``, dl_tensor_python_function's
  default, as DALI's); one operator over the whole batch before the operators after it.
- Per sample the function gets one value per input: a numpy array (python_function; a writeable copy: DALI's is
  a writeable view of the upstream buffer, so a function changing it in place changes what the input's other
  consumers see, in an order DALI does not define), a torch tensor (torch_python_function) or a DLPack capsule
  (dl_tensor_python_function). It returns one such value, or a tuple of ``num_outputs`` of them (a wrong count
  or type is an error naming the operator, as DALI's). With ``batch_processing=True`` it gets a list of them per
  input and returns one list per output, one value per sample (DALI takes no other batch: a stacked array is a
  TypeError in both). An array of any strides is copied into a dense one (DALI's transposed outputs read the
  same). Outputs have no layout unless ``output_layouts`` gives them one (one string for every output, or a
  list with one per output; a layout of another length than its output's dimensions is an error, as DALI's).
- Either executor setting (``exec_async``, ``exec_pipelined``) is accepted and runs them the same way.
- ``num_outputs=0`` (a function run for its side effects) is refused: fastload runs only the operators the
  pipeline's outputs depend on. ``device="gpu"`` is refused for python_function and dl_tensor_python_function
  (DALI hands those CuPy arrays on its CUDA stream); torch_python_function on "gpu" gets the tensors on the
  pipeline's device. Inputs must be DataNodes (DALI: Python operators take no constants).
"""

from __future__ import annotations

import threading

import numpy as np
import torch
import torch.utils.dlpack

from ..engine.graph import BatchOp, DataNode
from .operators import _device, _one, check_args
from .spec import operator


class _Kind:
    """How one of the three operators hands values to the function and takes them back."""

    def __init__(self, name: str, given: str, taken: type | None, to_function, from_function, gpu: bool):
        self.name, self.given, self.taken, self.gpu = name, given, taken, gpu
        self.to_function, self.from_function = to_function, from_function


def _numpy_out(value) -> torch.Tensor:
    return torch.from_numpy(np.array(value, order="C"))  # dense (np.ascontiguousarray would make a scalar 1-D)


def _dlpack_out(value) -> torch.Tensor:
    return torch.utils.dlpack.from_dlpack(value).clone()


_NUMPY = _Kind("fn.python_function", "numpy arrays", np.ndarray, lambda x: x.cpu().numpy().copy(), _numpy_out,
               gpu=False)
_TORCH = _Kind("fn.torch_python_function", "torch tensors", torch.Tensor, lambda x: x.clone(),
               lambda value: value.contiguous(), gpu=True)
_DLPACK = _Kind("fn.dl_tensor_python_function", "DLPack capsules", None,
                lambda x: torch.utils.dlpack.to_dlpack(x.clone()), _dlpack_out, gpu=False)


def _layouts(name: str, output_layouts, count: int) -> tuple[str, ...]:
    if output_layouts is None:
        return ("",) * count
    if isinstance(output_layouts, str):
        return (output_layouts,) * count
    layouts = tuple(str(layout) for layout in output_layouts)
    if len(layouts) > count:
        raise ValueError(f"fastload.compat.dali: {name}: output_layouts has {len(layouts)} layouts for "
                         f"{count} output(s)")
    return layouts + ("",) * (count - len(layouts))


def _split(name: str, result, count: int, what: str) -> tuple:
    """The function's result as its ``count`` outputs (DALI's checks, named)."""
    if result is None:
        raise TypeError(f"fastload.compat.dali: {name}: the function returned None for {what}; it must "
                        f"return {count} output(s)")
    if count > 1:
        if not isinstance(result, tuple):
            raise TypeError(f"fastload.compat.dali: {name}: the output of a multi-output Python function "
                            f"operator must be a tuple, got {type(result).__name__}")
        if len(result) != count:
            raise ValueError(f"fastload.compat.dali: {name}: unexpected number of outputs from the Python "
                             f"function: got {len(result)}, expected {count}")
    return result if count > 1 else (result,)


def _outputs(kind: _Kind, result, count: int, layouts: tuple[str, ...]) -> tuple:
    """The function's result for one sample as the op's outputs (DALI's checks, named)."""
    values = _split(kind.name, result, count, "a sample")
    for value in values:
        if kind.taken is not None and not isinstance(value, kind.taken):
            raise TypeError(f"fastload.compat.dali: {kind.name}: the function must return {kind.given}, got "
                            f"{type(value).__name__}")
    outs = tuple(kind.from_function(value) for value in values)
    for k, (out, layout) in enumerate(zip(outs, layouts)):
        if layout and len(layout) != out.dim():
            raise ValueError(f"fastload.compat.dali: {kind.name}: output {k}'s layout {layout!r} does not fit its "
                             f"{out.dim()} dimension(s)")
    return outs


def _batch_outputs(kind: _Kind, result, count: int, size: int, layouts: tuple[str, ...]) -> list[tuple]:
    """The function's result for a whole batch (``batch_processing=True``) as each sample's outputs: one list of
    ``size`` values per output (DALI takes no other batch)."""
    per_output = []
    for k, batch in enumerate(_split(kind.name, result, count, "a batch")):
        if not isinstance(batch, list):
            raise TypeError(f"fastload.compat.dali: {kind.name}: with batch_processing=True, each output must be a "
                            f"list of {kind.given}, one per sample; output {k} is a {type(batch).__name__}")
        if len(batch) != size:
            raise ValueError(f"fastload.compat.dali: {kind.name}: output {k} has {len(batch)} sample(s) for a batch "
                             f"of {size}")
        per_output.append([_outputs(kind, value, 1, (layouts[k],))[0] for value in batch])
    return [tuple(outs[i] for outs in per_output) for i in range(size)]


def _python_operator(kind: _Kind, node_name: str, default_batch: bool, extra: frozenset = frozenset()):
    def build(*inputs, function, num_outputs=1, batch_processing=default_batch, output_layouts=None, device=None,
              **args):
        name = kind.name
        check_args(name, {k: v for k, v in args.items() if k not in extra}, set())
        if not callable(function):
            raise TypeError(f"fastload.compat.dali: {name}: function must be callable, got {type(function).__name__}")
        for i, x in enumerate(inputs):
            if not isinstance(x, DataNode):
                raise TypeError(f"fastload.compat.dali: {name}: expected inputs of type DataNode, input {i} is a "
                                f"{type(x).__name__} (Python operators take no constants)")
        count = int(num_outputs)
        if count < 1:
            raise NotImplementedError(f"fastload.compat.dali: {name}(num_outputs={count}) is not supported: an "
                                      f"operator without outputs runs only for its side effects, and fastload runs "
                                      f"only the operators the pipeline's outputs depend on")
        where = _device(inputs, device)
        if where != "cpu" and not kind.gpu:
            raise NotImplementedError(f"fastload.compat.dali: {name}(device={where!r}) is not supported: DALI hands "
                                      f"it CuPy arrays on its CUDA stream; run it on the CPU (before .gpu()), or "
                                      f"use torch_python_function")
        layouts = _layouts(name, output_layouts, count)
        whole = bool(batch_processing)
        lock = threading.Lock()  # one call at a time, as DALI's single Python thread

        def run(ctxs, op, *batches):
            with lock:
                if whole:
                    given = [[kind.to_function(torch.as_tensor(v)) for v in batch] for batch in batches]
                    return _batch_outputs(kind, function(*given), count, len(ctxs), layouts)
                outs = []
                for i in range(len(ctxs)):  # in sample order
                    result = function(*(kind.to_function(torch.as_tensor(batch[i])) for batch in batches))
                    outs.append(_outputs(kind, result, count, layouts))
                return outs
        return _one(BatchOp(node_name, run, list(inputs), {}, device=where, num_outputs=count, layouts=layouts))
    build.__name__ = node_name
    build.__doc__ = (f"``{kind.name}``: ``function`` called once per sample with {kind.given} (or, with "
                     f"``batch_processing``, once per batch with a list of them per input), returning one or a "
                     f"tuple of ``num_outputs``; ``output_layouts``.")
    return build


python_function = operator("python_function", "PythonFunction", input_sets=False)(
    _python_operator(_NUMPY, "python_function", False))
torch_python_function = operator("torch_python_function", "TorchPythonFunction", input_sets=False)(
    _python_operator(_TORCH, "torch_python_function", False))
dl_tensor_python_function = operator("dl_tensor_python_function", "DLTensorPythonFunction", input_sets=False)(
    _python_operator(_DLPACK, "dl_tensor_python_function", True, frozenset({"synchronize_stream"})))
