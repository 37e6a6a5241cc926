"""One file means one thing to every command: for generated CSV and JSONL inputs, ``explain``
and ``batch`` accept and reject the same rows, with the same messages (both read through
``ipfi_cli.io.readers`` and check rows with ``ipfi_cli.run.rows``)."""

from __future__ import annotations

import re

import joblib
import numpy as np
import orjson
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from typer.testing import CliRunner

from ipfi_cli.cli.app import app

from .conftest import fuzz


def takes_anything(block):
    """A model (a plain function of the block) that accepts every value: only the row rules decide."""
    return np.zeros(len(block))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("one-reader") / "anything.joblib"
    joblib.dump(takes_anything, path)
    return path


cell = st.one_of(st.integers(-5, 5).map(str), st.floats(-5, 5, allow_nan=False).map(lambda v: repr(round(v, 2))),
                 st.sampled_from(["", "NA", "?", "null", "nan", "inf", "x", "07", "1e400", " 3 ", "None"]))


@st.composite
def inputs(draw):
    n = draw(st.integers(2, 12))
    rows = [[draw(cell), draw(cell), draw(cell)] for _ in range(n)]
    if draw(st.booleans()):
        text = "a,b,y\n" + "".join(",".join(r) + "\n" for r in rows)
        return "csv", text.encode()
    lines = []
    for r in rows:
        obj = {}
        for key, value in zip("aby", r):
            number = None
            try:
                number = int(value) if value.strip().lstrip("-").isdigit() else float(value)
            except ValueError:
                pass
            obj[key] = number if number is not None and np.isfinite(number) and draw(st.booleans()) else value
        lines.append(orjson.dumps(obj))
    return "jsonl", b"\n".join(lines) + b"\n"


def skipped_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ipfi: warning: skipped ") and "bad row(s)" not in line]  # noqa: E501


@fuzz(60)
@given(inputs())
def test_explain_and_batch_accept_and_reject_the_same_rows(model, tmp_path_factory, case):
    fmt, data = case
    path = tmp_path_factory.mktemp("in") / f"rows.{fmt}"
    path.write_bytes(data)
    note(data.decode())
    common = [str(path), "-m", str(model), "-t", "y", "--seed", "1", "-M", "2", "--on-bad-row", "skip", "-v"]
    runner = CliRunner()
    explained = runner.invoke(app, ["explain", *common, "--no-live"], catch_exceptions=False)
    batch = runner.invoke(app, ["batch", *common], catch_exceptions=False)
    assert "Traceback" not in explained.stderr + batch.stderr
    assert skipped_lines(explained.stderr) == skipped_lines(batch.stderr)
    good = len(re.findall(r"^\d+,", explained.stdout, flags=re.M))   # one trace record per good row
    if batch.exit_code == 0:
        assert int(batch.stdout.splitlines()[1].split(",")[4]) == good   # n_rows of the first record
    else:  # fewer than two good rows: both say so
        assert good < 2 and "no data to explain" in batch.stderr
