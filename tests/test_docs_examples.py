"""Every Python code block of the README and docs/ runs as shown on a CPU machine, or is listed here with
the reason it cannot run in the suite (a GPU, a running server) and the test that covers it instead. A block
added to the docs without being run or listed fails ``test_every_block_is_run_or_listed``.

The blocks run in this process, each in a fresh namespace, with what the text leaves to the reader
filled in (``root``, a model) and three substitutions that only shrink them: ``/data/train`` is a small
image folder, ``range(90)`` epochs is ``range(1)``, and the 2,000-image built-in sample is that folder.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)

# (file, first line of the block) -> why it is not run here, and where it is tested
NOT_RUN = {
    ("docs/gpu.md", "loader = fastload.DataLoader(train, batch_size=256"):
        "needs a CUDA device (tests/gpu; device='cuda' without one is refused: test_loader.py)",
    ("docs/serving.md", "import numpy as np, tritonclient.http as httpclient"):
        "needs fastload serve running with models p and resnet50 (test_serving_protocol.py drives the "
        "server with Triton's HTTP client)",
    ("docs/serving.md", "import numpy as np, tritonclient.grpc as grpcclient"):
        "needs fastload serve --grpc-port running (test_serve_grpc.py drives it with Triton's gRPC client)",
}


def blocks() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in BLOCK.finditer(path.read_text(encoding="utf-8")):
            found.append((path.relative_to(ROOT).as_posix(), match.group(1)))
    return found


def key(name: str, code: str) -> tuple[str, str]:
    first = code.strip().splitlines()[0]
    return name, next((k for f, k in NOT_RUN if f == name and first.startswith(k)), first)


def test_every_block_is_run_or_listed():
    listed = {k for k in NOT_RUN}
    keys = [key(name, code) for name, code in blocks()]
    assert listed <= set(keys), f"listed blocks no longer in the docs: {sorted(listed - set(keys))}"
    assert len(keys) >= 10  # the README's and the guides' examples are found


@pytest.mark.parametrize("name, code", [pytest.param(n, c, id=f"{n}:{c.strip().splitlines()[0][:40]}")
                                        for n, c in blocks()])
def test_the_block_runs_as_shown(name, code, small_folder, tmp_path, monkeypatch):
    reason = NOT_RUN.get(key(name, code))
    if reason is not None:
        pytest.skip(reason)
    import torch

    import fastload
    import fastload.sample_data
    monkeypatch.chdir(tmp_path)  # (a block that saves a checkpoint writes it here)
    monkeypatch.setattr(fastload.sample_data, "sample_folder", lambda *a, **k: small_folder)
    from fastload.recipes import by_name
    runnable = code.replace('"/data/train"', repr(str(small_folder))).replace("range(90)", "range(1)")
    source = fastload.ImageFolder(small_folder, transform=by_name("resnet50-train", size=32))
    namespace = {"root": str(small_folder), "fastload": fastload, "torch": torch, "source": source,
                 "model": torch.nn.Linear(2, 2)}
    if "loader.state_dict()" in runnable and "loader =" not in runnable:  # a checkpoint of a running loader
        namespace["loader"] = fastload.DataLoader(source, batch_size=4)
    exec(compile(runnable, f"{name} (a code block)", "exec"), namespace)
    loader = namespace.get("loader")
    if loader is not None:
        loader.close()


QUICK_COMMANDS = re.compile(r"^(?:\$ )?fastload (preview|inspect|pack|doctor)\b(.*)$", re.MULTILINE)


def test_the_quick_commands_of_cli_md_run_as_shown(small_folder, tmp_path, monkeypatch):
    """`fastload preview`, `inspect`, `pack` and `doctor` as docs/cli.md shows them (optional [...] parts left
    out; the built-in sample is a small folder, /tmp a temporary one). `bench` is run by test_cli.py."""
    import shlex

    from fastload.cli import main
    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    ran = set()
    for match in QUICK_COMMANDS.finditer(text):
        line = re.sub(r"\[[^\]]*\]", "", match.group(0).removeprefix("$ "))
        if "DATA" in line:
            continue  # the synopsis lines
        line = line.replace("/tmp/", f"{tmp_path}/").replace("~/.cache/fastload/sample-imagenet", str(small_folder))
        argv = shlex.split(line)[1:]
        assert main(argv) == 0, line
        ran.add(match.group(1))
    assert ran == {"preview", "inspect", "pack", "doctor"}
