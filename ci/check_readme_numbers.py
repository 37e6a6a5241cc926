"""Check that the README's printed numbers for its main command are what the command printed.

    python ci/check_readme_numbers.py README.md traces.csv

The README shows some rows and columns of the traces rounded to 3 digits, in the first
fenced block whose header starts with ``row,``. Every number there must equal the trace's
value rounded the same way. Exit status 1 and the differences on a mismatch.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path


def readme_table(readme: Path) -> list[dict[str, str]]:
    blocks = re.findall(r"```\n(row,.*?)```", readme.read_text(encoding="utf-8"), flags=re.S)
    if not blocks:
        raise SystemExit(f"{readme}: no fenced block starting with 'row,'")
    return list(csv.DictReader(blocks[0].splitlines()))


def main(argv: list[str]) -> int:
    expected = readme_table(Path(argv[1]))
    with open(argv[2], newline="", encoding="utf-8") as f:
        traces = {row["row"]: row for row in csv.DictReader(f)}
    wrong = []
    for shown in expected:
        got = traces.get(shown["row"])
        for column, value in shown.items():
            if column == "row":
                continue
            actual = "missing" if got is None else f"{float(got[column]):.3f}"
            if actual == "-0.000":
                actual = "0.000"
            if actual != value:
                wrong.append(f"row {shown['row']} {column}: README {value}, traces {actual}")
    print("\n".join(wrong) or f"README numbers match: {len(expected)} rows x {len(expected[0]) - 1} columns")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
