"""The graph a pipeline definition traces (DALI's, and rocAL's built on it), and how one sample runs
through it.

Operators called inside a pipeline (``fn.resize(images, ...)``) do not run:
they add an ``Op`` to the pipeline being defined and return ``DataNode``s,
as in DALI. At ``build()`` the pipeline keeps the ops its outputs depend on
(DALI prunes the rest too) and runs them per sample in fastload's loader
threads (``execution.GraphPath``), by demand from the outputs (so the
branch of a conditional a sample does not take does not run for it,
``conditionals``). Each sample is independent: DALI's random operators draw
from the sample's own stream, so the order threads finish in changes
nothing. The few operators that need their whole batch (``BatchOp``: DALI's
permute_batch, batch_permutation) stop a sample's run where it reaches them;
once every sample of the batch has got that far, ``Graph.finish_batch`` runs
them over the batch and then what follows them, sample by sample.
"""

from __future__ import annotations

import itertools
import operator
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ...rng import SampleRandom

_IDS = itertools.count(1)
_DEFINING = threading.local()  # the stack of pipelines being defined on this thread


def current_pipeline():
    """The pipeline being defined on this thread (``with pipe:``, ``pipeline_def``, ``define_graph``)."""
    stack = getattr(_DEFINING, "stack", [])
    return stack[-1] if stack else None


def push_pipeline(pipe) -> None:
    _DEFINING.stack = getattr(_DEFINING, "stack", []) + [pipe]


def pop_pipeline() -> None:
    _DEFINING.stack = _DEFINING.stack[:-1]


@dataclass
class SampleContext:
    """What one sample's run needs: its random streams' key (seed, epoch, index), its reader samples
    ((bytes, label) per reader op), the external sources' values for it, the torch device of the
    pipeline's "gpu" operators, and what its batch reads once (rocAL's parameter handles)."""

    seed: int
    epoch: int
    index: int
    name: str = ""
    readers: dict[int, tuple[bytes, int]] = field(default_factory=dict)  # reader op id -> (bytes, label)
    external: dict[int, Any] = field(default_factory=dict)
    gpu: torch.device = torch.device("cpu")
    frame: int = 0  # the frame of a sequence an operator runs on (fastload.compat.rocal's video reader)
    repeat: int = 0  # the sample's earlier places in the epoch (fastload.order.Order.repeat): copies draw anew
    batch: dict = field(default_factory=dict)  # values read once for its batch, shared by the batch's samples

    def rng(self, op: "Op") -> SampleRandom:
        """The sample's stream for ``op``: its own, so operators draw independently of each other; an
        operator given a ``seed`` of its own draws from that seed instead of the pipeline's (as in DALI:
        its values do not change with the pipeline's seed, and two operators given one seed draw alike)."""
        if op.seed is not None:
            return self.stream(op.seed).fork(OWN_SEED)
        return self.stream().fork(op.ordinal)

    def stream(self, seed: int | None = None) -> SampleRandom:
        """The sample's stream under the pipeline's seed (or ``seed``), before an operator forks it."""
        return SampleRandom(self.seed if seed is None else seed, self.epoch, self.index, self.repeat)


OWN_SEED = 1 << 41  # the fork of an operator's own seed's stream


class _Skipped:
    def __repr__(self) -> str:
        return "<skipped>"


SKIPPED = _Skipped()  # a sample's value on the side of DALI's fn._conditional.split it does not take


