"""DALI's ``fn.transforms``: affine matrices (float32) for 1-D, 2-D and 3-D points, built as DALI builds them.

An n-D matrix is (n, n+1): it maps a point ``p`` to ``M[:, :n] @ p + M[:, n]``. The dimensionality is
the arguments' (an ``offset`` of 3 values: 3-D; a single value: 1-D, as in DALI), or ``ndim``, or the
input ``T``'s; rotation is 2-D, or 3-D about an ``axis``; shear takes 2 values (2-D) or 6 (3-D).
``center`` makes scale, rotation and shear act about that point. An optional input ``T`` (another
transform's output) is combined with the new one: the new transform is applied after ``T``
(``new @ T``), or before it with ``reverse_order=True`` (``T @ new``). ``combine`` applies its inputs in
order (the first first). ``crop`` maps a box onto a box. Angles are in degrees.

The matrices are computed as DALI's transform.h computes them, in float32: the angle times
float32(pi / 180), the C library's cosf/sinf, Rodrigues' terms in DALI's order, products term by term
(``_matmul32``). They equal DALI's to the bit (a shear's ``angles`` through glibc's tanf, as DALI).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..float32 import libm_float
from ..engine.graph import DataNode, Op
from .operators import _device, _one, check_args
from .spec import operator


def _vector(value, name: str, n: int | None = None) -> torch.Tensor:
    """``value`` as float64 values: ``n`` of them (a single value repeated), or as many as given."""
    v = torch.as_tensor(value, dtype=torch.float64).reshape(-1)
    if n is not None and v.numel() == 1:
        v = v.repeat(n)
    if n is not None and v.numel() != n:
        raise ValueError(f"fastload.compat.dali: fn.transforms {name} must have {n} values, got {v.numel()}")
    if v.numel() not in (1, 2, 3):
        raise NotImplementedError(f"fastload.compat.dali: fn.transforms {name} of {v.numel()} values: only 1-D, "
                                  f"2-D and 3-D transforms are supported")
    return v


def _square(m: torch.Tensor) -> torch.Tensor:
    m = torch.as_tensor(m, dtype=torch.float64)
    n = m.shape[0] if m.dim() == 2 else 0
    if m.dim() != 2 or tuple(m.shape) != (n, n + 1):
        raise ValueError(f"fastload.compat.dali: fn.transforms expects (n, n+1) matrices, got {tuple(m.shape)}")
    last = torch.zeros(1, n + 1, dtype=torch.float64)
    last[0, n] = 1.0
    return torch.cat([m, last])


def _about(linear: torch.Tensor, center) -> torch.Tensor:
    """The square matrix applying ``linear`` (n x n) about ``center``: x -> L (x - c) + c."""
    n = linear.shape[0]
    m = torch.eye(n + 1, dtype=torch.float64)
    m[:n, :n] = linear
    if center is not None:  # in float32, as DALI computes it (the cancellation is part of its result)
        c, lin = _vector(center, "center", n).float(), linear.float()
        m[:n, n] = (c - lin @ c).double()
    return m


def _matmul32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in float32, each entry summed term by term in order (DALI's mat product; a BLAS matmul may
    fuse or reorder the terms)."""
    a, b = a.to(torch.float32), b.to(torch.float32)
    out = a[:, :1] * b[:1, :]
    for k in range(1, a.shape[1]):
        out = out + a[:, k:k + 1] * b[k:k + 1, :]
    return out.double()


def _chain(new: torch.Tensor, previous, reverse_order: bool) -> torch.Tensor:
    new = new.to(torch.float32).double()  # DALI holds each transform in float32 before combining
    if previous is not None:
        prev = _square(previous)
        if prev.shape != new.shape:
            raise ValueError(f"fastload.compat.dali: fn.transforms: a {new.shape[0] - 1}-D transform cannot be "
                             f"chained onto a {prev.shape[0] - 1}-D one")
        new = _matmul32(prev, new) if reverse_order else _matmul32(new, prev)
    return new[:-1].to(torch.float32)


