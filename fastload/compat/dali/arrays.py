"""DALI's operators on whole arrays (shape, layout and type, not pixels): ``fn.reshape``, ``fn.reinterpret``,
``fn.transpose``, ``fn.one_hot``, ``fn.constant``, ``fn.cast_like``, ``fn.copy``, ``fn.squeeze``,
``fn.expand_dims``, ``fn.shapes``, ``fn.zeros`` / ``fn.ones`` / ``fn.full`` and their ``_like`` forms,
``fn.element_extract`` and ``fn.get_property``.

Each was matched against real DALI 2.4 on the CPU (tests/compat/test_dali_arrays.py): values, dtypes, shapes
and output layouts exactly. The rules measured there:

- A node's layout is known when the pipeline is defined (fastload's graph keeps it per node, not per sample), so
  where DALI decides it from a sample's shape (``reshape`` with a shape given as a DataNode, ``one_hot`` of
  one-element inputs) fastload decides it from the arguments and raises, naming the operator, for a sample whose
  shape would give DALI another layout (never another layout silently).
- ``reshape`` / ``reinterpret``: one extent of ``shape`` / ``rel_shape`` may be negative (the rest of the volume,
  in bytes for ``reinterpret``); ``rel_shape`` extents are ``round(rel * input extent)`` (of ``src_dims``' source
  dimension; one it inserts, -1, counts 1, and is 1 for a per-sample ``rel_shape``), halves away from zero;
  ``src_dims`` alone picks dimensions (-1 inserts a 1) and does not
  permute the layout; ``shape`` ignores ``src_dims``. Without ``layout`` the input's is kept where the number of
  dimensions stays, else it is empty (but ``src_dims`` alone changing the number of dimensions of a laid-out input
  fails in DALI without ``layout``, and so here). ``reinterpret`` without a shape rescales the innermost extent.
- ``transpose``: ``perm`` defaults to the reversed dimensions; the layout is permuted (``transpose_layout``),
  kept (``transpose_layout=False``) or ``output_layout``.
- ``one_hot``: classes are the input values truncated to integers (2.7 -> 2, -0.5 -> 0); values outside
  ``[0, num_classes)`` give a row of ``off_value``. ``on_value`` and ``off_value`` are float32 converted as C++
  assigns them (truncated, wrapped into integer types: -1.5 -> 255 for uint8). Where ``axis`` is not given and the
  sample has one element, the output is ``[num_classes]`` (DALI's legacy scalars; DALI asks it of the whole batch,
  so a batch mixing one-element samples with longer ones is refused). The new axis is named ``axis_name`` in the
  layout; without it the layout is empty. bool and float16 outputs and inputs are refused, as DALI refuses them.
- ``constant``: ``fdata`` are float32, ``idata`` int64, converted to ``dtype`` (float32 / int32 by default) by
  DALI's ConvertSat (rounded halves away from zero, saturated: 2 ** 40 -> int32 2147483647); one value fills any
  ``shape``; float64 is refused, as DALI refuses it. ``cast_like`` converts as ``fn.cast`` (ConvertSat) to the
  second input's type and keeps the first's layout; ``copy`` keeps everything.
- ``squeeze``: DALI walks the dimensions against the sorted ``axes``, so a negative axis (first once sorted) stops
  it from removing any; removing an extent other than 1 fails. ``expand_dims``: ``axes`` are the new dimensions'
  places in the output (sorted with their ``new_axis_names``); without names the layout is empty.
- ``zeros`` / ``ones``: int32 unless ``dtype``, a scalar without ``shape``. ``full``: the fill's type; the fill is
  spread over ``shape`` aligned from the last dimension, read along a dimension where the extents agree and at
  index 0 elsewhere (an extent of 1 on either side, or a fill dimension the output lacks). ``*_like``: the first
  input's shape, layout and type (``dtype`` overrides it for ``zeros_like`` / ``ones_like``), values by ConvertSat.
- ``element_extract``: one output per ``element_map`` index (a single node for one), each frame laid out as the
  input's layout less its leading "F"; an input laid out otherwise than a sequence is refused, as in DALI.
- ``get_property``: ``"layout"`` is the input's layout as uint8 bytes; ``"source_info"`` is empty for external
  sources, constants and a reader's labels, and for data read by ``fn.readers.file`` (and anything computed from
  it: DALI hands on the first input's that has one) the file's name relative to ``file_root``, as DALI gives it.
  fastload knows it where the pipeline reads with one ``fn.readers.file`` and no external source, and refuses
  it elsewhere (other readers' source info, several readers) by name. Other keys fail, as in DALI.
"""

from __future__ import annotations


import numpy as np
import torch

from ..engine.conversions import convert_sat, static_cast
from ..float32 import round_c
from ..engine.graph import DataNode, Op, ReaderOp
from .operators import _device, _one, check_args
from .spec import operator
from .types import torch_dtype

PREFIX = "fastload.compat.dali"


def _ints(value) -> list[int] | None:
    """A list argument as DALI reads it (a scalar is a one-element list)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return [int(v) for v in np.asarray(value).reshape(-1).tolist()]
    return [int(value)]


def _floats(value) -> list[float] | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [float(v) for v in value]
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return [float(v) for v in np.asarray(value).reshape(-1).tolist()]
    return [float(value)]


def _tensor(value) -> torch.Tensor:
    """An input's value as a tensor: a Python constant given as an input is typed as DALI types it (int -> int32,
    float -> float32, bool -> bool)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (bool, np.bool_)):
        return torch.tensor(bool(value))
    return torch.tensor(value, dtype=torch.int32 if isinstance(value, (int, np.integer)) else torch.float32)


