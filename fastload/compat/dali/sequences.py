"""DALI's sequence operators: ``fn.sequence_rearrange`` and ``fn.per_frame``.

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_sequences.py); the rules measured
there:

- ``sequence_rearrange``: ``out[i] = in[new_order[i]]`` along the outermost (frame) axis, exactly, layout kept.
  The input has at least 2 dimensions and a layout that is empty or starts with "F"; ``new_order`` is a list of
  ints (an int is a list of one), or per sample a 1-D int32 tensor (DALI refuses any other type or dimension);
  it is not empty and each index is in [0, frames).
- ``per_frame``: the input as it is, its layout marked as a sequence: kept where it starts with "F", its first
  letter replaced by "F" with ``replace=True`` (else an error, as in DALI); an input without a layout gets "F"
  and a "*" per further dimension (a 0-D sample is an error). Where the input's layout is empty, the number of
  dimensions is known only when a sample runs: the output's layout is set then (the pipeline's outputs have
  DALI's), and an operator defined on such a node, which would need it earlier, is refused by name (give the
  input a layout, or ``fn.external_source(ndim=...)``). fastload's operators take no per-frame argument
  inputs: those that check refuse several values per sample, naming the argument.
"""

from __future__ import annotations

import torch

from ..engine.graph import DataNode, Op
from .operators import _device, _one, check_args
from .spec import operator

PREFIX = "fastload.compat.dali"


# ------------------------------------------------------------------------------------- sequence_rearrange

def _order_list(value) -> tuple[int, ...]:
    """A constant ``new_order`` as DALI's INT_VEC argument reads it (an int is a list of one)."""
    values = list(value) if hasattr(value, "__len__") else [value]
    for v in values:
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"{PREFIX}: fn.sequence_rearrange: new_order holds {v!r}; it is a list of ints")
    return tuple(int(v) for v in values)


def rearrange(frames: torch.Tensor, order) -> torch.Tensor:
    """``frames[order]`` along the outermost axis, with DALI's checks of the sample and of ``order``."""
    if frames.dim() < 2:
        raise ValueError(f"{PREFIX}: fn.sequence_rearrange: a {frames.dim()}-D sample; sequence elements must have "
                         f"at least 1 dim (as in DALI)")
    if isinstance(order, torch.Tensor):
        if order.dtype != torch.int32:
            raise TypeError(f"{PREFIX}: fn.sequence_rearrange: new_order per sample is {order.dtype}; DALI reads "
                            f"int32 only")
        if order.dim() != 1:
            raise ValueError(f"{PREFIX}: fn.sequence_rearrange: new_order per sample is {order.dim()}-D; DALI "
                             f"reads 1-D tensors")
        order = tuple(order.tolist())
    if not order:
        raise ValueError(f"{PREFIX}: fn.sequence_rearrange: new_order is empty (empty result sequences are not "
                         f"allowed, as in DALI)")
    count = frames.shape[0]
    for at, index in enumerate(order):
        if not 0 <= index < count:
            raise ValueError(f"{PREFIX}: fn.sequence_rearrange: new_order[{at}] is {index}, not in [0, {count}) "
                             f"(the input's frames)")
    return frames[torch.tensor(order, dtype=torch.int64, device=frames.device)].contiguous()


