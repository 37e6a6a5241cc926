"""Experiment C: uniform vs geometric sampling on elec2 with a feature drift.

The first ``--rows`` rows of elec2 stream through a river adaptive random forest
learning prequentially; at ``--drift-at`` (the middle) the values of ``nswprice``, the
most important feature, are swapped with those of a randomly chosen other feature.
iPFI with uniform and with geometric sampling (same alpha) is compared with interval
PFI: after the drift, uniform sampling keeps drawing replacement values from before
the drift, which lie off the new data manifold, so its estimates stay skewed; geometric
sampling forgets them and follows interval PFI.

    python experiments/experiment_c.py [--data DIR] [--out DIR] [--rows 20000] [--trees 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, DEFAULT_OUT, environment, log, need_files, write_json, write_text  # noqa: E402
from _learning import run_scenario, summary_table  # noqa: E402

# the supplement's table, elec2 "fe. 1", alpha 0.001: whole Q2 IQR Q1 Q3, before ..., after ...
PAPER = {
    "ipfi-uniform-0.001": (0.270, 0.305, 0.042, 0.347, 0.041, 0.061, 0.033, 0.093, 0.353, 0.068, 0.311, 0.378),
    "ipfi-geometric-0.001": (0.037, 0.039, 0.033, 0.072, 0.037, 0.066, 0.032, 0.098, 0.037, 0.022, 0.036, 0.057),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with elec2.csv")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--rows", type=int, default=20_000, help="stream the first this many rows (all: 45312)")
    parser.add_argument("--drift-at", type=int, default=None, help="default: the middle of the stream")
    parser.add_argument("--feature", default="nswprice")
    parser.add_argument("--interval", type=int, default=2000)
    parser.add_argument("--trees", type=int, default=5, help="ARF ensemble size (the paper: 50)")
    parser.add_argument("--alpha", type=float, default=0.001)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--reservoir", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--notes", type=Path, default=None, help="markdown bullet notes to add to the page")
    parser.add_argument("--page-only", action="store_true", help="rebuild the page from OUT/experiment_c.json")
    args = parser.parse_args()
    json_path, md_path = args.out / "experiment_c.json", args.out / "experiment_c.md"
    notes = []
    if args.notes and args.notes.is_file():
        notes = [line[2:].strip() for line in args.notes.read_text().splitlines() if line.startswith("- ")]

    if args.page_only:
        import json

        results = json.loads(json_path.read_text())
    else:
        need_files(args.data, ["elec2.csv"])
        args.out.mkdir(parents=True, exist_ok=True)
        import pandas as pd
        from river import forest

        from ipfi_cli.evaluation.drift import pick_swap_partner, swap_features

        frame = pd.read_csv(args.data / "elec2.csv").iloc[: args.rows]
        columns = [c for c in frame.columns if c != "class"]
        drift_at = args.drift_at if args.drift_at is not None else len(frame) // 2
        partner = pick_swap_partner(columns, args.feature, seed=args.seed)
        rows = [(dict(zip(columns, values)), label)
                for values, label in zip(frame[columns].itertuples(index=False, name=None), frame["class"])]
        rows = swap_features(rows, {args.feature: partner}, drift_at)
        log(f"elec2: {len(rows)} rows, {args.feature} swapped with {partner} at row {drift_at}")
        started = time.perf_counter()
        entry = run_scenario(
            "experiment_c", f"elec2, feature drift ({args.feature}<->{partner} at row {drift_at:,}), ARF",
            rows, columns, lambda: forest.ARFClassifier(n_models=args.trees, seed=args.seed),
            samplings=["uniform", "geometric"], alphas=[args.alpha], interval=args.interval,
            n_repeats=args.repeats, reservoir=args.reservoir, seed=args.seed, drift_at=drift_at, out=args.out)
        results = {"_args": vars(args) | {"out": str(args.out), "data": str(args.data), "notes": None},
                   "elec2": entry, "partner": partner, "drift_at": drift_at,
                   "_total_seconds": time.perf_counter() - started}
        write_json(json_path, results)
    results["_notes"] = notes or results.get("_notes", [])
    a, entry = results["_args"], results["elec2"]
    text = [
        "# Experiment C: uniform vs geometric sampling under feature drift (elec2)",
        "",
        "Error between iPFI's estimate and interval PFI at the end of each interval window (the paper's error), "
        "median (IQR) [Q1, Q3] over the whole stream, before and after the drift, beside the supplement's "
        "table (elec2 fe. 1, alpha 0.001).",
        "",
        f"{entry['n_rows']:,} rows; `{a['feature']}` swapped with `{results['partner']}` (chosen at random with "
        f"seed {a['seed']}) from row {results['drift_at']:,} on; runtime {entry['seconds'] / 60:.1f} min; ARF "
        f"accuracy over the last 2,000 rows {entry['final_accuracy']:.1%}.",
        "",
        summary_table(entry, PAPER),
        "",
        *[f"![elec2]({f})" for f in entry["figures"]],
        "",
        "Traces of both samplings and interval PFI: `experiment_c_traces.csv.gz` (redraw with `ipfi plot "
        f"experiments/results/experiment_c_traces.csv.gz -o out.png --drift-at {results['drift_at']}`).",
        "",
        "## Settings",
        "",
        f"- Command: `python experiments/experiment_c.py --rows {a['rows']} --trees {a['trees']} --alpha {a['alpha']} "
        f"--interval {a['interval']} --repeats {a['repeats']} --reservoir {a['reservoir']} --seed {a['seed']}`",
        f"- Data: the first {entry['n_rows']:,} rows of `elec2.csv` in their time order (target `class`, all 8 "
        "other columns as features).",
        f"- Model: river `forest.ARFClassifier(n_models={a['trees']}, seed={a['seed']})`, learning each row after "
        "it is explained.",
        f"- iPFI: uniform and geometric sampling, alpha {a['alpha']}, reservoir {a['reservoir']} rows, "
        f"M = {a['repeats']}, zero-one loss. Interval PFI: batch PFI (M = {a['repeats']}) of the current model on "
        f"each window of {a['interval']:,} rows.",
        f"- Environment: {environment()}.",
        "",
    ]
    if results["_notes"]:
        text += ["## Where and why our numbers differ from the paper's", ""]
        text += [f"- {n}" for n in results["_notes"]] + [""]
    write_text(md_path, "\n".join(text))


if __name__ == "__main__":
    main()