def _volume(shape) -> int:
    count = 1
    for extent in shape:
        count *= int(extent)
    return count


# ---------------------------------------------------------------------------------------- reshape / reinterpret

def _relative_extents(operator: str, rel, in_shape, src_dims, per_sample: bool) -> list[int]:
    """``rel_shape``'s extents: ``round(rel * extent)`` of the source dimension; a dimension ``src_dims`` inserts
    (-1) counts as 1 for a constant ``rel_shape``, and is 1 whatever ``rel`` for one given per sample (DALI)."""
    if src_dims is not None:
        if len(rel) != len(src_dims):
            raise ValueError(f"{PREFIX}: {operator}: src_dims and rel_shape have different lengths: "
                             f"{len(src_dims)} vs {len(rel)}")
    elif len(rel) > len(in_shape):
        raise ValueError(f"{PREFIX}: {operator}: rel_shape has more elements ({len(rel)}) than there are "
                         f"dimensions in the input ({len(in_shape)}); use src_dims to add dimensions")
    out = []
    for d, e in enumerate(rel):
        src = src_dims[d] if src_dims is not None else d
        if e < 0:
            out.append(-1)
        elif src < 0 and per_sample:
            out.append(1)
        else:
            out.append(int(round_c(np.float32(e) * np.float32(1 if src < 0 else in_shape[src]))))
    return out


def reshaped(operator: str, in_shape, in_size: int, out_size: int, *, shape=None, rel_shape=None,
             src_dims=None, per_sample: bool = False) -> list[int]:
    """The output shape DALI's Reshape gives one sample of ``in_shape`` (elements of ``in_size`` bytes, output
    elements of ``out_size``): ``shape`` (one extent may be negative), ``rel_shape`` (relative to ``src_dims``'
    dimensions, or the input's) or ``src_dims`` alone (a -1 inserts an extent of 1)."""
    in_shape = [int(e) for e in in_shape]
    ndim = len(in_shape)
    if src_dims is not None:
        bad = [d for d in src_dims if not -1 <= d < ndim]
        if bad:
            raise ValueError(f"{PREFIX}: {operator}: src_dims {src_dims} has indices out of range for a "
                             f"{ndim}-dimensional input (0..{ndim - 1}, or -1 to insert a dimension)")
    if shape is None and rel_shape is None:
        out = [1 if d < 0 else in_shape[d] for d in src_dims] if src_dims is not None else list(in_shape)
        if _volume(out) != _volume(in_shape):
            raise ValueError(f"{PREFIX}: {operator}: src_dims {src_dims} give a shape of {_volume(out)} elements; "
                             f"the input {in_shape} has {_volume(in_shape)}")
        if in_size != out_size:
            if not out:
                raise ValueError(f"{PREFIX}: {operator}: a scalar cannot change its type's size")
            if out[-1] * in_size % out_size:
                raise ValueError(f"{PREFIX}: {operator}: the size in bytes of the innermost dimension "
                                 f"({out[-1] * in_size}) is not divisible by the output type's ({out_size})")
            out[-1] = out[-1] * in_size // out_size
        return out
    out = list(shape) if rel_shape is None else _relative_extents(operator, rel_shape, in_shape, src_dims,
                                                                               per_sample)
    negative = [d for d, e in enumerate(out) if e < 0]
    if len(negative) > 1:
        raise ValueError(f"{PREFIX}: {operator}: only one extent may be negative; got {out}")
    in_bytes = _volume(in_shape) * in_size
    if negative:
        out[negative[0]] = 1
        others = _volume(out)
        if others == 0:
            raise ValueError(f"{PREFIX}: {operator}: cannot infer the extent of dimension {negative[0]} when the "
                             f"other extents' volume is 0 (input {in_shape})")
        out[negative[0]] = in_bytes // (others * out_size)
    if _volume(out) * out_size != in_bytes:
        raise ValueError(f"{PREFIX}: {operator}: input and output samples must occupy the same size in bytes: "
                         f"input {in_shape} ({in_bytes} bytes), requested {out} ({_volume(out) * out_size} bytes)")
    return out


def _shape_arg(operator: str, name: str, value, relative: bool):
    """A constant ``shape`` / ``rel_shape`` checked as DALI's constructor does."""
    values = _floats(value) if relative else _ints(value)
    if relative and not values:
        raise ValueError(f"{PREFIX}: {operator}: rel_shape is empty")
    if sum(1 for v in values if v < 0) > 1:
        raise ValueError(f"{PREFIX}: {operator}: only one extent of {name} may be negative; got {values}")
    if any(v == 0 for v in values):
        raise ValueError(f"{PREFIX}: {operator}: an extent of 0 in {name} is illegal; got {values}")
    return values


