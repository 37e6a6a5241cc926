"""The short README's links into docs/ and the numbers blocks ci/check_readme_numbers.py reads.

mkdocs build --strict checks the links inside docs/ (.ci/run); the README is not part of the site,
so its own links are checked here."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_every_relative_link_of_the_readme_names_a_file_or_folder_that_exists():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    relative = [t for t in targets if "://" not in t]
    assert len(relative) >= 15, relative  # the docs' pages, CHANGELOG.md, CONTRIBUTING.md
    missing = [t for t in relative if not (ROOT / t).exists()]
    assert missing == []


def test_the_readme_shows_the_blocks_the_numbers_check_reads():
    spec = importlib.util.spec_from_file_location("check_readme_numbers", ROOT / "ci" / "check_readme_numbers.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    traces = check.readme_table(README)
    assert [r["row"] for r in traces] == ["1000", "5000", "10000", "11000", "12000", "14000", "20000"]
    assert list(traces[0]) == ["row", "salary", "age", "elevel", "commission"]
    batch = check.readme_table(README, "feature")
    assert [r["feature"] for r in batch] == ["salary", "age", "commission"]
    assert list(batch[0]) == ["feature", "importance", "std"]
