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
from typing import Callable

try:
    import torchvision  # noqa: F401 -- imported to learn whether it works
    from torchvision.datasets.folder import IMG_EXTENSIONS, find_classes, make_dataset, pil_loader
    AVAILABLE, REASON = True, None
except Exception as error:  # noqa: BLE001 -- ImportError, or the RuntimeError of a build for another torch
    AVAILABLE, REASON = False, f"torchvision cannot be imported ({type(error).__name__}: {error})"

    # torchvision.datasets.folder's, unchanged in meaning (BSD-3-Clause, the torchvision authors)
    IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

    def find_classes(directory) -> tuple[list[str], dict[str, int]]:
        classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
        if not classes:
            raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
        return classes, {name: i for i, name in enumerate(classes)}

    def make_dataset(directory, class_to_idx: dict[str, int] | None = None, extensions=None,
                     is_valid_file: Callable[[str], bool] | None = None,
                     allow_empty: bool = False) -> list[tuple[str, int]]:
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
        for target in sorted(class_to_idx):
            folder = os.path.join(directory, target)
            if not os.path.isdir(folder):
                continue
            for root, _, names in sorted(os.walk(folder, followlinks=True)):
                for name in sorted(names):
                    path = os.path.join(root, name)
                    if is_valid_file(path):
                        instances.append((path, class_to_idx[target]))
                        found.add(target)
        empty = set(class_to_idx) - found
        if empty and not allow_empty:
            message = f"Found no valid file for the classes {', '.join(sorted(empty))}. "
            if extensions is not None:
                message += ("Supported extensions are: "
                            f"{extensions if isinstance(extensions, str) else ', '.join(extensions)}")
            raise FileNotFoundError(message)
        return instances

    def pil_loader(path: str):
        from PIL import Image
        with open(path, "rb") as file:
            image = Image.open(file)
            return image.convert("RGB")
