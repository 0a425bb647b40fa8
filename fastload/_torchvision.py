"""torchvision's pieces that fastload's core uses, or stand-ins where torchvision cannot be imported.

A user's torch is often one torchvision was not built for (a site or
container build, a CPU wheel beside PyPI's CUDA torchvision): there
``import torchvision`` fails (``operator torchvision::nms does not exist``).
fastload's own sources and its fast path need none of torchvision's
compiled code, so they keep working: the folder scan below is torchvision's
(same classes, same order), and ``fastload.transforms`` gives stand-ins of
the transforms its fast path compiles. Anything that truly needs
torchvision (its datasets, running a transform outside the fast path) says
why it is missing (``REASON``).
"""

from __future__ import annotations

import os
import warnings
from typing import Callable

__all__ = ["AVAILABLE", "REASON", "IMG_EXTENSIONS", "DatasetFolder", "default_loader", "find_classes",
           "make_dataset", "list_samples", "pil_loader", "get_image_backend", "InterpolationMode", "v1", "v2",
           "_get_inverse_affine_matrix", "_interpolation_modes_from_int", "_compute_affine_output_size"]


def list_samples(directory, class_to_idx: dict[str, int] | None = None, extensions=None,
                 is_valid_file: Callable[[str], bool] | None = None,
                 allow_empty: bool = False) -> list[tuple[str, int]]:
    """torchvision's ``make_dataset`` (the same samples, in the same order; BSD-3-Clause, the torchvision
    authors), except that a folder that is its own ancestor through a symbolic link (a loop) is not entered
    again: torchvision's walk follows a loop until the path is too long for the system, listing each file
    under it dozens of times. The loops are named in one warning."""
    directory = os.path.expanduser(directory)
    if class_to_idx is None:
        _, class_to_idx = find_classes(directory)
    elif not class_to_idx:
        raise ValueError("'class_to_index' must have at least one entry to collect any samples.")
    if (extensions is None) == (is_valid_file is None):
        raise ValueError("Both extensions and is_valid_file cannot be None or not None at the same time")
    if extensions is not None:
        suffixes = extensions if isinstance(extensions, str) else tuple(extensions)

        def is_valid_file(name: str) -> bool:
            return name.lower().endswith(suffixes)
    instances, found = [], set()
    loops: list[str] = []
    for target in sorted(class_to_idx):
        folder = os.path.join(directory, target)
        if not os.path.isdir(folder):
            continue
        for root, _, names in sorted(_walk(folder, loops)):
            for name in sorted(names):
                path = os.path.join(root, name)
                if is_valid_file(path):
                    instances.append((path, class_to_idx[target]))
                    found.add(target)
    if loops:
        warnings.warn(f"fastload: {len(loops)} symbolic link(s) lead back to a folder above them (a loop), "
                      f"not followed: {', '.join(loops[:5])}{' ...' if len(loops) > 5 else ''}", RuntimeWarning,
                      stacklevel=3)
    empty = set(class_to_idx) - found
    if empty and not allow_empty:
        message = f"Found no valid file for the classes {', '.join(sorted(empty))}. "
        if extensions is not None:
            message += ("Supported extensions are: "
                        f"{extensions if isinstance(extensions, str) else ', '.join(extensions)}")
        raise FileNotFoundError(message)
    return instances


def _walk(top: str, loops: list[str]):
    """``os.walk(top, followlinks=True)``, top down, never entering a folder that is one of its own ancestors
    (by device and inode); each such link is appended to ``loops``."""
    chains = {top: {_identity(top)}}
    for root, folders, names in os.walk(top, followlinks=True):
        chain = chains.pop(root, set())
        kept = []
        for name in folders:
            path = os.path.join(root, name)
            identity = _identity(path)
            if identity is not None and identity in chain:
                loops.append(path)
                continue
            kept.append(name)
            chains[path] = chain | {identity}
        folders[:] = kept
        yield root, folders, names


def _identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


try:
    import torchvision
    from torchvision.datasets.folder import (IMG_EXTENSIONS, DatasetFolder, default_loader, find_classes,
                                             make_dataset, pil_loader)
    from torchvision.transforms import InterpolationMode
    from torchvision import transforms as v1
    from torchvision.transforms import v2
    from torchvision.transforms.functional import _get_inverse_affine_matrix, _interpolation_modes_from_int
    from torchvision.transforms.v2.functional._geometry import _compute_affine_output_size
    AVAILABLE, REASON = True, None
    get_image_backend = torchvision.get_image_backend
except Exception as error:  # noqa: BLE001 -- ImportError, or the RuntimeError of a build for another torch
    AVAILABLE, REASON = False, f"torchvision cannot be imported ({type(error).__name__}: {error})"
    from ._standin_transforms import InterpolationMode, _interpolation_modes_from_int, make
    from ._standin_transforms import affine_unavailable as _compute_affine_output_size
    from ._standin_transforms import affine_unavailable as _get_inverse_affine_matrix
    v1 = v2 = make(REASON)
    warnings.warn(f"fastload: {REASON}; fastload's sources and fast path work without it (fastload.transforms "
                  f"gives stand-ins of the transforms it compiles), the rest needs a torchvision built for this "
                  f"torch", RuntimeWarning, stacklevel=2)

    class DatasetFolder:
        """Without torchvision no dataset is one of its folders: the class only answers isinstance."""

    def get_image_backend() -> str:
        return "PIL"

    # torchvision.datasets.folder's, unchanged in meaning (BSD-3-Clause, the torchvision authors)
    IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

    def find_classes(directory) -> tuple[list[str], dict[str, int]]:
        classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
        if not classes:
            raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
        return classes, {name: i for i, name in enumerate(classes)}

    make_dataset = list_samples

    def pil_loader(path: str):
        from PIL import Image
        with open(path, "rb") as file:
            image = Image.open(file)
            return image.convert("RGB")

    default_loader = pil_loader
