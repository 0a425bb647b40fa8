"""Counter-based random numbers: a sample's augmentation is a pure function of (seed, epoch, index, repeat).

Torch's transforms draw from a global generator, so what a sample gets
depends on which worker ran it and in what order. Here every sample owns a
tiny stream keyed by (seed, epoch, sample index): the same sample gets the same
crop and flip whatever the thread count, batch size or world size, and a
resumed run sees exactly what an uninterrupted one would have. ``repeat`` counts
the sample's earlier places in its rank's epoch (0 the first time; a sampler
drawing with replacement, or the padding that fills a last batch, repeats
samples): each copy gets its own augmentation, as each call of torch's
transforms draws anew, and the first copy keeps the stream it would have had
alone (``fastload.order.Order.repeat``); a sample standing in for a failed one
(``on_error="skip"``) draws as its first copy. Copies on different ranks
(DistributedSampler's padding repeats the head of the epoch on the last
ranks) are counted there alone and so draw alike. SplitMix64 is
small, fast in pure Python and passes BigCrush as a stream generator.
``draw_resized_crop`` (``fastload._jpeg``, C) draws a RandomResizedCrop's box
and flips from these streams with the very values ``fastload.transforms``
draws in Python, without holding the GIL for ~10 us.
"""

from __future__ import annotations

import numpy as np

try:  # the same streams in C, for the draws a loader thread makes per sample (Plan.draw)
    from ._jpeg import draw_resized_crop
except ImportError:  # built without libjpeg headers: every draw is made here
    draw_resized_crop = None

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


class SampleRandom:
    """The random stream of one sample in one epoch."""

    __slots__ = ("_state",)

    def __init__(self, seed: int, epoch: int, index: int, repeat: int = 0):
        state = _mix((seed & _MASK) + _GOLDEN)
        state = _mix(state ^ (((epoch & _MASK) + 2 * _GOLDEN) & _MASK))
        state = _mix(state ^ (((index & _MASK) + 3 * _GOLDEN) & _MASK))
        self._state = _mix(state ^ (((repeat & _MASK) + 5 * _GOLDEN) & _MASK)) if repeat else state

    def fork(self, salt: int) -> "SampleRandom":
        """An independent stream keyed by this one's current state and ``salt``: a sample's stream per
        operator (fastload.compat.dali), the same whether the operator runs alone or fused in a plan."""
        child = SampleRandom.__new__(SampleRandom)
        child._state = _mix(self._state ^ _mix(((salt & _MASK) + 4 * _GOLDEN) & _MASK))
        return child

    def random(self) -> float:
        """A float uniform in [0, 1)."""
        self._state = (self._state + _GOLDEN) & _MASK
        return (_mix(self._state) >> 11) * (1.0 / (1 << 53))

    def randoms(self, count: int) -> np.ndarray:
        """``count`` floats uniform in [0, 1), float64: the next ``count`` values ``random()`` would give, in
        one vectorised pass (SplitMix64's steps wrap mod 2**64 as numpy's uint64 does), not ``count`` calls."""
        if count <= 0:
            return np.zeros(0)
        states = np.uint64(self._state) + np.arange(1, count + 1, dtype=np.uint64) * np.uint64(_GOLDEN)
        self._state = int(states[-1])
        z = (states ^ (states >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))

    def uniform(self, low: float, high: float) -> float:
        return low + (high - low) * self.random()

    def randint(self, low: int, high: int) -> int:
        """An int in [low, high), like torch.randint."""
        return low + min(int(self.random() * (high - low)), high - low - 1)