def _transform(operator: str, make, names: set):
    def build(T=None, *, device=None, reverse_order=False, **args):
        check_args(f"fn.transforms.{operator}", args, names)
        inputs = [T] if T is not None else []

        def run(ctx, op, *values, **a):
            previous = values[0] if values else None
            hint = int(torch.as_tensor(previous).shape[0]) if previous is not None else None
            return _chain(make(hint=hint, **a), previous, bool(reverse_order))
        for arg in args:  # DataNode arguments are per sample; plain values constant
            if not isinstance(args[arg], DataNode):
                args[arg] = tuple(args[arg]) if isinstance(args[arg], (list, tuple)) else args[arg]
        return _one(Op(f"transforms.{operator}", run, inputs, dict(args), device=_device(inputs, device),
                       layouts=("",), fusable=False))
    build.__name__ = operator
    build.__doc__ = f"``fn.transforms.{operator}`` ({', '.join(sorted(names))}; per-sample arguments allowed)."
    return build


def _dims(value, ndim, hint) -> int:
    """The dimensionality: ``ndim`` when given, else the argument's length when above 1, else the input's."""
    if ndim is not None:
        return int(ndim)
    count = torch.as_tensor(value).numel()
    return count if count > 1 or hint is None else hint


def _translation(offset, ndim=None, hint=None):
    n = _dims(offset, ndim, hint)
    m = torch.eye(n + 1, dtype=torch.float64)
    m[:n, n] = _vector(offset, "offset", n)
    return m


def _scale(scale, center=None, ndim=None, hint=None):
    n = _dims(scale, ndim, hint)
    if ndim is None and torch.as_tensor(scale).numel() == 1 and center is not None:
        n = torch.as_tensor(center).numel()  # a scalar scale about an n-D centre
    return _about(torch.diag(_vector(scale, "scale", n)), center)


def _radians32(angle) -> np.float32:
    """DALI's deg2rad: the angle in float32 times float32(pi / 180)."""
    return np.float32(float(torch.as_tensor(angle).reshape(-1)[0])) * np.float32(math.pi / 180)


def _rotation(angle, axis=None, center=None, hint=None):
    # DALI's rotation2D/rotation3D (dali/core/geom/transform.h): float32 cosf/sinf of the float32 angle
    # (measured: a rounded double cos/sin differs from its matrices for a third of angles)
    a = _radians32(angle)
    c, s = libm_float("cos", a), libm_float("sin", a)
    if axis is None:
        return _about(torch.tensor([[float(c), -float(s)], [float(s), float(c)]], dtype=torch.float64), center)
    k = np.asarray(_vector(axis, "axis", 3).numpy(), dtype=np.float32)
    if not (k != 0).any():
        raise ValueError("fastload.compat.dali: fn.transforms.rotation: the axis must not be zero")
    if a == 0:
        return _about(torch.eye(3, dtype=torch.float64), center)
    if (k != 0).sum() == 1:  # one non-zero component: exactly +-1, as DALI forces it
        k = np.sign(k).astype(np.float32)
    else:  # divided by its float32 length, in float32
        k = k / np.sqrt(k[0] * k[0] + k[1] * k[1] + k[2] * k[2])
    u, v, w = k
    one_c = np.float32(1) - c
    uu, vv, ww, uv, uw, vw = u * u, v * v, w * w, u * v, u * w, v * w
    # Rodrigues' rotation, term by term as DALI's rotation3D writes it
    rows = [[uu + (vv + ww) * c, uv * one_c - w * s, uw * one_c + v * s],
            [uv * one_c + w * s, vv + (uu + ww) * c, vw * one_c - u * s],
            [uw * one_c - v * s, vw * one_c + u * s, ww + (uu + vv) * c]]
    return _about(torch.tensor([[float(np.float32(x)) for x in row] for row in rows], dtype=torch.float64), center)