class Op:
    """One operator call: ``impl(ctx, op, *input_values, **args) -> output(s)``.

    ``args`` are constants; ``arg_inputs`` are DataNodes given as named
    arguments (per-sample values, DALI's "argument inputs"), resolved to
    Python numbers for each sample. ``layouts`` are the outputs' layouts.
    """

    def __init__(self, name: str, impl: Callable, inputs: list["DataNode"], args: dict, *, device: str = "cpu",
                 num_outputs: int = 1, layouts: tuple[str, ...] | None = None, dtypes: tuple | None = None,
                 fusable: bool = True):
        self.id, self.name, self.impl, self.device = next(_IDS), name, impl, device
        self.inputs = [as_node(x) for x in inputs]
        self.arg_inputs = {k: v for k, v in args.items() if isinstance(v, DataNode)}
        self.args = {k: v for k, v in args.items() if not isinstance(v, DataNode)}
        self.num_outputs, self.fusable = num_outputs, fusable
        self.seed: int | None = None  # a random operator's own seed (``SampleContext.rng``)
        self.sees_skipped = False  # True: run even for a sample an input skips (``SKIPPED``), and say so
        layouts = layouts or ("",) * num_outputs
        self.outputs = [DataNode(self, i, "gpu" if device in ("gpu", "mixed") else "cpu", layouts[i])
                        for i in range(num_outputs)]
        pipe = current_pipeline()
        self.ordinal = self.id  # the op's place in its pipeline: two pipelines defined alike draw alike
        if pipe is not None:
            self.ordinal = len(pipe._ops)
            pipe._ops.append(self)

    def __repr__(self) -> str:
        return f"{self.name}(device={self.device!r})"

    def wanted(self, values: dict) -> list["DataNode"]:
        """The inputs this op needs for a sample, given the values computed so far: all of them (a
        conditional's select needs its predicate, then only the chosen branch's value)."""
        return [*self.inputs, *self.arg_inputs.values()]

    def run(self, ctx: SampleContext, values: dict) -> tuple:
        inputs = [values[node] for node in self.inputs]
        args = dict(self.args)
        for key, node in self.arg_inputs.items():
            args[key] = scalar_value(values[node])
        out = self.impl(ctx, self, *inputs, **args)
        out = out if isinstance(out, tuple) else (out,)
        if self.device in ("gpu", "mixed"):
            out = tuple(x.to(ctx.gpu, non_blocking=True) if isinstance(x, torch.Tensor) else x for x in out)
        return out


def scalar_value(value):
    """A per-sample argument input as an operator reads it: a number, or a tuple of numbers."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else tuple(value.flatten().tolist())
    return value


class DataNode:
    """An operator's output, per sample; what DALI's ``DataNode`` is to a pipeline definition."""

    def __init__(self, source: Op | None, index: int, device: str, layout: str = ""):
        self.source, self.index, self.device, self._layout = source, index, device, layout
        self.meta = None  # a front end's typed description of this output (compat.rocal: meta.RocalMeta)

    @property
    def name(self) -> str:
        return f"__{self.source.name}_{self.source.id}_{self.index}" if self.source else "__constant"

    def layout(self) -> str:
        return self._layout

    def __repr__(self) -> str:
        return f"DataNode(name={self.name!r}, device={self.device!r})"

    def gpu(self) -> "DataNode":
        """This node on the GPU (on a machine without one, the pipeline runs it on the CPU, warning once)."""
        if self.device == "gpu":
            return self
        return Op("gpu", lambda ctx, op, x: x, [self], {}, device="gpu", layouts=(self._layout,)).outputs[0]

    def cpu(self) -> "DataNode":
        if self.device == "cpu":
            return self
        return Op("cpu", lambda ctx, op, x: x.cpu(), [self], {}, layouts=(self._layout,)).outputs[0]

    def __bool__(self):
        pipe = current_pipeline()
        if getattr(pipe, "_conditionals", False):  # conditionals on, but this truth test was not converted
            raise TypeError("fastload.compat.dali: a DataNode has a value per sample, known only when the "
                            "pipeline runs; with enable_conditionals=True fastload converts the `if`, `and`, "
                            "`or` and `not` of the @pipeline_def function and of the functions of your code it "
                            "calls, but not this truth test (bool(), assert, a chained comparison such as "
                            "`a < x < b`, a comprehension's `if`, or code whose source cannot be read)")
        raise TypeError("fastload.compat.dali: a DataNode has a value per sample, known only when the "
                        "pipeline runs; an `if`, `and`, `or` or `not` on one needs conditionals: pass "
                        "enable_conditionals=True to @pipeline_def, as in DALI (or use the value as an "
                        "argument input, e.g. mirror=fn.random.coin_flip(), or arithmetic such as "
                        "`a * cond + b * (1 - cond)`)")

    def __getitem__(self, key):
        """DALI's indexing: an integer removes its axis and that axis's layout letter, a slice keeps both."""
        return Op("subscript", lambda ctx, op, x, key=key: x[key], [self], {}, device=self.device,
                  layouts=(_subscript_layout(self._layout, key),), fusable=False).outputs[0]

    # arithmetic: DALI's operators on DataNodes, with torch's type promotion (which agrees with DALI's:
    # an integer constant keeps an integer tensor's type, a float constant or `/` makes float32)
    def _binary(self, other, fn, name, reflected=False):
        a, b = (other, self) if reflected else (self, other)
        device = "gpu" if "gpu" in (getattr(a, "device", "cpu"), getattr(b, "device", "cpu")) else "cpu"
        layout = self._layout
        return Op(f"arithmetic({name})", lambda ctx, op, x, y: _arithmetic(name, fn, x, y), [a, b], {}, device=device,
                  layouts=(layout,), fusable=False).outputs[0]

    def _unary(self, fn, name):
        return Op(f"arithmetic({name})", lambda ctx, op, x: fn(x), [self], {}, device=self.device,
                  layouts=(self._layout,), fusable=False).outputs[0]


def _subscript_layout(layout: str, key) -> str:
    """The layout of ``x[key]`` for an ``x`` laid out ``layout`` (empty where unknown)."""
    keys = key if isinstance(key, tuple) else (key,)
    if not layout or len(keys) > len(layout) or not all(isinstance(k, (int, slice)) for k in keys):
        return ""
    return "".join(letter for k, letter in zip(keys, layout) if isinstance(k, slice)) + layout[len(keys):]


def _operand(value) -> torch.Tensor:
    """A Python constant as DALI types it: int -> int32, float -> float32, bool -> bool."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, bool):
        return torch.tensor(value)
    return torch.tensor(value, dtype=torch.int32 if isinstance(value, int) else torch.float32)


