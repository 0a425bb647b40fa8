"""The project speaks of the product only: no tracker numbers or development-process wording in its code,
tests, scripts, benchmarks or docs (the changelog says what changed). Third-party files the tests run
(tests/data) are theirs and left out."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACKER = re.compile(r"\bissues? #?\d+|\bthe issue\b|\bissue's\b|\b(this|previous|second|first) session\b",
                     re.IGNORECASE)


def tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    paths = [ROOT / name for name in listed.splitlines() if not name.startswith("tests/data/")]
    return [p for p in paths if p.is_file() and b"\0" not in p.read_bytes()[:8192]]


def test_no_tracker_or_process_wording():
    found = []
    for path in tracked_text_files():
        text = path.read_text(errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if TRACKER.search(line) and path.name != "test_wording.py":
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "tracker or process wording:\n" + "\n".join(found)
