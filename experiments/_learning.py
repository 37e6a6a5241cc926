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
                 reservoir: int, seed: int, drift_at: int, out: Path, trace_every: int = 10,
                 artifacts: bool = True, learn_first: bool = False) -> dict[str, Any]:
    """One scenario at one seed; ``artifacts=False`` skips the traces file and the figures (the
    summary and each window's errors are always returned)."""
    from ipfi_cli.evaluation import compare_learning
    from ipfi_cli.models import as_predictor
    from ipfi_cli.plotting import Series, plot_importance, rolling_mean

    predictor = as_predictor(make_model())
    started = time.perf_counter()
    # the whole run is saved at every window's end; a run stopped part-way continues from there
    checkpoint = out / f"{key}_seed{seed}.checkpoint"
    if checkpoint.exists():
        log(f"{key}: continuing from {checkpoint}")

    def progress(seen: int) -> None:
        if seen % 2000 == 0:
            log(f"{key}: {seen} rows, {time.perf_counter() - started:.0f} s")

    result = compare_learning(predictor, rows, columns, interval=interval, samplings=samplings, alphas=alphas,
                              loss="zero-one", n_repeats=n_repeats, reservoir_size=reservoir, seed=seed,
                              drift_at=drift_at, trace_every=trace_every, on_row=progress, checkpoint=checkpoint,
                              learn_first=learn_first)
    cpu_seconds = result.cpu_seconds  # of every part, when the run was continued
    accuracy = 1.0 - rolling_mean(result.losses, 500)
    performance = Series("accuracy", np.asarray(result.loss_rows), accuracy[:, None])
    interval_series = Series("interval PFI", np.array([p.row for p in result.intervals]),
                             np.array([p.result.mean for p in result.intervals]))
    figures = []
    if artifacts:
        write_traces(out / f"{key}_traces.csv.gz", result.names, result.trace_table())
    for alpha in result.settings["alphas"] if artifacts else []:
        panels = [Series(f"iPFI, {t.sampling} sampling, alpha {t.alpha:g}", np.asarray(t.rows), t.array())
                  for t in result.traces if t.alpha == alpha]
        name = f"{key}_alpha{alpha:g}.png"
        plot_importance(out / name, result.names, panels, interval=interval_series, drift_at=drift_at, top_k=5,
                        title=title, performance=performance, performance_label="accuracy\n(rolling 500)")
        figures.append(name)
    summary = {label: {part: s.as_dict() for part, s in parts.items()} for label, parts in result.summary().items()}
    log(f"{key}: done in {result.seconds:.0f} s")
    checkpoint.unlink(missing_ok=True)  # the caller keeps the result
    return {"title": title, "seconds": result.seconds, "cpu_seconds": cpu_seconds, "seed": seed,
            "n_rows": result.n_rows, "summary": summary,
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


def pooled_summary(entries: Sequence[dict[str, Any]], drift_at: int | None) -> dict[str, dict[str, dict[str, float]]]:
    """Each trace's error over the windows of every seed's run, pooled: whole / before / after.

    A window is *before* the drift when it ends at or before ``drift_at`` (as in one run's summary).
    """
    from ipfi_cli.evaluation.metrics import summarise

    labels = list(entries[0]["summary"]) if entries else []
    pooled: dict[str, dict[str, dict[str, float]]] = {}
    for label in labels:
        parts: dict[str, list[float]] = {"whole": [], "before": [], "after": []}
        for entry in entries:
            for window in entry["intervals"]:
                error = window["errors"][label]
                parts["whole"].append(error)
                if drift_at is not None:
                    parts["before" if window["row"] <= drift_at else "after"].append(error)
        pooled[label] = {part: summarise(values).as_dict() for part, values in parts.items()
                         if part == "whole" or drift_at is not None}
    return pooled


class RunStore:
    """Finished runs of one experiment, one per (scenario, seed), kept in a JSON file.

    Each run is written as soon as it ends, so a stopped experiment continues where it
    stopped. The file holds the settings its runs were made with; other settings refuse to
    mix with them (give another ``--out``).
    """

    def __init__(self, path: Path, settings: dict[str, Any]) -> None:
        import json

        self.path, self.settings = path, settings
        self.runs: dict[str, dict[str, Any]] = {}
        self.extra: dict[str, Any] = {}
        if path.is_file():
            saved = json.loads(path.read_text())
            if saved.get("settings") != settings:
                from _common import fail

                fail(f"{path} holds runs made with other settings ({saved.get('settings')}); "
                     f"give another --out to keep both")
            self.runs = saved.get("runs", {})
            self.extra = saved.get("extra", {})

    @staticmethod
    def unit(scenario: str, seed: int) -> str:
        return f"{scenario}/seed{seed}"

    def done(self, scenario: str, seed: int) -> bool:
        return self.unit(scenario, seed) in self.runs

    def add(self, scenario: str, seed: int, entry: dict[str, Any]) -> None:
        from _common import write_json

        self.runs[self.unit(scenario, seed)] = entry
        write_json(self.path, {"settings": self.settings, "runs": self.runs, "extra": self.extra})

    def of(self, scenario: str) -> list[dict[str, Any]]:
        """The finished runs of one scenario, by seed."""
        found = [(int(k.rsplit("/seed", 1)[1]), v) for k, v in self.runs.items() if k.rsplit("/seed", 1)[0] == scenario]
        return [v for _, v in sorted(found, key=lambda kv: kv[0])]

    def write_windows_csv(self, path: Path, version: str) -> None:
        """Every window's error of every run, one line each (the page's tables come from these)."""
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["script_version", "scenario", "seed", "window_end", "trace", "error",
                             "cpu_seconds_of_run"])
            for unit, entry in sorted(self.runs.items()):
                scenario = unit.rsplit("/seed", 1)[0]
                for window in entry["intervals"]:
                    for label, error in window["errors"].items():
                        writer.writerow([version, scenario, entry["seed"], window["row"], label, repr(float(error)),
                                         f"{entry.get('cpu_seconds', float('nan')):.1f}"])
        tmp.replace(path)

    def write_page(self, path: Path, text: list[str], windows_csv: Path, version: str) -> None:
        """The page (with the notes on where our numbers differ, if any) and the windows' CSV."""
        from _common import write_text

        if self.extra.get("notes"):
            text = [*text, "## Where and why our numbers differ from the paper's", "",
                    *(f"- {n}" for n in self.extra["notes"]), ""]
        write_text(path, "\n".join(text))
        self.write_windows_csv(windows_csv, version)