def _arithmetic(name: str, fn: Callable, x, y) -> torch.Tensor:
    """``x <op> y`` with DALI's type promotion (``conversions.promote``; ``/`` gives float32 for integers)."""
    from .conversions import promote, true_divide_type
    x, y = _operand(x), _operand(y)
    common = (true_divide_type if name == "truediv" else promote)(x.dtype, y.dtype)
    return fn(x.to(common), y.to(common))


def _floor_divide(x, y):
    if x.dtype.is_floating_point:
        return torch.floor_divide(x, y)
    return torch.div(x, y, rounding_mode="trunc")  # DALI's integer // truncates, as C++ does


_BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": torch.true_divide,
           "floordiv": _floor_divide, "pow": torch.pow, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
           "le": torch.le, "gt": torch.gt, "ge": torch.ge, "and": torch.bitwise_and, "or": torch.bitwise_or,
           "xor": torch.bitwise_xor}


def _install_operators() -> None:
    for name, fn in _BINARY.items():
        def forward(self, other, fn=fn, name=name):
            return self._binary(other, fn, name)

        def reflected(self, other, fn=fn, name=name):
            return self._binary(other, fn, name, reflected=True)

        setattr(DataNode, f"__{name}__", forward)
        if name not in ("eq", "ne", "lt", "le", "gt", "ge"):
            setattr(DataNode, f"__r{name}__", reflected)
    DataNode.__neg__ = lambda self: self._unary(torch.neg, "neg")
    DataNode.__pos__ = lambda self: self
    DataNode.__invert__ = lambda self: self._unary(torch.bitwise_not, "invert")
    DataNode.__hash__ = object.__hash__


_install_operators()


def constant(value, dtype=None, shape=None, layout=None, device=None) -> DataNode:
    """A constant graph node: the same tensor for every sample. ``dtype``: a torch dtype (``types.Constant``
    takes DALI's types and converts them: the graph knows no DALI type names)."""
    tensor = torch.as_tensor(value)
    if dtype is not None:
        tensor = tensor.to(dtype)
    elif tensor.dtype == torch.float64:
        tensor = tensor.float()  # DALI's constants are float32 unless asked
    elif tensor.dtype == torch.int64 and not isinstance(value, torch.Tensor):
        tensor = tensor.int()
    if shape is not None:
        tensor = tensor.reshape(shape)
    return Op("constant", lambda ctx, op: tensor, [], {}, device=device or "cpu",
              layouts=(layout or "",)).outputs[0]


