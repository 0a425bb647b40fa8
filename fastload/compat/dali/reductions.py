"""DALI's reductions: ``fn.reductions.{min, max, sum, mean, mean_square, rms, std_dev, variance}``.

Matched against real DALI 2.4's CPU operators (tests/compat/test_dali_reductions.py); the rules measured
there (and read in DALI's CPU reduce kernel):

- Axes: ``axes`` (negative counted from the end) or ``axis_names`` (letters of the input's layout), not
  both; none given reduces every axis; ``axes=[]`` reduces none (each value preprocessed and normalised
  alone). The output drops the reduced axes (a full reduction is a scalar) and their layout letters, or
  keeps them as extent-1 axes and the whole layout with ``keep_dims``.
- Types: the inputs are the integer types and float32 (float16, float64 and bool are refused, as DALI
  refuses them). ``min``/``max`` keep the input's type. ``sum`` gives the widest type of the input's kind
  (uint64 for unsigned, int64 for signed, float32 for float32) unless ``dtype`` is the input's type, that
  type or float32. ``mean`` and ``rms`` give float32 unless ``dtype`` is the input's type; ``mean_square``
  float32 unless ``dtype`` is its kind's widest type (uint64, int64). ``std_dev`` and ``variance`` give float32
  (they have no ``dtype``).
- Squares (mean_square, rms) are C++'s: a uint16 square above 2**31 wraps negative in int, as DALI's.
- Integers accumulate in the output type, wrapping (a uint8 sum with ``dtype=UINT8`` is the sum modulo
  256), exactly. A mean in an integer type is that wrapped sum times the float32 ``1 / n``, truncated toward
  zero (C++'s conversion), not rounded; an integer mean_square or rms likewise sums the squares in the output
  type (wrapping), and rms takes the square root before truncating (a negative wrapped sum's NaN converts as
  C++'s cast does). Float results are float32 sums times float32 ``1 / n`` (DALI sums pairwise in float32;
  fastload in float64, so results agree to float32 rounding, not bit for bit).
- ``std_dev``/``variance`` take the mean as a second input, float32, with the output's shape (the reduced
  axes dropped or kept); ``ddof`` subtracts from ``n``: ``n - ddof == 0`` gives inf, as DALI's ``1 / 0``.
  DALI reads a mean of another shape past its end (values vary from run to run); fastload refuses it.
"""

from __future__ import annotations

import numpy as np
import torch

from ..engine.graph import Op
from .operators import _device, _one, check_args
from .spec import operator
from .types import torch_dtype

_INTEGER = (torch.uint8, torch.int8, torch.uint16, torch.int16, torch.uint32, torch.int32, torch.uint64,
            torch.int64)
_SUPPORTED = (*_INTEGER, torch.float32)


def _accumulator(dtype: torch.dtype) -> torch.dtype:
    """``sum``'s default output type: the widest of the input's kind."""
    if dtype.is_floating_point:
        return torch.float32
    return torch.int64 if dtype.is_signed else torch.uint64


def _numpy_type(dtype: torch.dtype):
    return torch.empty((), dtype=dtype).numpy().dtype


def reduced_axes(operator: str, ndim: int, layout: str, axes, axis_names) -> tuple[int, ...]:
    """The axes a reduction of an ``ndim``-dimensional sample reduces, sorted (DALI's checks, named)."""
    if axes is not None and axis_names is not None:
        raise ValueError(f"fastload.compat.dali: {operator}: arguments axes and axis_names are mutually exclusive")
    if axis_names is not None:
        missing = [name for name in axis_names if name not in (layout or "")]
        if missing:
            raise ValueError(f"fastload.compat.dali: {operator}: axis_names {axis_names!r}: axis "
                             f"{missing[0]!r} is not in the input's layout {layout!r}")
        chosen = [layout.index(name) for name in axis_names]
    elif axes is not None:
        chosen = []
        for axis in ([axes] if isinstance(axes, int) else axes):
            axis = int(axis)
            if not -ndim <= axis < ndim:
                raise ValueError(f"fastload.compat.dali: {operator}: axis index out of range: {axis} not in "
                                 f"[{-ndim},{ndim - 1}]")
            chosen.append(axis + ndim if axis < 0 else axis)
    else:
        chosen = list(range(ndim))
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"fastload.compat.dali: {operator}: duplicate axis in {chosen}")
    return tuple(sorted(chosen))


