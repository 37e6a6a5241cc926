"""Fuzzing what a served model answers: right answers in other spellings, malformed answers,
wrong types, huge numbers, error statuses with hostile text, slow and trickled answers.

One real standard-library server on 127.0.0.1 answers each example as drawn; ``ipfi batch`` or
``ipfi explain`` runs against it in-process. The oracle:

* an answer that is the model's labels in another spelling (``1``, ``"1"``, ``1.0``, ``true``)
  must give exactly the traces of the plain integer answers (exit 0);
* labels the model never answers (``"yes"``/``"no"`` or ``"high"`` against 0/1) exit 1 with one line;
* anything else (malformed, wrong type, huge, a 4xx/5xx, too slow) exits 1 with one line naming
  the served URL and no row;
* never a traceback, an "unexpected" error, a raw control character, or exit 0 with other numbers.

The counts are printed (``-s``) for the record.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from typer.testing import CliRunner

from ipfi_cli.cli.app import app
from tests.sources.answers import Answers, Reply, rows_of

from .conftest import fuzz

pytestmark = pytest.mark.slow  # answers that are slow or trickle on purpose: over a minute

ROWS = 40
SPELLINGS = {"int": int, "text": str, "float": float, "bool": bool}
MALFORMED = ["null", "no predictions", "scalar", "short", "long", "objects", "lists", "nested", "not json",
             "text numbers", "nan", "empty body"]
STATUSES = [400, 401, 404, 500, 503]
SLOW = ["slow", "trickle", "huge length"]
KINDS = [*(f"spell {s}" for s in SPELLINGS), "yes/no", *MALFORMED, *(f"status {s}" for s in STATUSES), *SLOW,
         "overflow"]
HOSTILE = "\x1b]52;c;aGk=\x07\x1b[2J[link=https://x.example]x[/link]"
COUNTS: collections.Counter[str] = collections.Counter()


def rule(row: dict[str, Any]) -> int:
    return int(row["a"] > 0)


class Server:
    def __init__(self) -> None:
        self.kind = "spell int"
        self.answers = Answers(self.reply)

    def reply(self, path: str, payload: Any) -> Any:
        rows = rows_of(payload)
        labels = [rule(r) for r in rows]
        kind = self.kind
        if kind.startswith("spell "):
            return {"predictions": [SPELLINGS[kind[6:]](v) for v in labels]}
        if kind == "yes/no":
            return {"predictions": ["yes" if v else "no" for v in labels]}
        if kind == "overflow":
            return {"predictions": [1e300 * (1 + abs(r["a"])) for r in rows]}
        if kind.startswith("status "):
            return Reply({"message": f"refused {HOSTILE}"}, status=int(kind[7:]))
        if kind == "slow":
            import time

            time.sleep(1.0)
            return {"predictions": labels}
        if kind == "trickle":
            return Reply({"predictions": labels}, trickle=0.02)
        if kind == "huge length":
            return Reply(b'{"predictions": [', length=10**12)
        return {
            "null": {"predictions": None},
            "no predictions": {"result": "ok", "n": len(labels)},
            "scalar": 3,
            "short": {"predictions": labels[:-1]},
            "long": {"predictions": [*labels, 1]},
            "objects": {"predictions": [{"a": v, "b": v} for v in labels]},
            "lists": {"predictions": [[v, v, v] for v in labels]},
            "nested": {"predictions": [[[v]] for v in labels]},
            "not json": Reply(b"<html>" + HOSTILE.encode() + b"</html>"),
            "text numbers": {"predictions": ["high" for _ in labels]},
            "nan": {"predictions": [None for _ in labels]},
            "empty body": Reply(b""),
        }[kind]


@pytest.fixture(scope="module")
def server() -> Any:
    served = Server()
    yield served
    served.answers.close()
    print("\nserved-answer fuzz:", dict(sorted(COUNTS.items())))


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=ROWS), rng.normal(size=ROWS)
    y = (a > 0).astype(int)
    y[rng.random(ROWS) < 0.15] ^= 1  # a model that is sometimes wrong
    path = tmp_path_factory.mktemp("served") / "t.csv"
    path.write_text("a,b,y\n" + "".join(f"{float(x)!r},{float(z)!r},{t}\n" for x, z, t in zip(a, b, y)))
    return path


def invoke(server: Server, table: Path, command: str, regression: bool, skip: bool) -> Any:
    args = [command, str(table), "--model-url", server.answers.url, "-t", "b" if regression else "y",
            "--task", "regression" if regression else "classification", "--seed", "4", "-M", "2", "-q",
            "--timeout", "0.4", "--retries", "1", "--retry-wait", "0.3"]
    if command == "explain":
        args.append("--no-live")
    if regression:
        args += ["--loss", "squared"]
    if skip:
        args += ["--on-bad-row", "skip"]
    return CliRunner().invoke(app, args, catch_exceptions=True)


@fuzz(60)
@given(kind=st.sampled_from(KINDS), command=st.sampled_from(["batch", "explain"]), skip=st.booleans())
def test_served_answers_are_right_or_one_line(server, table, kind, command, skip):
    regression = kind == "overflow"
    server.kind = "spell int"
    reference = invoke(server, table, command, regression, skip) if not regression else None
    server.kind = kind
    result = invoke(server, table, command, regression, skip)
    note(f"{kind} {command} skip={skip}: exit {result.exit_code}\n{result.stderr}")
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    stderr = result.stderr
    assert "Traceback" not in stderr and "unexpected" not in stderr
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", stderr), stderr  # nothing a terminal would obey
    if kind.startswith("spell "):
        assert reference is not None and reference.exit_code == 0, reference.stderr
        assert result.exit_code == 0, stderr
        assert result.stdout == reference.stdout  # the same numbers as the plain answers
        COUNTS["right, exit 0"] += 1
        return
    assert result.exit_code == 1, (result.exit_code, result.stdout[-200:], stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipfi: error: "), stderr
    if kind in ("yes/no", "text numbers"):  # labels of another kind: every row wrong
        assert "never match what the" in lines[0]
    elif kind == "overflow":
        assert "not a finite number" in lines[0]
    else:
        assert server.answers.url in lines[0] and not re.search(r"\brow \d", lines[0]), lines[0]
    COUNTS["refused, exit 1"] += 1
