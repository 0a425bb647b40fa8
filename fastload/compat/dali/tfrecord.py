"""DALI's ``nvidia.dali.tfrecord``: the feature descriptions ``fn.readers.tfrecord`` takes.

``FixedLenFeature(shape, dtype, default_value)`` and ``VarLenFeature([partial_shape,] dtype, default_value)``
with the types ``int64``, ``string`` and ``float32`` (DALI's numbers for them). DALI 2.4 never uses the
default value: a feature a record lacks gives an uninitialised scalar there, so fastload refuses such a
record by name (``record_readers``).
"""

from __future__ import annotations

from dataclasses import dataclass

int64, string, float32 = 0, 1, 2  # DALI's TFUtil::FeatureType
_TYPES = {int64: "int64", string: "string", float32: "float32"}

__all__ = ["Feature", "FixedLenFeature", "VarLenFeature", "float32", "int64", "string"]


@dataclass(frozen=True)
class Feature:
    """One feature's description: its type, and a fixed ``shape`` or, for a variable-length one, the
    ``partial_shape`` of its inner dimensions (empty: a flat list)."""

    dtype: int
    fixed: bool
    shape: tuple[int, ...]
    default_value: object = None

    def __post_init__(self):
        if self.dtype not in _TYPES:
            raise ValueError(f"tfrecord: unknown feature type {self.dtype!r} (int64 0, string 1, float32 2)")
        if any(int(d) < 0 for d in self.shape):
            raise ValueError(f"tfrecord: a feature's shape {list(self.shape)} has a negative extent")

    @property
    def type_name(self) -> str:
        return _TYPES[self.dtype]


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, int):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def FixedLenFeature(shape, dtype, default_value) -> Feature:  # noqa: N802  (DALI's name)
    """A feature of ``shape`` (``[]``/``()``: a scalar); a string one is its first value's bytes."""
    return Feature(int(dtype), True, _shape(shape), default_value)


def VarLenFeature(*args) -> Feature:  # noqa: N802  (DALI's name)
    """``VarLenFeature(dtype, default_value)``: a flat list of any length; ``VarLenFeature(partial_shape,
    dtype, default_value)``: its values as rows of ``partial_shape``."""
    if len(args) == 2:
        return Feature(int(args[0]), False, (), args[1])
    if len(args) == 3:
        return Feature(int(args[1]), False, _shape(args[0]), args[2])
    raise TypeError(f"tfrecord.VarLenFeature takes (dtype, default_value) or (partial_shape, dtype, "
                    f"default_value), not {len(args)} arguments")