def _reshape(operator: str, data, shape_input, *, shape, rel_shape, src_dims, layout, dtype, device, args):
    check_args(operator, args, set())
    if shape_input is not None and shape is not None:
        raise ValueError(f"{PREFIX}: {operator}: the shape input and the shape argument are mutually exclusive")
    shape = shape_input if shape_input is not None else shape
    if shape is not None and rel_shape is not None:
        raise ValueError(f"{PREFIX}: {operator}: shape and rel_shape are mutually exclusive")
    if shape is None and rel_shape is None and layout is None and src_dims is None and dtype is None:
        what = "shape, layout nor type" if operator == "fn.reinterpret" else "shape nor layout"
        raise ValueError(f"{PREFIX}: {operator} is no-op: arguments specify neither new {what}")
    src_dims = _ints(src_dims)
    target = torch_dtype(dtype) if dtype is not None else None
    nodes = {key: value for key, value in (("shape", shape), ("rel_shape", rel_shape))
             if isinstance(value, DataNode)}
    if "shape" not in nodes and shape is not None:
        shape = _shape_arg(operator, "shape", shape, False)
    if "rel_shape" not in nodes and rel_shape is not None:
        rel_shape = _shape_arg(operator, "rel_shape", rel_shape, True)
    in_layout = data.layout()
    if (nodes and src_dims is None) or "shape" in nodes:
        out_ndim = None  # the shape node's length, known per sample
    elif shape is not None:
        out_ndim = len(shape)
    elif rel_shape is not None or src_dims is not None:
        out_ndim = len(rel_shape) if rel_shape is not None and not nodes else len(src_dims)
    else:
        out_ndim = len(in_layout) if in_layout else None
    if shape is None and rel_shape is None and src_dims is not None and layout is None and in_layout \
            and len(src_dims) != len(in_layout):
        raise ValueError(f"{PREFIX}: {operator}: src_dims {src_dims} alone change the number of dimensions of an "
                         f"input laid out {in_layout!r}, which fails in DALI (its output's layout is not the one "
                         f"it expects); pass layout=")
    if layout is not None:
        out_layout = str(layout)
        if out_layout and out_ndim is not None and len(out_layout) != out_ndim:
            raise ValueError(f"{PREFIX}: {operator}: layout {out_layout!r} does not fit a {out_ndim}-dimensional "
                             f"output")
    else:
        out_layout = in_layout if out_ndim is None or len(in_layout) == out_ndim else ""
    node_keys = list(nodes)

    def run(ctx, op, x, *given):
        values = dict(zip(node_keys, given))
        sample_shape, sample_rel = shape, rel_shape
        if "shape" in values:
            v = values["shape"]
            if v.dtype.is_floating_point or v.dtype == torch.bool:
                raise TypeError(f"{PREFIX}: {operator}: the shape input must have an integral type; got {v.dtype}")
            if v.dim() != 1:
                raise ValueError(f"{PREFIX}: {operator}: the shape input must be a 1D tensor per sample")
            sample_shape = [int(e) for e in v.tolist()]
        if "rel_shape" in values:
            v = values["rel_shape"]
            if v.dtype != torch.float32:
                raise TypeError(f"{PREFIX}: {operator}: rel_shape must be float32; got {v.dtype}")
            sample_rel = [float(e) for e in v.reshape(-1).tolist()]
        out_type = target if target is not None else x.dtype
        in_size = x.element_size()
        out_size = torch.empty((), dtype=out_type).element_size()
        out_shape = reshaped(operator, x.shape, in_size, out_size, shape=sample_shape, rel_shape=sample_rel,
                             src_dims=src_dims, per_sample="rel_shape" in values)
        if out_layout and len(out_layout) != len(out_shape):
            if layout is not None:
                raise ValueError(f"{PREFIX}: {operator}: layout {out_layout!r} does not fit the "
                                 f"{len(out_shape)}-dimensional output {out_shape}")
            raise NotImplementedError(f"{PREFIX}: {operator}: the output {out_shape} has another number of "
                                      f"dimensions than the input's layout {out_layout!r}, which DALI would drop; "
                                      f"fastload fixes layouts when the pipeline is defined: pass layout=")
        if out_type != x.dtype:
            x = x.contiguous().reshape(-1).view(torch.uint8).view(out_type)
        return x.reshape(out_shape)

    inputs = [data, *nodes.values()]
    return _one(Op(operator[3:], run, inputs, {}, device=_device([data], device), layouts=(out_layout,),
                   fusable=False))


@operator("reshape", "Reshape")
def reshape(data, shape_input=None, *, shape=None, rel_shape=None, src_dims=None, layout=None, device=None,
            **args):
    """``fn.reshape``: the same elements under another ``shape`` / ``rel_shape`` / ``src_dims`` (or a shape
    input, positional or as ``shape=DataNode``) and/or ``layout``."""
    return _reshape("fn.reshape", data, shape_input, shape=shape, rel_shape=rel_shape, src_dims=src_dims,
                    layout=layout, dtype=None, device=device, args=args)


@operator("reinterpret", "Reinterpret")
def reinterpret(data, shape_input=None, *, dtype=None, shape=None, rel_shape=None, src_dims=None, layout=None,
                device=None, **args):
    """``fn.reinterpret``: the same bytes as ``dtype`` (the innermost extent rescaled unless a shape is given),
    under a new shape and/or layout as ``fn.reshape``."""
    return _reshape("fn.reinterpret", data, shape_input, shape=shape, rel_shape=rel_shape, src_dims=src_dims,
                    layout=layout, dtype=dtype, device=device, args=args)


# ----------------------------------------------------------------------------------------------- transpose