def _output_layout(layout: str, axes, axis_names, keep_dims: bool) -> str:
    """The output's layout: the input's less the reduced axes' letters (all kept with keep_dims). Known at
    definition time only where the reduced axes are (a layout and named or given axes)."""
    if not layout or keep_dims:
        return layout or ""
    ndim = len(layout)
    try:
        chosen = reduced_axes("reduction", ndim, layout, axes, axis_names)
    except ValueError:
        return ""  # the error is raised, with the operator's name, when the sample runs
    return "".join(c for i, c in enumerate(layout) if i not in chosen)


def _norm(count: int) -> np.float32:
    """DALI's ``1.0 / n`` stored in a float32 (inf for n == 0)."""
    with np.errstate(divide="ignore"):
        return np.float32(np.float64(1.0) / np.float64(count))


def reduce_sample(kind: str, x: torch.Tensor, axes: tuple[int, ...], keep_dims: bool, dtype: torch.dtype | None,
                  mean: torch.Tensor | None = None, ddof: int = 0) -> torch.Tensor:
    """One sample reduced (``kind``: min, max, sum, mean, mean_square, rms, std_dev, variance) along ``axes``
    (sorted) to ``dtype`` (sum and mean; None: DALI's default), by the rules in the module docstring."""
    a = x.cpu().numpy()
    count = int(np.prod([a.shape[i] for i in axes], dtype=np.int64)) if axes else 1
    if kind in ("min", "max"):
        out = (a.min if kind == "min" else a.max)(axis=axes, keepdims=keep_dims) if axes else a.copy()
        if axes and a.size == 0:
            raise ValueError(f"fastload.compat.dali: fn.reductions.{kind} of an empty sample")
    elif kind == "sum" or (kind == "mean" and dtype is not None and dtype != torch.float32):
        target = _numpy_type(dtype)
        if target.kind == "f":
            out = np.sum(a, axis=axes, keepdims=keep_dims, dtype=np.float64).astype(np.float32)
        else:
            with np.errstate(over="ignore"):
                out = np.sum(a, axis=axes, keepdims=keep_dims, dtype=target)  # wraps in the output type
        if kind == "mean":  # an integer mean: the wrapped sum times float32 1/n, truncated toward zero
            scaled = np.asarray(out).astype(np.float32) * _norm(count)
            out = np.trunc(scaled).astype(target)
    elif kind in ("mean_square", "rms") and dtype is not None and dtype != torch.float32:
        target = _numpy_type(dtype)  # the squares summed in the output type (wrapping), times float32 1/n,
        with np.errstate(over="ignore", invalid="ignore"):  # (rms: its square root), truncated toward zero
            squares = _square(a).astype(target)
            total = np.sum(squares, axis=axes, keepdims=keep_dims, dtype=target) if axes else squares
            scaled = np.asarray(total).astype(np.float32) * _norm(count)
            out = np.trunc(np.sqrt(scaled) if kind == "rms" else scaled).astype(target)
    else:
        if kind == "mean":
            values = a.astype(np.float64)
        elif kind in ("mean_square", "rms"):
            values = _square(a).astype(np.float64)
        else:
            values = (a.astype(np.float32) - np.asarray(mean, dtype=np.float32)).astype(np.float64) ** 2
        total = np.sum(values, axis=axes, keepdims=keep_dims) if axes else values
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.asarray(total).astype(np.float32) * _norm(count - (ddof if kind in ("std_dev", "variance")
                                                                         else 0))
            if kind in ("rms", "std_dev"):
                out = np.sqrt(out)
        out = np.asarray(out, dtype=np.float32)
    return torch.from_numpy(np.array(out))  # (ascontiguousarray would make a scalar 1-D)


def _square(a: np.ndarray) -> np.ndarray:
    """``x * x`` as C++ computes it in DALI's kernel: types narrower than int promote to int (32 bits, so
    a uint16 square above 2**31 wraps negative), int32 and uint32 widen to 64 bits, the rest keep their type
    (wrapping)."""
    wider = {1: np.int32, 2: np.int32}.get(a.dtype.itemsize) if a.dtype.kind in "iu" else None
    if a.dtype == np.int32:
        wider = np.int64
    elif a.dtype == np.uint32:
        wider = np.uint64
    values = a.astype(wider) if wider is not None else a
    with np.errstate(over="ignore"):
        return values * values


def _check_input(operator: str, x: torch.Tensor) -> None:
    if x.dtype not in _SUPPORTED:
        raise TypeError(f"fastload.compat.dali: {operator}: unsupported input type {x.dtype} (DALI's reductions "
                        f"take the integer types and float32)")


