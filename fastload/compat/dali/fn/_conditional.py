"""DALI's ``fn._conditional``: the operators its conditionals are made of, called by name as in DALI's
conditionals tutorial: ``split`` a batch by a per-sample predicate into its true and false samples,
process each side, ``merge`` them back in the batch's order; ``not_`` and ``validate_logical`` for
``not`` / ``and`` / ``or``. Their per-sample rules are ``conditionals``' (the same ones ``if`` on a
DataNode runs with ``enable_conditionals=True``)."""

from __future__ import annotations

from .. import conditionals
from ..conditionals import merge, split, validate_logical  # noqa: F401


def not_(input, *, name=None, preserve=False, bytes_per_sample_hint=None):
    """``fn._conditional.not_``: per sample, ``not`` of a scalar on the CPU (of any type), as a boolean."""
    return conditionals.not_(input, 0)


__all__ = ["split", "merge", "not_", "validate_logical"]