@operator("transpose", "Transpose")
def transpose(data, *, perm=None, transpose_layout=True, output_layout=None, device=None, **args):
    """``fn.transpose``: dimensions in the order ``perm`` (reversed by default); the layout follows."""
    check_args("fn.transpose", args, set())
    perm = _ints(perm)
    if perm is not None and sorted(perm) != list(range(len(perm))):
        raise ValueError(f"{PREFIX}: fn.transpose: invalid permutation {perm}: sorted, perm must be "
                         f"[0, ..., n-1]")
    if output_layout is not None and not str(output_layout):
        raise ValueError(f"{PREFIX}: fn.transpose: an empty output_layout is not supported")
    in_layout = data.layout()
    order = perm if perm is not None else list(range(len(in_layout)))[::-1]
    if in_layout and len(order) != len(in_layout):
        raise ValueError(f"{PREFIX}: fn.transpose: the input has {len(in_layout)} dimensions ({in_layout!r}), "
                         f"perm {perm} has {len(order)}")
    if output_layout is not None:
        layout = str(output_layout)
        if in_layout and len(layout) != len(in_layout):
            raise ValueError(f"{PREFIX}: fn.transpose: output_layout {layout!r} does not fit the "
                             f"{len(in_layout)}-dimensional input")
    elif transpose_layout and in_layout:
        layout = "".join(in_layout[d] for d in order)
    else:
        layout = in_layout

    def run(ctx, op, x):
        dims = perm if perm is not None else list(range(x.dim()))[::-1]
        if len(dims) != x.dim():
            raise ValueError(f"{PREFIX}: fn.transpose: the input has {x.dim()} dimensions, perm {perm} has "
                             f"{len(dims)}")
        if len(layout) not in (0, x.dim()):
            raise ValueError(f"{PREFIX}: fn.transpose: output_layout {layout!r} does not fit the {x.dim()}-dimensional "
                             f"input")
        return x.permute(dims).contiguous()
    return _one(Op("transpose", run, [data], {}, device=_device([data], device), layouts=(layout,),
                   fusable=False))


# -------------------------------------------------------------------------------------------------- one_hot

_ONE_HOT_TYPES = (torch.uint8, torch.int8, torch.uint16, torch.int16, torch.uint32, torch.int32, torch.uint64,
                  torch.int64, torch.float32, torch.float64)


@operator("one_hot", "OneHot")
def one_hot(data, *, num_classes=0, axis=None, on_value=1.0, off_value=0.0, dtype=None, axis_name=None,
            device=None, **args):
    """``fn.one_hot``: ``num_classes`` values per input element, ``on_value`` at the element's class, along a
    new axis at ``axis`` (last by default) named ``axis_name``."""
    check_args("fn.one_hot", args, set())
    target = torch_dtype(dtype) if dtype is not None else torch.float32
    if target not in _ONE_HOT_TYPES:
        raise TypeError(f"{PREFIX}: fn.one_hot: unsupported output type {target} (DALI's are "
                        f"{', '.join(str(t).replace('torch.', '') for t in _ONE_HOT_TYPES)})")
    if axis_name is not None and len(str(axis_name)) != 1:
        raise ValueError(f"{PREFIX}: fn.one_hot: axis_name must be one character; got {axis_name!r}")
    classes = int(num_classes)
    if classes < 0:  # DALI: a RuntimeError from its buffer's size
        raise ValueError(f"{PREFIX}: fn.one_hot: argument num_classes must not be negative, got {classes}")
    if classes >= 1 << 31:  # DALI keeps the low 32 bits (2**40 classes give none)
        raise ValueError(f"{PREFIX}: fn.one_hot: argument num_classes {classes} does not fit DALI's int32")
    on = static_cast(float(np.float32(on_value)), target)
    off = static_cast(float(np.float32(off_value)), target)
    in_layout = data.layout()
    legacy = axis is None  # DALI's scalar-like inputs (one element) give [num_classes] only without axis
    axis = -1 if axis is None else int(axis)
    if in_layout and not -1 <= axis <= len(in_layout):
        raise ValueError(f"{PREFIX}: fn.one_hot: axis {axis} is outside [-1, {len(in_layout)}]")
    if axis_name is None:
        layout = ""
    elif in_layout:
        at = len(in_layout) if axis < 0 else axis
        layout = in_layout[:at] + str(axis_name) + in_layout[at:]
    else:
        layout = str(axis_name)

    def run(ctx, op, x):
        if x.dtype not in _ONE_HOT_TYPES:
            raise TypeError(f"{PREFIX}: fn.one_hot: unsupported input type {x.dtype}")
        if not -1 <= axis <= x.dim():
            raise ValueError(f"{PREFIX}: fn.one_hot: axis {axis} is outside [-1, {x.dim()}]")
        scalar = legacy and x.numel() == 1
        if legacy and x.dim() and ctx.batch.setdefault(("one_hot scalars", op.id), scalar) != scalar:
            # DALI gives one-element samples a [num_classes] output only where every sample of the batch has
            # one element; samples run apart here, so a batch that mixes them is refused (by whichever sees it)
            raise NotImplementedError(f"{PREFIX}: fn.one_hot without axis over a batch mixing one-element samples "
                                      f"with longer ones is not supported (DALI's legacy scalar rule looks at the "
                                      f"whole batch; fastload runs samples apart): pass axis=-1")
        out_dim = 1 if scalar else x.dim() + 1
        if axis_name is not None and len(layout) != out_dim:
            if not in_layout:
                raise ValueError(f"{PREFIX}: fn.one_hot: axis_name needs an input with a layout of {x.dim()} "
                                 f"dimensions; the input's is empty")
            raise NotImplementedError(f"{PREFIX}: fn.one_hot: a one-element sample (DALI's legacy scalar) gives a "
                                      f"1D output whose layout is {axis_name!r}, not {layout!r} as fastload fixed "
                                      f"it when the pipeline was defined; pass axis=-1 for {layout!r}")
        cls = (x.to(torch.float64).trunc() if x.dtype.is_floating_point else x).to(torch.int64).reshape(-1)
        at = x.dim() if axis < 0 else axis
        flat = np.full((cls.numel(), classes), off, dtype=torch.empty(0, dtype=target).numpy().dtype)
        cls = cls.numpy()
        valid = (cls >= 0) & (cls < classes)
        flat[np.nonzero(valid)[0], cls[valid]] = on
        flat = torch.from_numpy(flat)
        if scalar:
            return flat.reshape(classes)
        out = flat.reshape(*x.shape, classes)
        return out.movedim(-1, at).contiguous()
    return _one(Op("one_hot", run, [data], {}, device=_device([data], device), layouts=(layout,), fusable=False))


