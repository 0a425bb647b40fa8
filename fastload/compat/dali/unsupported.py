"""How the DALI layer refuses what it does not have: a name looked up on one of its modules (``fn.<op>``,
``ops.<Op>``, ``types.<name>``, an iterator module's) raises ``Unsupported``, naming it and listing what
the module has. ``Unsupported`` is a NotImplementedError (what every refusal here raises) and an
AttributeError, so ``hasattr``, ``getattr(module, name, default)`` and ``from module import submodule``
work as on any module. docs/dali-unsupported.md lists what DALI has and fastload does not
(scripts/dali_unsupported.py writes it from real DALI's modules and ``spec``'s declarations).
"""

from __future__ import annotations

import difflib
import sys
import types
from typing import Callable, Mapping

LISTED = "docs/dali-unsupported.md lists what DALI has and fastload does not"


class Unsupported(NotImplementedError, AttributeError):
    """A DALI name fastload does not have."""


def supported(module_name: str) -> list[str]:
    """The public names module ``module_name`` has: its ``__all__`` where it has one, else its own
    functions, classes, constants and submodules (not what it imports for itself)."""
    module = sys.modules[module_name]
    if hasattr(module, "__all__"):
        return sorted(module.__all__)
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or name == "annotations" or value is refuse:
            continue
        if isinstance(value, types.ModuleType) and not value.__name__.startswith(module_name + "."):
            continue  # torch, numpy, the layer's own modules: imported for itself
        names.append(name)
    return sorted(names)


def refuse(module_name: str, dali_name: str, nearby: Callable[[], list[str]] | None = None,
           reasons: Mapping[str, str] | None = None):
    """A module ``__getattr__`` for ``module_name`` (DALI's ``dali_name``): a missing public name raises
    ``Unsupported`` naming it and what is supported (and, where ``nearby`` lists the whole API's dotted names,
    those whose last part is close to it: ``fn.coin_flp`` names ``fn.random.coin_flip``; where ``reasons``
    gives why that name is refused on purpose, ``"fn.jitter"``: "GPU-only...", the reason); a private or
    dunder one, the usual AttributeError."""
    def __getattr__(name: str):
        if name.startswith("_"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        close = ""
        if nearby is not None:
            names = nearby()
            found = difflib.get_close_matches(name, [n.rpartition(".")[2] for n in names], n=3, cutoff=0.75)
            close = "".join(f"; closest: {', '.join(n for n in names if n.rpartition('.')[2] in found)}"
                            for _ in found[:1])
        why = (reasons or {}).get(f"{dali_name}.{name}")
        raise Unsupported(f"fastload.compat.dali: {dali_name}.{name} is not supported"
                          f"{f' ({why})' if why else ''}; {dali_name} has: "
                          f"{', '.join(supported(module_name))}{close} ({LISTED})")
    return __getattr__
