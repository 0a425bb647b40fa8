"""How the device path splits a batch's JPEGs between the GPU decoder and the reader threads' CPU decoder.

Some images must go to the CPU (the GPU decoder refuses them: not a JPEG,
CMYK, lossless; progressive for the hardware engines). For the others the
choice is a matter of speed, and it is decided by what each side has been
measured to sustain, not by a fixed rule:

* the GPU side's rate ``gpu_rate``: images per second of the batched GPU
  decode calls (images decoded / wall seconds of the call);
* the CPU side's rate ``cpu_rate``: ``cpu_threads`` divided by the seconds
  one image's CPU decode takes on a reader thread, i.e. what the reader
  threads could decode if ``cpu_threads`` of them did nothing else
  (``cpu_threads``: the share of the loader threads that reading and
  drawing leave idle; the device path gives half of them);
* both are exponentially weighted moving averages (``alpha`` = 0.3 per
  measurement), so the split follows a change of load within a few batches.

The split that makes both sides finish a batch at the same time is
proportional to the rates: the CPU's share of a batch is
``cpu_rate / (cpu_rate + gpu_rate)``. The images the GPU cannot take count
against that share first; the rest of it is taken from the images the GPU
could decode, the cheapest to decode on the CPU first -- the smallest
(pixel count), since a CPU decode's cost grows with the pixels while a
batched GPU call's per-image cost does not, and small images are where the
GPU is least efficient. As images are routed one at a time (in the reader
threads, before their batch is complete), "the smallest share s" is the
images at or below the s-quantile of the last ``window`` sizes seen.

Exploring: a side that gets no images is never measured again, so each
side keeps at least ``explore`` (1/32) of the images the GPU could take
while the other side is the faster, and until both sides have been
measured the split starts at ``start`` (1/8 to the CPU). With a GPU far
faster than the CPU, the CPU keeps only that exploring share.

Which side decodes an image can change between runs (the rates are
measured), and the two decoders differ by a few levels at edges; a forced
``decoder=`` (a name or an object) turns balancing off: every image its
backend accepts goes to it.
"""

from __future__ import annotations

import bisect
import collections
import threading


class Balance:
    """The CPU/GPU split of the device path's decoding (module docstring); thread-safe.

    Args:
        cpu_threads: reader threads whose time the CPU side may use for decoding.
        alpha: the weight of a new measurement in each moving average.
        explore: the smallest share of GPU-decodable images either side keeps.
        start: the CPU's share of GPU-decodable images until both sides are measured.
        window: how many recent image sizes the size quantile is taken over.
    """

    def __init__(self, cpu_threads: float, *, alpha: float = 0.3, explore: float = 1 / 32, start: float = 1 / 8,
                 window: int = 512):
        self.cpu_threads = max(float(cpu_threads), 1e-9)
        self.alpha, self.explore = alpha, explore
        self.gpu_rate: float | None = None  # images/s of the batched GPU decode
        self.cpu_seconds: float | None = None  # seconds per image of one CPU decode on a reader thread
        self.share = start  # the CPU's share of the images the GPU could decode
        self._sizes: collections.deque = collections.deque(maxlen=window)
        self._sorted: list = []
        self._lock = threading.Lock()
        self._ties = 0.0  # the fractional images owed to the CPU among sizes tied at the quantile
        self.batches = 0

    @property
    def cpu_rate(self) -> float | None:
        return None if self.cpu_seconds is None else self.cpu_threads / max(self.cpu_seconds, 1e-9)

    def target(self) -> float | None:
        """The CPU's share of all images that equalizes both sides' times: cpu_rate / (cpu_rate + gpu_rate);
        None until both are measured."""
        cpu, gpu = self.cpu_rate, self.gpu_rate
        if cpu is None or gpu is None:
            return None
        return cpu / (cpu + gpu)

    # -- routing, in the reader threads ----------------------------------------------------
    def to_cpu(self, pixels: int) -> bool:
        """Whether an image the GPU could decode, of ``pixels`` pixels, goes to the CPU: it is at or below the
        ``share``-quantile of the recent sizes (ties: the share of the window at or below it decides)."""
        with self._lock:
            if len(self._sizes) == self._sizes.maxlen:
                old = self._sizes[0]
                del self._sorted[bisect.bisect_left(self._sorted, old)]
            self._sizes.append(pixels)
            bisect.insort(self._sorted, pixels)
            share = self.share
            if share <= 0:
                return False
            if share >= 1:
                return True
            below = bisect.bisect_left(self._sorted, pixels)  # sizes strictly smaller
            at = bisect.bisect_right(self._sorted, pixels)  # sizes at or below
            n = len(self._sorted)
            if at / n <= share:
                return True
            if below / n >= share:
                return False
            # ties straddle the quantile: send this size's images to the CPU in the proportion that fills it
            fill = (share * n - below) / (at - below)
            self._ties += fill
            if self._ties >= 1:
                self._ties -= 1
                return True
            return False

    # -- measurements ----------------------------------------------------------------------
    def cpu_done(self, seconds: float) -> None:
        """One image decoded on a reader thread in ``seconds``."""
        with self._lock:
            self.cpu_seconds = _ewma(self.cpu_seconds, seconds, self.alpha)

    def gpu_done(self, images: int, seconds: float) -> None:
        """A batched GPU decode of ``images`` images took ``seconds`` (wall, to completion)."""
        if images <= 0 or seconds <= 0:
            return
        with self._lock:
            self.gpu_rate = _ewma(self.gpu_rate, images / seconds, self.alpha)

    def batch_done(self, images: int, refused: int) -> float:
        """A batch of ``images`` is done, ``refused`` of them ones the GPU cannot take: set the CPU's share of
        the others for the next images from the rates (module docstring); returns that share."""
        with self._lock:
            self.batches += 1
            target = self.target()
            if target is None or images <= 0:
                return self.share
            decodable = images - refused
            if decodable <= 0:
                return self.share
            share = (target * images - refused) / decodable  # the refused ones fill the CPU's share first
            self.share = min(1 - self.explore, max(self.explore, share))
            return self.share


def _ewma(old: float | None, new: float, alpha: float) -> float:
    return new if old is None else (1 - alpha) * old + alpha * new