# --------------------------------------------------------------------------------------------------- shapes

_SHAPE_TYPES = (torch.int32, torch.uint32, torch.int64, torch.uint64, torch.float32, torch.float64)


@operator("shapes", "Shapes")
def shapes(data, *, dtype=None, type=None, device=None, **args):
    """``fn.shapes``: each sample's shape as a 1D tensor (int64 unless ``dtype``; ``type`` is DALI's deprecated
    name for it)."""
    check_args("fn.shapes", args, set())
    if dtype is not None and type is not None:
        raise ValueError(f"{PREFIX}: fn.shapes: dtype and its deprecated name type are both given")
    chosen = dtype if dtype is not None else type
    target = torch_dtype(chosen) if chosen is not None else torch.int64
    if target not in _SHAPE_TYPES:
        raise TypeError(f"{PREFIX}: fn.shapes can return int32, uint32, int64, uint64, float or double; "
                        f"got {target}")

    def run(ctx, op, x):
        return torch.tensor(list(x.shape), dtype=torch.int64).to(target)
    return _one(Op("shapes", run, [data], {}, device=_device([data], device), fusable=False))


# ------------------------------------------------------------------------------------------ constant / copy

_CONSTANT_TYPES = (torch.uint8, torch.int8, torch.uint16, torch.int16, torch.uint32, torch.int32, torch.uint64,
                   torch.int64, torch.float16, torch.float32, torch.bool)


@operator("constant", "Constant")
def constant(*, fdata=None, idata=None, shape=None, layout=None, dtype=None, device=None, **args):
    """``fn.constant``: the values ``fdata`` (float32) or ``idata`` (integers), one value repeated or one per
    element of ``shape``, converted to ``dtype`` as DALI's ConvertSat does (rounded, saturated)."""
    check_args("fn.constant", args, set())
    if (fdata is None) == (idata is None):
        raise ValueError(f"{PREFIX}: fn.constant needs one of fdata and idata (they are mutually exclusive)")
    if fdata is not None:
        values = torch.tensor(_floats(fdata), dtype=torch.float32)
    else:
        values = torch.tensor(_ints(idata), dtype=torch.int64)
    target = torch_dtype(dtype) if dtype is not None else (torch.float32 if fdata is not None else torch.int32)
    if target not in _CONSTANT_TYPES:
        raise TypeError(f"{PREFIX}: fn.constant: unsupported type {target}")
    dims = _ints(shape) if shape is not None else [values.numel()]
    if any(e < 0 for e in dims):  # DALI: a RuntimeError from its buffer's size
        raise ValueError(f"{PREFIX}: fn.constant: argument shape has a negative extent: {dims}")
    if values.numel() not in (1, _volume(dims)):
        raise ValueError(f"{PREFIX}: fn.constant: {values.numel()} values do not fill the shape {dims}")
    layout = str(layout) if layout is not None else ""
    if layout and len(layout) != len(dims):
        raise ValueError(f"{PREFIX}: fn.constant: layout {layout!r} does not fit the shape {dims}")
    tensor = convert_sat(values, target)
    tensor = (tensor.expand(_volume(dims)) if tensor.numel() == 1 else tensor).reshape(dims).contiguous()
    return _one(Op("constant", lambda ctx, op: tensor, [], {}, device=device or "cpu", layouts=(layout,),
                   fusable=False))


@operator("copy", "Copy")
def copy(data, *, device=None, **args):
    """``fn.copy``: the input, copied."""
    check_args("fn.copy", args, set())
    return _one(Op("copy", lambda ctx, op, x: x.clone(), [data], {}, device=_device([data], device),
                   layouts=(data.layout(),), fusable=False))


@operator("cast_like", "CastLike")
def cast_like(data, like, *, device=None, **args):
    """``fn.cast_like``: ``data`` converted to the type of ``like`` as ``fn.cast`` converts (DALI's ConvertSat)."""
    check_args("fn.cast_like", args, set())
    return _one(Op("cast_like", lambda ctx, op, x, y: convert_sat(_tensor(x), _tensor(y).dtype), [data, like], {},
                   device=_device([data, like], device), layouts=(data.layout(),), fusable=False))


# ---------------------------------------------------------------------------------------- squeeze / expand_dims

