"""The docs' "Which explainer" example (docs/explainers.md) prints exactly what the page says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

EXPLAINERS = Path(__file__).resolve().parents[2] / "docs" / "explainers.md"


def test_which_explainer_example_prints_what_the_docs_show():
    section = EXPLAINERS.read_text()
    code, shown = re.findall(r"```(?:python|text)\n(.*?)```", section, flags=re.S)[:2]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/explainers.md", "exec"), {})
    assert out.getvalue() == shown
