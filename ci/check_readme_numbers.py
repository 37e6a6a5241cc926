"""Check that the README's printed numbers for its commands are what the commands printed.

    python ci/check_readme_numbers.py README.md traces.csv
    python ci/check_readme_numbers.py README.md batch.csv --key feature

The README shows some rows and columns of an output rounded to 3 digits, in the first fenced
block whose header starts with ``row,`` (the main command's traces), or with ``KEY,`` for
``--key KEY`` (``feature,``: ``ipfi batch``'s records). Every number there must equal the
output's value rounded the same way, in the record with the same key. Exit status 1 and the
differences on a mismatch.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path


def readme_table(readme: Path, key: str = "row") -> list[dict[str, str]]:
    blocks = re.findall(rf"```\n({re.escape(key)},.*?)```", readme.read_text(encoding="utf-8"), flags=re.S)
    if not blocks:
        raise SystemExit(f"{readme}: no fenced block starting with '{key},'")
    return list(csv.DictReader(blocks[0].splitlines()))


def main(argv: list[str]) -> int:
    key = "row"
    if len(argv) == 5 and argv[3] == "--key":
        key = argv[4]
    elif len(argv) != 3:
        raise SystemExit(__doc__)
    expected = readme_table(Path(argv[1]), key)
    with open(argv[2], newline="", encoding="utf-8") as f:
        records = {row[key]: row for row in csv.DictReader(f)}
    wrong = []
    for shown in expected:
        got = records.get(shown[key])
        for column, value in shown.items():
            if column == key:
                continue
            actual = "missing" if got is None else f"{float(got[column]):.3f}"
            if actual == "-0.000":
                actual = "0.000"
            if actual != value:
                wrong.append(f"{key} {shown[key]} {column}: README {value}, output {actual}")
    print("\n".join(wrong) or f"README numbers match: {len(expected)} rows x {len(expected[0]) - 1} columns")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
