"""Shared runner of Experiments B and C: one learning scenario, its traces, figure and summary."""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _common import fmt, log, table


def write_traces(path: Path, names: Sequence[str], records: list[dict[str, Any]]) -> None:
    """The wide trace table (``method,row,<features>``) as CSV (gzip for ``.gz``), the format ``ipfi plot`` reads."""
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["method", "row", *names])
        for record in records:
            writer.writerow([record["method"], record["row"],
                             *("" if record[n] != record[n] else repr(float(record[n])) for n in names)])


def run_scenario(key: str, title: str, rows: list, columns: Sequence[str], make_model: Callable[[], Any], *,
                 samplings: Sequence[str], alphas: Sequence[float], interval: int, n_repeats: int,
                 reservoir: int, seed: int, drift_at: int, out: Path, trace_every: int = 10) -> dict[str, Any]:
    from ipfi_cli.evaluation import compare_learning
    from ipfi_cli.models import as_predictor
    from ipfi_cli.plotting import Series, plot_importance, rolling_mean

    predictor = as_predictor(make_model())
    started = time.perf_counter()

    def progress(seen: int) -> None:
        if seen % 2000 == 0:
            log(f"{key}: {seen} rows, {time.perf_counter() - started:.0f} s")

    result = compare_learning(predictor, rows, columns, interval=interval, samplings=samplings, alphas=alphas,
                              loss="zero-one", n_repeats=n_repeats, reservoir_size=reservoir, seed=seed,
                              drift_at=drift_at, trace_every=trace_every, on_row=progress)
    write_traces(out / f"{key}_traces.csv.gz", result.names, result.trace_table())
    accuracy = 1.0 - rolling_mean(result.losses, 500)
    performance = Series("accuracy", np.asarray(result.loss_rows), accuracy[:, None])
    interval_series = Series("interval PFI", np.array([p.row for p in result.intervals]),
                             np.array([p.result.mean for p in result.intervals]))
    figures = []
    for alpha in result.settings["alphas"]:
        panels = [Series(f"iPFI, {t.sampling} sampling, alpha {t.alpha:g}", np.asarray(t.rows), t.array())
                  for t in result.traces if t.alpha == alpha]
        name = f"{key}_alpha{alpha:g}.png"
        plot_importance(out / name, result.names, panels, interval=interval_series, drift_at=drift_at, top_k=5,
                        title=title, performance=performance, performance_label="accuracy\n(rolling 500)")
        figures.append(name)
    summary = {label: {part: s.as_dict() for part, s in parts.items()} for label, parts in result.summary().items()}
    log(f"{key}: done in {result.seconds:.0f} s")
    return {"title": title, "seconds": result.seconds, "n_rows": result.n_rows, "summary": summary,
            "figures": figures, "names": result.names,
            "final_accuracy": float(np.nanmean(1.0 - np.asarray(result.losses[-2000:]))),
            "intervals": [{"row": p.row, "interval": p.result.mean, "errors": p.errors} for p in result.intervals]}


def summary_table(entry: dict[str, Any], paper: dict[str, tuple[float, ...]]) -> str:
    """Whole / before / after drift: median (IQR) [Q1, Q3] of ours beside the paper's."""
    rows = []
    for label, parts in entry["summary"].items():
        cells = []
        for part in ("whole", "before", "after"):
            s = parts.get(part)
            cells.append("–" if s is None or not s["n"] else
                         f"{fmt(s['median'])} ({fmt(s['iqr'])}) [{fmt(s['q1'])}, {fmt(s['q3'])}]")
        p = paper.get(label)
        paper_cells = ["–"] * 3 if p is None else [f"{p[i]:.3f} ({p[i + 1]:.3f}) [{p[i + 2]:.3f}, {p[i + 3]:.3f}]"
                                                    for i in (0, 4, 8)]
        rows.append([label, *cells, *paper_cells])
    return table(["trace", "ours: whole", "ours: before drift", "ours: after drift", "paper: whole",
                  "paper: before", "paper: after"], rows)
