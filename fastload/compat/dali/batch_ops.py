"""DALI's operators over a whole batch: ``fn.permute_batch`` and ``fn.batch_permutation``.

Each is a ``BatchOp`` (``engine/graph.py``): a sample's run stops where it reaches one, and once every
sample of the batch has got there, the op runs once over the batch and the samples' runs go on
(``Graph.finish_batch``, in the job's finish). Measured against real DALI 2.4 on the CPU
(tests/compat/test_dali_batch_ops.py):

- ``permute_batch``: output sample ``i`` is input sample ``indices[i]`` (a copy), with the input's type and
  layout; ``indices`` is a list of ints or an argument input of int32 scalars (0-d; DALI refuses other
  types and shapes). Too few or too many indices for the batch, or one outside ``[0, batch)``, is a
  RuntimeError, as in DALI.
- ``batch_permutation``: one int32 scalar per sample, a permutation of ``range(batch)`` (with
  ``allow_repetitions``, each drawn from it on its own); ``no_fixed_points`` keeps ``out[i] != i``, except for
  a batch of one, which DALI leaves ``[0]``. DALI's generator is not reproduced: the draws are fastload's,
  from the batch's samples' streams (the pipeline's seed or the op's own ``seed``), so one seed gives one
  permutation per batch; permutations without fixed points are drawn uniformly among them. CPU only, as in
  DALI.
- In a conditional's branch (or after ``fn._conditional.split``) either runs on the samples that take the
  branch, in batch order, as DALI's split batch: ``indices`` index that sub-batch, and batch_permutation
  permutes it.
"""

from __future__ import annotations

import numpy as np
import torch

from ..engine.graph import BatchOp
from .operators import _device, _one, _seeded, check_args
from .spec import operator


@operator("permute_batch", "PermuteBatch")
def permute_batch(data, *, indices, device=None, **args):
    """``fn.permute_batch``: ``out[i] = data[indices[i]]`` over the batch."""
    check_args("fn.permute_batch", args, set())
    if not hasattr(indices, "source"):  # a constant list (an argument input is checked per batch)
        listed = [indices] if isinstance(indices, int) else list(indices)
        if not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in listed):
            raise TypeError(f"fn.permute_batch: indices must be ints (or a batch of int32 scalars), not {indices!r}")
        indices = [int(i) for i in listed]

    def run(ctxs, op, samples, indices):
        chosen = _indices(indices, len(samples))
        return [samples[k].clone() for k in chosen]
    return _one(BatchOp("permute_batch", run, [data], {"indices": indices}, device=_device([data], device),
                        layouts=(data.layout(),)))


def _indices(indices, size: int) -> list[int]:
    """The batch's indices, from a list of ints or the samples of an argument input, checked as DALI does."""
    if indices and isinstance(indices[0], torch.Tensor):
        bad = [tuple(t.shape) for t in indices if t.dim() != 0] or [t.dtype for t in indices if t.dtype != torch.int32]
        if bad:
            raise RuntimeError(f"fn.permute_batch: indices must be a batch of int32 scalars (0-d), not {bad[0]} "
                               f"(DALI refuses it too)")
        indices = [int(t) for t in indices]
    if len(indices) != size:
        raise RuntimeError(f"fn.permute_batch: the number of sample indices {len(indices)} does not match the "
                           f"current batch size, which is {size}")
    for at, k in enumerate(indices):
        if not 0 <= k < size:
            raise RuntimeError(f"fn.permute_batch: sample index out of range: indices[{at}] = {k} is not a valid "
                               f"index for an input batch of {size} tensors")
    return indices


@operator("batch_permutation", "BatchPermutation")
def batch_permutation(*, allow_repetitions=False, no_fixed_points=False, device="cpu", **args):
    """``fn.batch_permutation``: random indices into the batch, one int32 scalar per sample."""
    check_args("fn.batch_permutation", args, set())
    if device != "cpu":
        raise ValueError("fn.batch_permutation runs on the CPU (device='cpu'), as in DALI")
    repeat, derange = bool(allow_repetitions), bool(no_fixed_points)

    def run(ctxs, op):
        size, rng = len(ctxs), _batch_random(ctxs, op)
        if size == 1:
            drawn = [0]
        elif repeat:
            drawn = rng.integers(0, size - 1 if derange else size, size)
            if derange:  # drawn among the others: past one's own place, one up
                drawn = drawn + (drawn >= np.arange(size))
        else:
            drawn = rng.permutation(size)
            while derange and (drawn == np.arange(size)).any():  # uniform among the derangements
                drawn = rng.permutation(size)
        return [torch.tensor(int(k), dtype=torch.int32) for k in drawn]
    return _one(_seeded(BatchOp("batch_permutation", run, [], {}, device="cpu"), args))


def _batch_random(ctxs, op) -> np.random.Generator:
    """The batch's generator for ``op``: keyed by each of its samples' streams for the op (so by the seed, and
    the samples' epoch and places), the same wherever the batch runs."""
    return np.random.default_rng([ctx.rng(op).randint(0, 1 << 32) for ctx in ctxs])