def _mean_for(operator: str, mean: torch.Tensor, x: torch.Tensor, axes: tuple[int, ...]) -> torch.Tensor:
    """The mean input as the reduced shape with kept axes (what broadcasts against ``x``)."""
    if mean.dtype != torch.float32:
        raise TypeError(f"fastload.compat.dali: {operator}: the mean input must be float32 (fn.reductions.mean's "
                        f"output), got {mean.dtype}")
    kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    dropped = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    shape = tuple(mean.shape)
    if shape == kept or shape == dropped or (not dropped and shape in ((), (1,))):
        return mean.cpu().reshape(kept)
    raise ValueError(f"fastload.compat.dali: {operator}: the mean input's shape {shape} is not the reduced shape "
                     f"{dropped} (or {kept} with the reduced axes kept); DALI reads such a mean past its end")


def _reduction(kind: str, typed: str | None):
    """The builder of ``fn.reductions.<kind>``. ``typed``: which output types ``dtype`` may name ("sum":
    the input's, its kind's widest, float32; "mean" and "rms": the input's or float32; "mean_square": its kind's
    widest or float32); None: no ``dtype``."""
    operator_name = f"fn.reductions.{kind}"
    with_mean = kind in ("std_dev", "variance")

    def build(data, *more, axes=None, axis_names=None, keep_dims=False, dtype=None, ddof=0, device=None, **args):
        check_args(operator_name, args, set())
        if typed is None and dtype is not None:
            raise TypeError(f"fastload.compat.dali: {operator_name} has no argument dtype")
        if not with_mean and ddof != 0:
            raise TypeError(f"fastload.compat.dali: {operator_name} has no argument ddof")
        if len(more) != (1 if with_mean else 0):
            raise TypeError(f"fastload.compat.dali: {operator_name} takes {2 if with_mean else 1} input(s)"
                            f"{' (the data and its mean)' if with_mean else ''}, got {1 + len(more)}")
        if isinstance(axes, (list, tuple)):
            axes = tuple(int(a) for a in axes)
        if isinstance(axis_names, (list, tuple)):
            axis_names = "".join(axis_names)
        target = torch_dtype(dtype) if dtype is not None else None
        layout = data.layout()
        inputs = [data, *more]
        settings = {"keep_dims": bool(keep_dims), "ddof": int(ddof)}

        def run(ctx, op, x, *mean, keep_dims, ddof):
            _check_input(operator_name, x)
            chosen = reduced_axes(operator_name, x.dim(), layout, axes, axis_names)
            out_type = target
            if typed is not None:
                allowed = {torch.float32, *{"sum": (x.dtype, _accumulator(x.dtype)), "mean": (x.dtype,),
                                            "mean_square": (_accumulator(x.dtype),), "rms": (x.dtype,)}[typed]}
                if out_type is not None and out_type not in allowed:
                    raise TypeError(f"fastload.compat.dali: {operator_name} of {x.dtype} input: dtype {out_type} "
                                    f"is not supported (DALI's: {', '.join(sorted(map(str, allowed)))})")
                if out_type is None:
                    out_type = _accumulator(x.dtype) if typed == "sum" else torch.float32
            m = _mean_for(operator_name, torch.as_tensor(mean[0]), x, chosen) if with_mean else None
            return reduce_sample(kind, x, chosen, keep_dims, out_type, m, ddof)
        return _one(Op(f"reductions.{kind}", run, inputs, settings, device=_device(inputs, device),
                       layouts=(_output_layout(layout, axes, axis_names, bool(keep_dims)),), fusable=False))
    build.__name__ = kind
    extra = {"sum": "; ``dtype``: the input's type, its kind's widest or float32",
             "mean": "; ``dtype``: the input's type or float32",
             "mean_square": "; ``dtype``: its kind's widest or float32",
             "rms": "; ``dtype``: the input's type or float32",
             "std_dev": "; the mean as second input, ``ddof``", "variance": "; the mean as second input, ``ddof``"}
    build.__doc__ = (f"``fn.reductions.{kind}`` of each sample along ``axes``/``axis_names`` (all by default), "
                     f"``keep_dims``{extra.get(kind, '')}.")
    return build


reduce_min = operator("reductions.min", "reductions.Min")(_reduction("min", None))
reduce_max = operator("reductions.max", "reductions.Max")(_reduction("max", None))
reduce_sum = operator("reductions.sum", "reductions.Sum")(_reduction("sum", "sum"))
mean = operator("reductions.mean", "reductions.Mean")(_reduction("mean", "mean"))
mean_square = operator("reductions.mean_square", "reductions.MeanSquare")(_reduction("mean_square", "mean_square"))
rms = operator("reductions.rms", "reductions.RMS")(_reduction("rms", "rms"))
std_dev = operator("reductions.std_dev", "reductions.StdDev")(_reduction("std_dev", None))
variance = operator("reductions.variance", "reductions.Variance")(_reduction("variance", None))