def _constant_axes(operator: str, axes, name: str = "axes") -> list[int]:
    if isinstance(axes, DataNode):
        raise NotImplementedError(f"{PREFIX}: {operator}: {name} given per sample (a DataNode) is not supported: "
                                  f"fastload fixes the output layouts when the pipeline is defined")
    return _ints(axes)


def _squeezed(axes: list[int], ndim: int) -> list[int]:
    """The dimensions DALI's Squeeze keeps: it walks the dimensions against the sorted axes, so an axis it
    never meets (a negative one, before all the others) stops it from removing any later one."""
    kept, at = [], 0
    for d in range(ndim):
        if at < len(axes) and axes[at] == d:
            at += 1
            continue
        kept.append(d)
    return kept


@operator("squeeze", "Squeeze")
def squeeze(data, *, axes=None, axis_names=None, device=None, **args):
    """``fn.squeeze``: the dimensions ``axes`` (or the layout's ``axis_names``) removed; each must have
    extent 1 (or the volume be 0 before and after)."""
    check_args("fn.squeeze", args, set())
    if (axes is None) == (axis_names is None):
        raise ValueError(f"{PREFIX}: fn.squeeze: " + ("axes and axis_names are mutually exclusive" if axes is not None
                                                       else "needs axes or axis_names"))
    in_layout = data.layout()
    if axis_names is not None:
        missing = [name for name in str(axis_names) if name not in in_layout]
        if missing:
            raise ValueError(f"{PREFIX}: fn.squeeze: axis {missing[0]!r} of axis_names is not in the input's layout "
                             f"{in_layout!r}")
        order = sorted(in_layout.index(name) for name in str(axis_names))
    else:
        order = sorted(_constant_axes("fn.squeeze", axes))
    if len(set(order)) != len(order):
        raise ValueError(f"{PREFIX}: fn.squeeze: a dimension to remove is given twice")
    layout = "".join(in_layout[d] for d in _squeezed(order, len(in_layout))) if in_layout else ""

    def run(ctx, op, x):
        kept = _squeezed(order, x.dim())
        out = [x.shape[d] for d in kept]
        if _volume(out) != x.numel():
            raise ValueError(f"{PREFIX}: fn.squeeze: removing dimensions {order} of a {list(x.shape)} sample changes "
                             f"its volume")
        return x.reshape(out)
    return _one(Op("squeeze", run, [data], {}, device=_device([data], device), layouts=(layout,), fusable=False))


@operator("expand_dims", "ExpandDims")
def expand_dims(data, *, axes, new_axis_names=None, device=None, **args):
    """``fn.expand_dims``: dimensions of extent 1 inserted so that they are the output's ``axes``, named
    ``new_axis_names`` in the layout (without it the layout is empty)."""
    check_args("fn.expand_dims", args, set())
    axes = _constant_axes("fn.expand_dims", axes)
    if any(a < 0 for a in axes):
        raise ValueError(f"{PREFIX}: fn.expand_dims: an axis cannot be negative; got {axes}")
    names = str(new_axis_names) if new_axis_names else ""
    if names and len(names) != len(axes):
        raise ValueError(f"{PREFIX}: fn.expand_dims: {len(axes)} new dimensions, but new_axis_names names "
                         f"{len(names)}")
    pairs = sorted(zip(axes, names or [""] * len(axes)))
    axes = [a for a, _ in pairs]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{PREFIX}: fn.expand_dims: duplicate axis index in {axes}")
    named = dict(pairs)
    in_layout = data.layout()

    if in_layout and axes and axes[-1] >= len(in_layout) + len(axes):
        raise ValueError(f"{PREFIX}: fn.expand_dims: a {len(in_layout)}-dimensional input has not enough dimensions "
                         f"to add new axes at {axes}")
    if not names:
        layout = ""
    elif in_layout:
        rest = iter(in_layout)
        layout = "".join(named[i] if i in named else next(rest) for i in range(len(in_layout) + len(axes)))
    else:
        layout = "".join(n for _, n in pairs)  # a 0D input's (any other needs a layout: refused per sample)

    def run(ctx, op, x):
        if names and not in_layout and x.dim():
            raise ValueError(f"{PREFIX}: fn.expand_dims: new_axis_names needs an input with a layout")
        out_ndim = x.dim() + len(axes)
        if axes and axes[-1] >= out_ndim:
            raise ValueError(f"{PREFIX}: fn.expand_dims: a {x.dim()}-dimensional sample has not enough dimensions to "
                             f"add new axes at {axes}")
        shape, d = [], 0
        for i in range(out_ndim):
            if i in named:
                shape.append(1)
            else:
                shape.append(x.shape[d])
                d += 1
        return x.reshape(shape)
    return _one(Op("expand_dims", run, [data], {}, device=_device([data], device), layouts=(layout,),
                   fusable=False))


# ------------------------------------------------------------------------------- zeros / ones / full (+ _like)

_VALUE_TYPES = (*_CONSTANT_TYPES, torch.float64)