def as_node(value) -> DataNode:
    """An operator input: a DataNode as is, a Python number or array as a constant node."""
    if isinstance(value, DataNode):
        return value
    if isinstance(value, (list, tuple)) and any(isinstance(v, DataNode) for v in value):
        raise TypeError("fastload.compat.dali: a list of DataNodes is not an operator input; "
                        "use fn.stack or fn.cat")
    if isinstance(value, (int, float, bool)):
        # kept a Python number: torch then promotes as DALI does with constants (an int keeps an integer
        # tensor's type, a float makes float32)
        return Op("constant", lambda ctx, op: value, [], {}).outputs[0]
    return constant(value)


class ReaderOp(Op):
    """An op that reads a dataset: DALI's fn.readers.file and COCO reader, each of rocAL's readers. It has
    no inputs; its outputs are a sample's encoded bytes and label, and ``reader`` is what it reads (its
    ``samples`` [(path, label)], ``name``, and either DALI's sharding arguments or its own
    ``order(batch_size, seed)`` and ``read(index)``); ``layouts``, its outputs' (none by default). A
    pipeline's build finds its readers by this class (``Graph.readers``), whatever each is named."""

    def __init__(self, name: str, impl: Callable, reader, num_outputs: int = 2,
                 layouts: tuple[str, ...] | None = None):
        super().__init__(name, impl, [], {}, num_outputs=num_outputs, layouts=layouts)
        self.reader = reader


class BatchOp(Op):
    """An op over its whole batch (DALI's fn.batch_permutation, fn.permute_batch): ``impl(ctxs, op, *inputs,
    **args)`` takes each input and each argument input as the list of the batch's sample values (raw, for
    the op to check; ``ctxs``: the samples' contexts) and returns one value (or tuple of outputs) per
    sample. It runs once per batch, after all the samples' values it wants (``Graph.finish_batch``); such
    an op is never fused."""

    def __init__(self, name: str, impl: Callable, inputs: list["DataNode"], args: dict, **options):
        super().__init__(name, impl, inputs, args, fusable=False, **options)

    def run(self, ctx: SampleContext, values: dict) -> tuple:
        raise RuntimeError(f"fastload.compat.dali: {self.name} runs on its whole batch, not per sample")

    def run_batch(self, ctxs: list[SampleContext], samples: list[dict]) -> list[tuple]:
        inputs = [[values[node] for values in samples] for node in self.inputs]
        args = dict(self.args)
        for key, node in self.arg_inputs.items():
            args[key] = [values[node] for values in samples]
        out = self.impl(ctxs, self, *inputs, **args)
        out = [x if isinstance(x, tuple) else (x,) for x in out]
        if self.device in ("gpu", "mixed"):
            out = [tuple(x.to(ctx.gpu, non_blocking=True) if isinstance(x, torch.Tensor) else x for x in sample)
                   for ctx, sample in zip(ctxs, out)]
        return out


@dataclass(eq=False)
class PendingSample:
    """A sample whose run stopped at batch ops (``Graph.run_sample`` of a graph that has some): its context,
    the values computed so far and the batch ops that wait for the rest of its batch."""

    ctx: SampleContext
    values: dict
    waiting: list


def ops_for(outputs: list[DataNode]) -> list[Op]:
    """The ops ``outputs`` depend on, each before its consumers (the rest are pruned, as DALI does)."""
    order, seen = [], set()

    def visit(op: Op) -> None:
        if op.id in seen:
            return
        seen.add(op.id)
        for node in itertools.chain(op.inputs, op.arg_inputs.values()):
            if node.source is not None:
                visit(node.source)
        order.append(op)

    for node in outputs:
        visit(node.source)
    return order