def _shear(shear=None, angles=None, center=None, hint=None):
    if (shear is None) == (angles is None):
        raise ValueError("fastload.compat.dali: fn.transforms.shear needs exactly one of shear and angles")
    v = torch.as_tensor(shear if shear is not None else angles, dtype=torch.float64).reshape(-1)
    if v.numel() not in (2, 6):
        raise NotImplementedError(f"fastload.compat.dali: fn.transforms.shear takes 2 values (2-D) or 6 (3-D), "
                                  f"got {v.numel()}")
    if shear is None:  # DALI: tanf of the float32 radians
        v32 = np.asarray(v.numpy(), dtype=np.float32) * np.float32(math.pi / 180)
        v = torch.from_numpy(libm_float("tan", v32)).double()
    s = v
    n = 2 if v.numel() == 2 else 3
    linear = torch.eye(n, dtype=torch.float64)
    linear[~torch.eye(n, dtype=torch.bool)] = s  # row by row: the off-diagonal entries
    return _about(linear, center)


translation = operator("transforms.translation", "transforms.Translation",
                       aliases={"transform_translation": "TransformTranslation"})(
    _transform("translation", _translation, {"offset", "ndim"}))
scale = operator("transforms.scale", "transforms.Scale")(_transform("scale", _scale, {"scale", "center", "ndim"}))
rotation = operator("transforms.rotation", "transforms.Rotation")(
    _transform("rotation", _rotation, {"angle", "axis", "center"}))
shear = operator("transforms.shear", "transforms.Shear")(_transform("shear", _shear, {"shear", "angles", "center"}))


def _crop_matrix(from_start, from_end, to_start, to_end, absolute: bool) -> torch.Tensor:
    """The (n, n+1) float32 matrix mapping [from_start, from_end] onto [to_start, to_end] per dimension,
    in float32 as DALI computes it (measured: its offsets carry float32 rounding, 0.2 * 25 - 5 = 4.8e-7).
    The dimensionality is the longest argument's; single values repeat (all single: 1-D, as in DALI)."""
    args = [np.asarray(torch.as_tensor(v, dtype=torch.float64).reshape(-1).numpy(), dtype=np.float32)
            for v in (from_start, from_end, to_start, to_end)]
    ndim = max(a.size for a in args)
    if any(a.size not in (1, ndim) for a in args):
        raise ValueError(f"fastload.compat.dali: fn.transforms.crop: arguments of {[a.size for a in args]} values "
                         f"do not agree on the number of dimensions")
    f_start, f_end, t_start, t_end = (np.broadcast_to(a, (ndim,)).copy() for a in args)
    if absolute:  # start and end swapped where start > end
        f_start, f_end = np.minimum(f_start, f_end), np.maximum(f_start, f_end)
        t_start, t_end = np.minimum(t_start, t_end), np.maximum(t_start, t_end)
    scale = (t_end - t_start) / (f_end - f_start)
    m = np.zeros((ndim, ndim + 1), dtype=np.float32)
    m[np.arange(ndim), np.arange(ndim)] = scale
    m[:, ndim] = t_start - f_start * scale
    return torch.from_numpy(m)


@operator("transforms.crop", "transforms.Crop")
def crop(T=None, *, from_start=(0.0,), from_end=(1.0,), to_start=(0.0,), to_end=(1.0,), absolute=False,
         reverse_order=False, device=None, **args):
    """``fn.transforms.crop``: the affine map of the box [from_start, from_end] onto [to_start, to_end]
    (any dimensionality; per-sample arguments allowed), chained onto ``T`` like the other transforms."""
    check_args("fn.transforms.crop", args, set())
    settings = {}
    for name, value in (("from_start", from_start), ("from_end", from_end), ("to_start", to_start),
                        ("to_end", to_end)):
        settings[name] = value if isinstance(value, DataNode) else tuple(
            torch.as_tensor(value, dtype=torch.float64).reshape(-1).tolist())
    inputs = [T] if T is not None else []

    def run(ctx, op, *values, **a):
        m = _crop_matrix(a["from_start"], a["from_end"], a["to_start"], a["to_end"], bool(absolute))
        return _chain(_square(m), values[0] if values else None, bool(reverse_order))
    return _one(Op("transforms.crop", run, inputs, settings, device=_device(inputs, device), layouts=("",),
                   fusable=False))


