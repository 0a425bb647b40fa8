"""Running rocAL's own test scripts (tests/python_api of ROCm/rocAL) through ``python -m fastload.compat.run``,
beside rocAL's parse_config.py (tests/data/rocal)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PARSE_CONFIG = Path(__file__).parent.parent / "data" / "rocal" / "parse_config.py"
SCRIPTS = PARSE_CONFIG.parent

CV2_STAND_IN = """
\"\"\"Stands in for OpenCV in rocAL's reader scripts, which only draw with it: the image is saved as .npy.\"\"\"
import numpy as np
COLOR_RGB2BGR = 4


def cvtColor(image, code):
    return np.ascontiguousarray(image[..., ::-1])


def imwrite(name, image):
    np.save(name + ".npy", image)
    return True
"""


MATPLOTLIB_STAND_IN = {  # matplotlib's pyplot and gridspec as rocAL's show_images uses them: each image kept
    "__init__.py": "",
    "gridspec.py": "class GridSpec:\n    def __init__(self, rows, columns):\n        self.cells = rows * columns\n\n"
                   "    def __getitem__(self, index):\n        return index\n",
    "pyplot.py": "import numpy as np\nshown = []\n\n\ndef subplot(cell):\n    pass\n\n\ndef axis(mode):\n    pass\n\n\n"
                 "def imshow(image):\n    shown.append(np.asarray(image))\n\n\n"
                 "def show():\n    np.save('shown.npy', np.stack(shown))\n",
}


def run_rocal_script(folder: Path, name: str, text: str, *args: str) -> subprocess.CompletedProcess:
    """Write the script ``name`` into ``folder`` with rocAL's parse_config.py and run it there unmodified
    (its imports mapped to fastload.compat.rocal); fails the test with its stderr if it fails."""
    (folder / name).write_text(text)
    shutil.copy(PARSE_CONFIG, folder / "parse_config.py")
    done = subprocess.run([sys.executable, "-m", "fastload.compat.run", name, *args], cwd=folder,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done