class Graph:
    """A built pipeline's ops (pruned to its outputs) and how to run one sample through them."""

    def __init__(self, outputs: list[DataNode]):
        self.outputs = outputs
        self.ops = ops_for(outputs)
        # no batch op and no op choosing its inputs: every op runs for every sample, in ``ops``' order (the
        # order the demand-driven walk of ``_evaluate`` takes), without that walk's bookkeeping per op
        self.straight = not any(isinstance(op, BatchOp) or type(op).wanted is not Op.wanted or op.sees_skipped
                                for op in self.ops)

    def find(self, name: str) -> list[Op]:
        return [op for op in self.ops if op.name == name]

    def readers(self) -> list[ReaderOp]:
        """The ops that read a dataset, in graph order."""
        return [op for op in self.ops if isinstance(op, ReaderOp)]

    def run_sample(self, ctx: SampleContext, given: dict | None = None):
        """The outputs for one sample, evaluated by demand from them: each op runs once, after the inputs
        it wants (``Op.wanted``), so an op only a branch not taken needs (a conditional) does not run.
        ``given``: values already computed for some nodes (a reader's outputs, read in the loader's
        threads while the rest of the graph runs beside the pipeline's external sources). A graph with
        batch ops gives a ``PendingSample`` instead where they stop the run (``finish_batch`` ends it)."""
        values: dict[DataNode, Any] = dict(given or {})
        waiting = self._evaluate(ctx, values)
        return PendingSample(ctx, values, waiting) if waiting else self._results(values)

    def finish_batch(self, results: list) -> list[tuple]:
        """A batch's ``run_sample`` results as output tuples: each batch op that samples wait for runs over
        those samples, in batch order (all of them, or, in a conditional's branch, the samples that take
        it, as DALI's split batch; a sample an input skips, ``SKIPPED``, is left out and skips it too), then
        each sample's run goes on, until none waits."""
        while any(isinstance(r, PendingSample) for r in results):
            pending = [r for r in results if isinstance(r, PendingSample)]
            for op in [op for op in self.ops if any(op in p.waiting for p in pending)]:
                members = [p for p in pending if op in p.waiting]
                skipped = [p for p in members if not op.sees_skipped
                           and any(p.values.get(node) is SKIPPED for node in op.wanted(p.values))]
                taking = [p for p in members if p not in skipped]
                for p in skipped:
                    p.values.update((out, SKIPPED) for out in op.outputs)
                if taking:
                    for p, outputs in zip(taking, op.run_batch([p.ctx for p in taking], [p.values for p in taking])):
                        p.values.update(zip(op.outputs, outputs))
            results = [self.run_sample(r.ctx, r.values) if isinstance(r, PendingSample) else r for r in results]
        return results

    def _evaluate(self, ctx: SampleContext, values: dict) -> list:
        """Run the ops the outputs want for one sample into ``values``, as far as batch ops let it: the
        batch ops reached (their inputs computed, their outputs not), in the order reached; none when done."""
        if self.straight and not any(value is SKIPPED for value in values.values()):
            for op in self.ops:
                if op.outputs[0] not in values:
                    outputs = op.run(ctx, values)
                    values.update(zip(op.outputs, outputs))
                    if any(value is SKIPPED for value in outputs):
                        break  # (a split: the walk below goes on from here, leaving out the side not taken)
            else:
                return []
        stopped: set[int] = set()  # ops that wait for a batch op, and the batch ops reached
        waiting: list[BatchOp] = []
        for node in self.outputs:
            stack = [node.source]
            while stack:
                op = stack[-1]
                if op.outputs[0] in values or op.id in stopped:
                    stack.pop()
                    continue
                missing = [x.source for x in op.wanted(values) if x not in values and x.source is not None]
                if any(source.id in stopped for source in missing):
                    stopped.add(op.id)
                    stack.pop()
                    continue
                if missing:
                    stack.extend(reversed(missing))
                    continue
                stack.pop()
                if isinstance(op, BatchOp):
                    stopped.add(op.id)
                    waiting.append(op)
                    continue
                # an op on the side of a split the sample does not take does not run for it (DALI's
                # split batch leaves the sample out); a merge asks only for the side it takes
                skipped = not op.sees_skipped and any(values.get(x) is SKIPPED for x in op.wanted(values))
                for out, value in zip(op.outputs, [SKIPPED] * len(op.outputs) if skipped else op.run(ctx, values)):
                    values[out] = value
        return waiting

    def _results(self, values: dict) -> tuple:
        return tuple(_as_tensor(values[node]) for node in self.outputs)


def _as_tensor(value) -> torch.Tensor:
    return value if isinstance(value, torch.Tensor) or value is SKIPPED else torch.as_tensor(value)