@operator("sequence_rearrange", "SequenceRearrange")
def sequence_rearrange(data, *, new_order=None, device=None, **args):
    """``fn.sequence_rearrange``: ``out[i] = in[new_order[i]]`` along the frames ("F", outermost) axis;
    ``new_order`` a list of ints, or per sample a 1-D int32 tensor (a DataNode)."""
    operator_name = "fn.sequence_rearrange"
    check_args(operator_name, args, set())
    if new_order is None:
        raise ValueError(f"{PREFIX}: {operator_name} needs new_order")
    layout = data.layout()
    if layout and not layout.startswith("F"):
        raise ValueError(f"{PREFIX}: {operator_name}: expected sequences, whose outermost dimension is the frames "
                         f"'F', got data laid out {layout!r} (as DALI)")
    if isinstance(new_order, DataNode):
        if new_order.device != "cpu":
            raise ValueError(f"{PREFIX}: {operator_name}: new_order given per sample must be a CPU node (DALI's "
                             f"argument inputs are)")
        # a regular input here, not an argument input: the check of its type and dimensions needs the tensor
        return _one(Op("sequence_rearrange", lambda ctx, op, x, order: rearrange(x, order), [data, new_order], {},
                       device=_device([data], device), layouts=(layout,), fusable=False))
    order = _order_list(new_order)
    if not order:
        raise ValueError(f"{PREFIX}: {operator_name}: new_order is empty (empty result sequences are not allowed, "
                         f"as in DALI)")
    return _one(Op("sequence_rearrange", lambda ctx, op, x, order: rearrange(x, order), [data], {"order": order},
                   device=_device([data], device), layouts=(layout,), fusable=False))


# ------------------------------------------------------------------------------------------------ per_frame

class _LaidOutWhenRun(DataNode):
    """An output whose layout DALI decides from a sample's number of dimensions: empty until a sample has
    run, and read before then (an operator defined on it) refused by name."""

    def __init__(self, source: Op, index: int, device: str, layout: str = ""):
        self._known = ""
        super().__init__(source, index, device, layout)

    @property
    def _layout(self) -> str:
        if not self._known:
            raise NotImplementedError(
                f"{PREFIX}: fn.per_frame of an input without a layout: its layout ('F' and a '*' per further "
                f"dimension) depends on the samples' dimensions, known here only when the pipeline runs, so no "
                f"operator can be defined on it; give the input a layout (or fn.external_source(ndim=...))")
        return self._known

    @_layout.setter
    def _layout(self, value: str) -> None:
        self._known = value

    def mark(self, ndim: int) -> None:
        layout = "F" + "*" * (ndim - 1)
        if self._known and self._known != layout:
            raise ValueError(f"{PREFIX}: fn.per_frame: a {ndim}-D sample after samples laid out {self._known!r}: "
                             f"fastload keeps one layout per node")
        self._known = layout


def _static_ndim(node: DataNode) -> int | None:
    """The node's samples' number of dimensions where the definition says it (an external source's ``ndim``)."""
    return getattr(node.source, "ndim", None) if node.source is not None and node.source.name == "external_source" \
        else None


@operator("per_frame", "PerFrame")
def per_frame(data, *, replace=False, device=None, **args):
    """``fn.per_frame``: the input unchanged, its layout marked as a sequence (starting with "F")."""
    operator_name = "fn.per_frame"
    check_args(operator_name, args, set())
    layout = data.layout()
    ndim = _static_ndim(data)
    if layout:
        if layout[0] != "F" and not replace:
            raise ValueError(f"{PREFIX}: {operator_name}: a per-frame argument input must be a sequence: the input "
                             f"layout should start with 'F', got {layout!r} (replace=True replaces its first letter)")
        layout = "F" + layout[1:]
    elif ndim is not None:
        if ndim < 1:
            raise ValueError(f"{PREFIX}: {operator_name}: cannot mark zero-dimensional input as a sequence")
        layout = "F" + "*" * (ndim - 1)

    def run(ctx, op, x):
        if x.dim() < 1:
            raise ValueError(f"{PREFIX}: {operator_name}: cannot mark zero-dimensional input as a sequence")
        if isinstance(op.outputs[0], _LaidOutWhenRun):
            op.outputs[0].mark(x.dim())
        return x
    op = Op("per_frame", run, [data], {}, device=_device([data], device), layouts=(layout,), fusable=False)
    if not layout:
        op.outputs = [_LaidOutWhenRun(op, 0, op.outputs[0].device)]
    return _one(op)