@operator("transforms.combine", "transforms.Combine")
def combine(*transforms, device=None, reverse_order=False, **args):
    """``fn.transforms.combine``: the inputs applied in order (the first first), or in reverse order."""
    check_args("fn.transforms.combine", args, set())
    if len(transforms) < 2:
        raise ValueError("fastload.compat.dali: fn.transforms.combine needs at least 2 transforms")

    def run(ctx, op, *values):
        squares = [_square(value) for value in values]
        if any(m.shape != squares[0].shape for m in squares):
            raise ValueError("fastload.compat.dali: fn.transforms.combine: the transforms differ in dimensionality")
        m = torch.eye(squares[0].shape[0], dtype=torch.float64)
        for square in squares:
            m = _matmul32(m, square) if reverse_order else _matmul32(square, m)
        return m[:-1].to(torch.float32)
    return _one(Op("transforms.combine", run, list(transforms), {}, device=_device(transforms, device),
                   layouts=("",), fusable=False))


def _coord_transform(ctx, op, points, M=None, T=None, MT=None):
    p = torch.as_tensor(points).to(torch.float32)
    dim = p.shape[-1]
    m = torch.eye(dim, dtype=torch.float32) if M is None else torch.as_tensor(M, dtype=torch.float32)
    t = torch.zeros(dim, dtype=torch.float32)
    if MT is not None:  # the block matrix [M T] (a fn.transforms output): its last column is T
        mt = torch.as_tensor(MT, dtype=torch.float32)
        if mt.numel() % (dim + 1):
            raise ValueError(f"fastload.compat.dali: fn.coord_transform: MT of {mt.numel()} values does not "
                             f"fit {dim}-D points")
        mt = mt.reshape(-1, dim + 1)
        m, t = mt[:, :dim], mt[:, dim]
    elif m.numel() == 1:  # a scalar: that multiple of the identity
        m = m.reshape(()) * torch.eye(dim, dtype=torch.float32)
    elif m.numel() % dim == 0:
        m = m.reshape(-1, dim)
    else:
        raise ValueError(f"fastload.compat.dali: fn.coord_transform: M of {m.numel()} values does not fit "
                         f"{dim}-D points")
    if T is not None:
        t = torch.as_tensor(T, dtype=torch.float32).reshape(-1).expand(m.shape[0])
    flat = p.reshape(-1, dim)
    out = (flat.unsqueeze(1) * m.unsqueeze(0)).sum(-1) + t
    return out.reshape(*p.shape[:-1], m.shape[0])


@operator("coord_transform", "CoordTransform")
def coord_transform(points, *, M=None, T=None, MT=None, device=None, dtype=None, **args):
    """``fn.coord_transform``: each point ``p`` (the last axis) to ``M @ p + T`` in float32. ``M`` is a
    matrix (rows of D values) or a scalar (a multiple of the identity); ``MT`` the block matrix [M T] (a
    ``fn.transforms`` output). Arguments may be per sample. Output float32 (another ``dtype`` is refused)."""
    if MT is not None and (M is not None or T is not None):
        raise ValueError("fastload.compat.dali: fn.coord_transform: MT excludes M and T")
    check_args("fn.coord_transform", args, set())
    if dtype is not None:
        raise NotImplementedError("fastload.compat.dali: fn.coord_transform does not support argument dtype "
                                  "(float32 output only)")
    settings = {}
    for name, value in (("M", M), ("T", T), ("MT", MT)):
        if value is not None:
            settings[name] = value if isinstance(value, DataNode) else tuple(torch.as_tensor(
                value, dtype=torch.float64).reshape(-1).tolist())
    return _one(Op("coord_transform", _coord_transform, [points], settings, device=_device([points], device),
                   layouts=(points.layout(),), fusable=False))
