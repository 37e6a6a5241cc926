"""The README's "Which explainer" example prints exactly what the README says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_which_explainer_example_prints_what_the_readme_shows():
    section = README.read_text().split("## Which explainer", 1)[1].split("\n## ", 1)[0]
    code, shown = re.findall(r"```(?:python|text)\n(.*?)```", section, flags=re.S)[:2]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue() == shown