def _broadcast_fill(operator: str, fill: torch.Tensor, shape) -> torch.Tensor:
    """``fill`` spread over ``shape`` as DALI's Full does: dimensions aligned from the last; where the fill's
    extent and the output's agree the fill is read along it, elsewhere (an extent of 1 on either side, or a
    fill dimension the output lacks) at index 0."""
    shape, fill_shape = [int(e) for e in shape], list(fill.shape)
    nd, nf = len(shape), len(fill_shape)
    for i in range(max(nd, nf)):
        a, b = shape[nd - 1 - i] if i < nd else 1, fill_shape[nf - 1 - i] if i < nf else 1
        if a != b and a != 1 and b != 1:
            raise ValueError(f"{PREFIX}: {operator}: shapes {shape} and {fill_shape} can't be broadcast")
    window = tuple(slice(None) if k >= nf - nd and fill_shape[k] == shape[k - nf + nd] else slice(0, 1)
                   for k in range(nf))
    picked = fill[window]
    if nf > nd:
        picked = picked.reshape(picked.shape[nf - nd:])
    return picked.expand(shape)


def _filled(operator: str, *, shape, layout, dtype, value=None, fill=None, device=None):
    """The op of ``fn.zeros`` / ``fn.ones`` (a ``value``) or ``fn.full`` (a ``fill`` node): ``shape`` constant
    or a DataNode (int32, per sample); without one, a scalar."""
    target = torch_dtype(dtype) if dtype is not None else None
    if target is not None and target not in _VALUE_TYPES:
        raise TypeError(f"{PREFIX}: {operator}: unsupported type {target}")
    layout = str(layout) if layout is not None else ""
    per_sample = isinstance(shape, DataNode)
    dims = None if per_sample else (_ints(shape) if shape is not None else [])
    if dims is not None and any(e < 0 for e in dims):
        raise ValueError(f"{PREFIX}: {operator}: negative extent in shape {dims}")
    if layout and dims is not None and len(layout) != len(dims):
        raise ValueError(f"{PREFIX}: {operator}: layout {layout!r} has {len(layout)} dimensions but the output "
                         f"shape {dims} has {len(dims)}")

    def run(ctx, op, *given):
        given = list(given)
        filler = _tensor(given.pop(0)) if fill is not None else None
        out_shape = dims
        if per_sample:
            v = given.pop(0)
            if v.dtype != torch.int32:
                raise TypeError(f"{PREFIX}: {operator}: a shape given per sample must be int32; got {v.dtype}")
            out_shape = [int(e) for e in v.reshape(-1).tolist()]
            if any(e < 0 for e in out_shape):
                raise ValueError(f"{PREFIX}: {operator}: argument shape has a negative extent in a sample: "
                                 f"{out_shape}")
            if layout and len(layout) != len(out_shape):
                raise ValueError(f"{PREFIX}: {operator}: layout {layout!r} has {len(layout)} dimensions but the "
                                 f"output shape {out_shape} has {len(out_shape)}")
        if filler is None:
            return convert_sat(torch.full(out_shape, value, dtype=torch.int64), target or torch.int32)
        if filler.dtype not in _VALUE_TYPES:
            raise TypeError(f"{PREFIX}: {operator}: unsupported fill type {filler.dtype}")
        out = _broadcast_fill(operator, filler, out_shape)
        return convert_sat(out.contiguous(), target) if target is not None else out.contiguous()

    inputs = ([fill] if fill is not None else []) + ([shape] if per_sample else [])
    return _one(Op(operator[3:], run, inputs, {}, device=_cpu_only(operator, inputs, device), layouts=(layout,),
                   fusable=False))


def _cpu_only(operator: str, inputs, device) -> str:
    """"cpu": DALI 2.4 has these operators for the CPU only (a GPU input or device="gpu" fails there)."""
    if _device([x for x in inputs if isinstance(x, DataNode)], device) != "cpu":
        raise ValueError(f"{PREFIX}: {operator} runs on the CPU only (DALI 2.4 has no GPU operator for it)")
    return "cpu"


@operator("zeros", "Zeros")
def zeros(*, shape=None, dtype=None, layout=None, device=None, **args):
    """``fn.zeros``: zeros of ``shape`` (per sample allowed; a scalar without it), int32 unless ``dtype``."""
    check_args("fn.zeros", args, set())
    return _filled("fn.zeros", shape=shape, layout=layout, dtype=dtype, value=0, device=device)


@operator("ones", "Ones")
def ones(*, shape=None, dtype=None, layout=None, device=None, **args):
    """``fn.ones``: ones of ``shape`` (per sample allowed; a scalar without it), int32 unless ``dtype``."""
    check_args("fn.ones", args, set())
    return _filled("fn.ones", shape=shape, layout=layout, dtype=dtype, value=1, device=device)


@operator("full", "Full")
def full(fill_value, *, shape=None, layout=None, device=None, **args):
    """``fn.full``: ``fill_value`` (a sample, broadcast as DALI broadcasts it) over ``shape``, in its type."""
    check_args("fn.full", args, set())
    if isinstance(fill_value, DataNode) and fill_value.layout():
        if shape is None:
            raise ValueError(f"{PREFIX}: fn.full: without shape the output is a scalar, which cannot keep the fill "
                             f"value's layout {fill_value.layout()!r} (DALI fails here too); pass shape=")
        if isinstance(shape, DataNode):
            raise ValueError(f"{PREFIX}: fn.full: with a shape given per sample, a fill value with a layout "
                             f"({fill_value.layout()!r}) fails in DALI (its output's layout is not the one it expects)")
    return _filled("fn.full", shape=shape, layout=layout, dtype=None, fill=fill_value, device=device)


