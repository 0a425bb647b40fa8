"""Installing beside a user's torch: declared ranges, the distribution's name, a command that answers at once,
and the fast path where torchvision cannot be imported."""

from __future__ import annotations

import argparse
import importlib.metadata
import pathlib
import re
import subprocess
import sys
import time

import pytest
import torch

import fastload
from fastload import _version
from fastload.cli import build_parser

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _run(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_the_distribution_is_ours_and_installed_under_its_name():
    assert _version.DISTRIBUTION == "torch-fastload" != "fastload"  # `fastload` on PyPI is another project
    assert importlib.metadata.version(_version.DISTRIBUTION) == fastload.__version__
    metadata = importlib.metadata.metadata(_version.DISTRIBUTION)
    assert "DataLoader" in metadata["Summary"] and metadata["Description-Content-Type"] == "text/markdown"
    assert "pip install torch-fastload" in (metadata["Description"] or metadata.get_payload())  # the README
    assert _version.install_hint("s3") == "pip install 'torch-fastload[s3]'"


def test_no_message_or_doc_suggests_the_other_projects_name():
    """`pip install fastload[s3]` installs an unrelated package and drops the extra."""
    wrong = re.compile(r"(?<![-\w])fastload\[")
    files = [*ROOT.glob("fastload/**/*.py"), *ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "setup.py"]
    offenders = [f"{path.relative_to(ROOT)}:{number}" for path in files
                 for number, line in enumerate(path.read_text().splitlines(), 1) if wrong.search(line)]
    assert offenders == []


def test_the_runtime_requirements_are_ranges_that_admit_the_supported_torches():
    from packaging.requirements import Requirement
    runtime = [Requirement(r) for r in importlib.metadata.requires(_version.DISTRIBUTION)
               if "extra ==" not in r]
    by_name = {r.name: r for r in runtime}
    assert not [str(r) for r in runtime if any(s.operator in ("==", "===", "~=") for s in r.specifier)]
    assert {"torch", "torchvision", "numpy", "pillow"} <= set(by_name) and "triton" not in by_name
    for name, versions in (("torch", ("2.11.0", "2.13.0+cpu", "2.15.0")), ("torchvision", ("0.26.0", "0.29.2"))):
        assert all(by_name[name].specifier.contains(v, prereleases=True) for v in versions), by_name[name]


def test_the_command_answers_without_importing_torch():
    started = time.perf_counter()
    version = subprocess.run([sys.executable, "-m", "fastload", "--version"], capture_output=True, text=True,
                             timeout=60, cwd=ROOT)
    assert version.returncode == 0 and version.stdout.strip() == f"fastload {fastload.__version__} (torch-fastload)"
    assert time.perf_counter() - started < 2.0  # (torch alone takes several seconds to import)
    probe = _run("import sys\nfrom fastload.cli import main\n"
                 "for argv in (['--help'], ['bench', '--help'], ['serve'], ['bench', '--batch-size', 'x']):\n"
                 "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
                 "print('torch imported:', 'torch' in sys.modules)")
    assert probe.stdout.strip().splitlines()[-1] == "torch imported: False", probe.stderr
    assert "the following arguments are required: --pipeline" in probe.stderr  # the argument errors answered


def test_every_option_shows_its_default():
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if not action.option_strings or action.default in (None, False, "", argparse.SUPPRESS):
                continue
            if action.help is argparse.SUPPRESS:
                continue
            formatter = sub._get_formatter()
            formatter.add_argument(action)
            if "default" not in formatter.format_help():
                missing.append(f"{name} {action.option_strings[-1]}")
    assert missing == []


STANDIN_RUN = """
import sys, warnings
sys.modules["torchvision"] = None  # as where torchvision's C extension was built for another torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import torch
    from fastload import DataLoader, ImageFolder, transforms as T
assert any("torchvision cannot be imported" in str(w.message) for w in caught), [str(w.message) for w in caught]
from fastload import _torchvision
assert not _torchvision.AVAILABLE
transform = T.Compose([T.RandomResizedCrop(40), T.RandomHorizontalFlip(), T.RandomVerticalFlip(0.3),
                       T.ToDtype(torch.float32, scale=True), T.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])])
loader = DataLoader(ImageFolder(sys.argv[1], transform), batch_size=5, shuffle=True, num_workers=2, seed=7)
batches = [batch for _, batch in zip(range(2), loader)]
assert loader.fast_path
torch.save(batches, sys.argv[2])
for make in (lambda: T.ColorJitter(0.4), lambda: T.RandomRotation(10)):
    try:
        make()
        raise AssertionError("made without torchvision")
    except ImportError as error:
        assert "needs torchvision" in str(error)
try:
    T.Resize(8)(torch.zeros(3, 10, 10))
    raise AssertionError("ran without torchvision")
except RuntimeError as error:
    assert "cannot run here" in str(error)
print("ok")
"""


def test_the_fast_path_runs_where_torchvision_cannot_be_imported(image_folder, tmp_path):
    """A torchvision built for another torch fails on import (PyPI's beside torch 2.13.0+cpu: `operator
    torchvision::nms does not exist`). fastload's sources and fast path need none of it: with stand-ins of
    the transforms, the same seed gives the very batches that torchvision's transforms give."""
    from fastload import DataLoader, ImageFolder, transforms as T
    out = tmp_path / "batches.pt"
    child = subprocess.run([sys.executable, "-c", STANDIN_RUN, str(image_folder), str(out)], capture_output=True,
                           text=True, timeout=240, cwd=ROOT)
    assert child.returncode == 0 and child.stdout.strip() == "ok", child.stderr[-3000:]
    transform = T.Compose([T.RandomResizedCrop(40), T.RandomHorizontalFlip(), T.RandomVerticalFlip(0.3),
                           T.ToDtype(torch.float32, scale=True), T.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])])
    with DataLoader(ImageFolder(image_folder, transform), batch_size=5, shuffle=True, num_workers=2,
                    seed=7) as loader:
        expected = [batch for _, batch in zip(range(2), loader)]
    got = torch.load(out)
    assert len(got) == 2
    for (images, labels), (want_images, want_labels) in zip(got, expected):
        assert torch.equal(labels, want_labels) and torch.equal(images, want_images)


@pytest.mark.parametrize("size", [7, (9, 5), [6]])
def test_standin_transforms_keep_torchvisions_attributes(size):
    """compile_plan reads the stand-ins' attributes as torchvision's: each holds what v2's holds."""
    from torchvision.transforms import InterpolationMode, v2

    from fastload._standin_transforms import make
    standin = make("for the test")
    for name, args in (("RandomResizedCrop", (size,)), ("Resize", (size,)), ("CenterCrop", (size,)),
                       ("RandomHorizontalFlip", (0.3,)), ("Normalize", ([0.1], [0.2])),
                       ("ToDtype", (torch.float16, True))):
        ours, theirs = getattr(standin, name)(*args), getattr(v2, name)(*args)
        for attribute in ("size", "scale", "ratio", "max_size", "antialias", "p", "mean", "std", "dtype"):
            if hasattr(theirs, attribute):
                assert getattr(ours, attribute) == getattr(theirs, attribute), (name, attribute)
        if hasattr(theirs, "interpolation"):
            assert ours.interpolation.value == InterpolationMode(theirs.interpolation).value
