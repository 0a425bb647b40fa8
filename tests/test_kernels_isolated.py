"""``kernels/`` (installed as ``fastload.kernels``) imports nothing from the rest of fastload.

A kernel and its plain-torch reference are tested, or reused, alone; the
package docstring promises it. Checked twice: statically, every import
statement in kernels/*.py, and by importing every kernels module in a fresh
interpreter where ``fastload`` is an empty stand-in package (so fastload's
own __init__ does not run) and then listing the fastload modules loaded:
only the stand-in and the kernels may be there.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
MODULES = sorted(path.stem for path in KERNELS.glob("*.py") if path.stem != "__init__")


def _is_kernels(name: str) -> bool:
    return name == "fastload.kernels" or name.startswith("fastload.kernels.")


def test_kernels_import_statements_name_nothing_from_fastload():
    assert {"augment", "normalize"} <= set(MODULES)
    offending = []
    for path in sorted(KERNELS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level > 1:  # "from .. import x": above kernels/, i.e. fastload itself
                    offending.append(f"{path.name}:{node.lineno}: from {'.' * node.level}{node.module or ''}")
                    continue
                names = [node.module or ""] if node.level == 0 else []
            else:
                continue
            offending += [f"{path.name}:{node.lineno}: {name}" for name in names
                          if (name == "fastload" or name.startswith("fastload.")) and not _is_kernels(name)]
    assert not offending, f"kernels/ imports from fastload: {offending}"


_IMPORT_ALONE = """
import importlib, importlib.util, json, sys, types

kernels = sys.argv[1]
stub = types.ModuleType("fastload")
stub.__path__ = []  # a package whose __init__ imports nothing, unlike the real fastload/__init__.py
sys.modules["fastload"] = stub
spec = importlib.util.spec_from_file_location("fastload.kernels", kernels + "/__init__.py",
                                              submodule_search_locations=[kernels])
package = importlib.util.module_from_spec(spec)
sys.modules["fastload.kernels"] = package
spec.loader.exec_module(package)
for name in sys.argv[2:]:
    importlib.import_module("fastload.kernels." + name)
print(json.dumps(sorted(m for m in sys.modules if m == "fastload" or m.startswith("fastload."))))
"""


def test_kernels_import_alone_without_the_rest_of_fastload():
    result = subprocess.run([sys.executable, "-c", _IMPORT_ALONE, str(KERNELS), *MODULES],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert {f"fastload.kernels.{name}" for name in MODULES} <= set(loaded)
    assert [m for m in loaded if m != "fastload" and not _is_kernels(m)] == []
