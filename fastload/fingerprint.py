"""What a resume state was saved over, so that ``load_state_dict`` refuses what it cannot reproduce.

A state says "N batches of this epoch's order were delivered". That is only
true of the same samples in the same order: a folder where one file was
swapped for another of the same count, or a loader with another ``shuffle``,
would deliver some samples twice and others never, silently. So the state
carries a fingerprint of the sample list -- the names and labels, and the
file sizes where the samples are local files -- and of the order settings,
and a mismatch is a ValueError saying which differs.

The sample part costs a hash of the names and one ``stat`` per file (about
1-2 s for ImageNet's 1.28M files from a warm cache): it is computed once per
loader and sample list, not per checkpoint. Datasets without a ``samples``
list (any map-style or iterable dataset) are known by class and length only.
"""

from __future__ import annotations

import hashlib
import os
import warnings


class ResumeStateWarning(UserWarning):
    """A state whose fingerprint is None (how a state saved by an older fastload, which had none, is
    loaded): loaded unchecked."""


def _digest(parts) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(repr(part).encode("utf-8", "surrogateescape"))
        hasher.update(b"\0")
    return hasher.hexdigest()[:32]


def samples_part(dataset) -> dict:
    """The dataset's samples: names and labels and, for local files, sizes; else its class and length."""
    samples = getattr(dataset, "samples", None)
    if not isinstance(samples, list) or not all(isinstance(s, tuple) and len(s) >= 1 for s in samples[:1]):
        try:
            length = len(dataset)
        except TypeError:
            length = None
        return {"dataset": f"{type(dataset).__module__}.{type(dataset).__qualname__}", "length": length}
    names = [sample[0] for sample in samples]
    part = {"count": len(samples), "names": _digest((name, sample[1:]) for name, sample in zip(names, samples))}
    if all(isinstance(name, (str, os.PathLike)) for name in names[:1]) and names and os.path.isfile(names[0]):
        part["sizes"] = _digest(_size(name) for name in names)
    return part


def _size(path) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def check(saved: dict | None, current: dict) -> None:
    """Raise ValueError naming what differs between the state's fingerprint and this loader's."""
    if saved is None:
        warnings.warn("this state's fingerprint of its samples and order is None: loaded unchecked",
                      ResumeStateWarning, stacklevel=3)
        return
    differences = []
    saved_samples, samples = saved.get("samples", {}), current["samples"]
    if saved_samples.get("count") != samples.get("count") or saved_samples.get("length") != samples.get("length"):
        pass  # the schedule's own check words a different size
    elif saved_samples.get("names") != samples.get("names") or saved_samples.get("dataset") != samples.get("dataset"):
        differences.append("the sample list (its names or labels: a file added, removed, renamed or swapped, or "
                           "another dataset)")
    elif "sizes" in saved_samples and "sizes" in samples and saved_samples["sizes"] != samples["sizes"]:
        differences.append("the files' sizes (a file was replaced under the same name)")
    for key, value in current["order"].items():
        if key in saved.get("order", {}) and saved["order"][key] != value:
            differences.append(f"{key}: saved {saved['order'][key]!r}, now {value!r}")
    if differences:
        raise ValueError("load_state_dict: this state cannot be reproduced here, it was saved over other data or "
                         "settings: " + "; ".join(differences))