def _like(operator: str, data, fill=None, value=None, dtype=None, device=None):
    target = torch_dtype(dtype) if dtype is not None else None
    if target is not None and target not in _VALUE_TYPES:
        raise TypeError(f"{PREFIX}: {operator}: unsupported type {target}")

    def run(ctx, op, x, *filler):
        out_type = target or x.dtype
        if filler:
            return convert_sat(_broadcast_fill(operator, _tensor(filler[0]), x.shape).contiguous(), out_type)
        return convert_sat(torch.full(tuple(x.shape), value, dtype=torch.int64), out_type)
    inputs = [data] + ([fill] if fill is not None else [])
    return _one(Op(operator[3:], run, inputs, {}, device=_cpu_only(operator, inputs, device),
                   layouts=(data.layout(),), fusable=False))


@operator("zeros_like", "ZerosLike")
def zeros_like(data_like, *, dtype=None, device=None, **args):
    """``fn.zeros_like``: zeros of the input's shape, layout and type (or ``dtype``)."""
    check_args("fn.zeros_like", args, set())
    return _like("fn.zeros_like", data_like, value=0, dtype=dtype, device=device)


@operator("ones_like", "OnesLike")
def ones_like(data_like, *, dtype=None, device=None, **args):
    """``fn.ones_like``: ones of the input's shape, layout and type (or ``dtype``)."""
    check_args("fn.ones_like", args, set())
    return _like("fn.ones_like", data_like, value=1, dtype=dtype, device=device)


@operator("full_like", "FullLike")
def full_like(data_like, fill_value, *, device=None, **args):
    """``fn.full_like``: ``fill_value`` over the first input's shape, in its type and layout."""
    check_args("fn.full_like", args, set())
    return _like("fn.full_like", data_like, fill=fill_value, device=device)


# ------------------------------------------------------------------------------------------ element_extract

@operator("element_extract", "ElementExtract")
def element_extract(data, *, element_map, device=None, **args):
    """``fn.element_extract``: the frames ``element_map`` of a sequence (layout starting with "F", or none), one
    output each, laid out as a frame."""
    check_args("fn.element_extract", args, set())
    indices = _constant_axes("fn.element_extract", element_map, "element_map")
    if not indices:
        raise ValueError(f"{PREFIX}: fn.element_extract needs element_map")
    if any(i < 0 for i in indices):
        raise ValueError(f"{PREFIX}: fn.element_extract: negative indices in element_map are not allowed; "
                         f"got {indices}")
    in_layout = data.layout()
    if in_layout and not in_layout.startswith("F"):
        raise ValueError(f"{PREFIX}: fn.element_extract: the input's layout must describe a sequence (start with "
                         f"'F'); got {in_layout!r}")

    def run(ctx, op, x):
        if x.dim() < 2:
            raise ValueError(f"{PREFIX}: fn.element_extract: the input needs at least two dimensions (frames and "
                             f"the frame's); got {list(x.shape)}")
        if max(indices) >= x.shape[0]:
            raise ValueError(f"{PREFIX}: fn.element_extract: index {max(indices)} of element_map is out of bounds "
                             f"for a sequence of {x.shape[0]} frames")
        return tuple(x[i].clone() for i in indices)
    return _one(Op("element_extract", run, [data], {}, device=_device([data], device), num_outputs=len(indices),
                   layouts=(in_layout[1:],) * len(indices), fusable=False))


# --------------------------------------------------------------------------------------------- get_property

def _source_reader(node: DataNode):
    """The ``fn.readers.file`` whose file names DALI's source_info gives for ``node``'s samples, None where it gives
    an empty string (external sources, constants, a reader's labels), or raises where fastload cannot tell.
    DALI's executor hands each output the source info of its inputs (the first that has one)."""
    op = node.source
    if op is None or op.name == "external_source" or not op.inputs:
        if isinstance(op, ReaderOp):
            if op.name != "readers.file":
                raise NotImplementedError(f"{PREFIX}: fn.get_property(key='source_info') of {op.name}'s outputs is "
                                          f"not supported (only fn.readers.file's file names)")
            return op if node.index == 0 else None
        return None
    for given in op.inputs:
        reader = _source_reader(given)
        if reader is not None:
            return reader
    return None


@operator("get_property", "GetProperty")
def get_property(data, *, key, device=None, **args):
    """``fn.get_property``: the input's ``"layout"``, or its ``"source_info"`` (the file name fn.readers.file read
    it from; empty for external sources), as uint8 bytes."""
    check_args("fn.get_property", args, set())
    if key == "layout":
        value = torch.tensor(list(data.layout().encode()), dtype=torch.uint8)
        return _one(Op("get_property", lambda ctx, op, x: value.clone(), [data], {}, device=_device([data], device),
                       fusable=False))
    if key != "source_info":
        raise ValueError(f"{PREFIX}: fn.get_property: unsupported property key {key!r} (DALI's are 'layout' and "
                         f"'source_info')")
    reader = _source_reader(data)

    def run(ctx, op, x):
        if reader is None:
            return torch.zeros(0, dtype=torch.uint8)
        if set(ctx.readers) != {reader.id}:
            raise NotImplementedError(f"{PREFIX}: fn.get_property(key='source_info') is supported where the "
                                      f"pipeline reads with one fn.readers.file and no external source")
        return torch.tensor(list(reader.reader.names[ctx.index].encode()), dtype=torch.uint8)
    return _one(Op("get_property", run, [data], {}, device=_device([data], device), fusable=False))
