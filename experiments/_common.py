"""Shared helpers of the experiment scripts: paths, data checks, result pages."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "datasets"
DEFAULT_OUT = REPO / "experiments" / "results"


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(1)


def need_files(data: Path, names: Sequence[str]) -> None:
    """Exit with a clear message when the data folder or a file in it is missing."""
    missing = [n for n in names if not (data / n).is_file()]
    if missing:
        fail(f"missing data file(s) {', '.join(missing)} in {data}. These experiments need the paper's "
             f"datasets (adult.csv, bank.csv, bike.csv, elec2.csv); pass --data DIR to point at them.")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def environment() -> str:
    import numpy
    import river
    import sklearn

    cpus = os.cpu_count()
    return (f"Python {platform.python_version()}, numpy {numpy.__version__}, scikit-learn {sklearn.__version__}, "
            f"river {river.__version__}; {cpus} CPU cores (shared with other work), "
            f"niceness {os.nice(0)}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt(value: float, digits: int = 3) -> str:
    return "–" if value != value else f"{value:.{digits}f}"


def write_json(path: Path, payload: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, default=float))
    tmp.replace(path)


def write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
