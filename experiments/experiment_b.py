"""Experiment B: iPFI vs interval PFI for an adaptive random forest learning agrawal with a drift.

Two streams of 20,000 rows with an abrupt concept drift at row 10,000:

* function drift: river ``Agrawal`` labelling function 1 (salary, age) then 2 (age, elevel);
* feature drift: function 2 throughout, and from row 10,000 on the values of ``age`` and
  ``salary``, and of ``elevel`` and ``car``, are swapped.

A river ``forest.ARFClassifier`` learns prequentially; iPFI (geometric sampling, both
alphas from one pass) explains each row before it is learned; interval PFI is batch PFI
of the current model on each window of ``--interval`` rows. The error at each window's
end is the paper's (see experiment A); the page gives its median and IQR over the whole
stream, before and after the drift, beside the supplement's table.

    python experiments/experiment_b.py [--out DIR] [--trees 5] [--samplings geometric] [--seeds 0,1,2]

Each (scenario, seed) run is kept in OUT/experiment_b.json as soon as it ends; run the
same command again to continue a stopped experiment. The run under way is saved at the end
of each interval window (``OUT/experiment_b_<scenario>_seed<s>.checkpoint``) and continues from there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
SCRIPT_VERSION = "2"  # 2: one run per seed, kept as it ends (resumable); ARF with binary_split=True
from _common import DEFAULT_OUT, environment, fmt, log, table  # noqa: E402
from _learning import RunStore, pooled_summary, run_scenario, summary_table  # noqa: E402

# the supplement's Table (agrawal "fu. 1" and "fe. 1"): whole Q2 IQR Q1 Q3, before ..., after ...
PAPER = {
    "function": {
        "ipfi-uniform-0.001": (0.050, 0.054, 0.025, 0.079, 0.075, 0.018, 0.063, 0.080, 0.024, 0.028, 0.009, 0.038),
        "ipfi-geometric-0.001": (0.052, 0.060, 0.024, 0.084, 0.071, 0.020, 0.068, 0.088, 0.022, 0.023, 0.014, 0.037),
        "ipfi-uniform-0.01": (0.047, 0.075, 0.021, 0.096, 0.098, 0.020, 0.091, 0.111, 0.018, 0.011, 0.017, 0.029),
        "ipfi-geometric-0.01": (0.040, 0.080, 0.027, 0.107, 0.116, 0.044, 0.078, 0.122, 0.027, 0.008, 0.021, 0.029),
    },
    "feature": {
        "ipfi-uniform-0.001": (0.048, 0.102, 0.018, 0.121, 0.021, 0.036, 0.017, 0.054, 0.087, 0.177, 0.043, 0.220),
        "ipfi-geometric-0.001": (0.035, 0.091, 0.015, 0.106, 0.023, 0.031, 0.018, 0.049, 0.047, 0.117, 0.008, 0.125),
        "ipfi-uniform-0.01": (0.062, 0.044, 0.034, 0.077, 0.072, 0.023, 0.056, 0.079, 0.046, 0.037, 0.030, 0.067),
        "ipfi-geometric-0.01": (0.044, 0.052, 0.035, 0.087, 0.079, 0.047, 0.042, 0.089, 0.043, 0.014, 0.032, 0.046),
    },
}
SWAPS = {"age": "salary", "elevel": "car"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="unused: the agrawal streams are generated")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--drift-at", type=int, default=10_000)
    parser.add_argument("--interval", type=int, default=2000)
    parser.add_argument("--trees", type=int, default=5, help="ARF ensemble size (the paper: 50)")
    parser.add_argument("--samplings", default="geometric")
    parser.add_argument("--alphas", default="0.001,0.01")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--reservoir", type=int, default=100)
    parser.add_argument("--seeds", default="0", help="comma-separated; one run per scenario and seed")
    parser.add_argument("--scenarios", default="function,feature")
    parser.add_argument("--order", choices=["explain-first", "learn-first"], default="explain-first",
                        help="explain each row before the model learns it (prequential), or after (the order of "
                             "the paper's published code)")
    parser.add_argument("--leaf-prediction", choices=["nba", "mc", "nb"], default="nba",
                        help="the forest's leaf prediction (river's default nba: naive Bayes adaptive; mc: majority "
                             "class, whose prediction depends only on the features the tree splits on)")
    parser.add_argument("--notes", type=Path, default=None, help="markdown bullet notes to add to the page")
    parser.add_argument("--page-only", action="store_true", help="rebuild the page from OUT/experiment_b.json")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    samplings = [s.strip() for s in args.samplings.split(",") if s.strip()]
    alphas = [float(a) for a in args.alphas.split(",") if a.strip()]
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    md_path = args.out / "experiment_b.md"
    leaves = "" if args.leaf_prediction == "nba" else f", leaf_prediction={args.leaf_prediction!r}"
    model_text = f"forest.ARFClassifier(n_models={args.trees}, seed=s, binary_split=True{leaves})"
    settings = {"rows": args.rows, "drift_at": args.drift_at, "interval": args.interval, "trees": args.trees,
                "samplings": samplings, "alphas": alphas, "repeats": args.repeats, "reservoir": args.reservoir,
                "model": "river forest.ARFClassifier(n_models=trees, seed=seed, binary_split=True)",
                "script_version": SCRIPT_VERSION}
    if args.order != "explain-first":  # kept out otherwise: runs saved before the option stay valid
        settings["order"] = args.order
    if args.leaf_prediction != "nba":  # likewise
        settings["leaf_prediction"] = args.leaf_prediction
        settings["model"] = settings["model"].replace(")", f", leaf_prediction={args.leaf_prediction!r})")
    store = RunStore(args.out / "experiment_b.json", settings)
    notes = []
    if args.notes and args.notes.is_file():
        notes = [line[2:].strip() for line in args.notes.read_text().splitlines() if line.startswith("- ")]
    if notes:
        store.extra["notes"] = notes

    from river import forest

    from ipfi_cli.evaluation.drift import agrawal_function_drift, agrawal_rows, swap_features

    def write_page() -> None:
        text = [
            "# Experiment B: iPFI vs interval PFI under concept drift (agrawal, adaptive random forest)",
            "",
            "Error between iPFI's estimate and interval PFI at the end of each interval window (the paper's "
            "error: both vectors clipped at 0 and divided by their sum, then the L1 distance): median (IQR) "
            "[Q1, Q3] over the windows of every seed's run, pooled, over the whole stream, before the drift "
            f"(windows ending at or before row {args.drift_at:,}) and after it, beside the supplement's table "
            "(agrawal fu. 1 = function drift, fe. 1 = feature drift).",
            "",
        ]
        for scenario in ("function", "feature"):
            entries = store.of(scenario)
            if not entries:
                text += [f"## {scenario} drift", "", "(not run yet)", ""]
                continue
            first = entries[0]
            pooled = {"summary": pooled_summary(entries, args.drift_at)}
            cpu = [e.get("cpu_seconds", float("nan")) for e in entries]
            text += [f"## {first['title']}", "",
                     f"{len(entries)} run(s), seeds {', '.join(str(e['seed']) for e in entries)}; "
                     f"{first['n_rows']:,} rows and {len(first['intervals'])} interval windows each; CPU time per "
                     f"run {min(cpu) / 60:.1f}-{max(cpu) / 60:.1f} min; ARF accuracy over the last 2,000 rows "
                     + ", ".join(f"{e['final_accuracy']:.1%}" for e in entries) + ".", "",
                     summary_table(pooled, PAPER[scenario]), ""]
            if len(entries) > 1:
                text += ["Per seed (whole stream, median error):", "",
                         table(["trace", *(f"seed {e['seed']}" for e in entries)],
                               [[label, *(fmt(e["summary"][label]["whole"]["median"]) for e in entries)]
                                for label in first["summary"]]), ""]
            text += [f"![{scenario} alpha]({f})" for f in first["figures"]] + [""]
            if first["figures"]:
                text += [f"Traces of both methods (seed {first['seed']}): `experiment_b_{scenario}_traces.csv.gz` "
                         f"(redraw with `ipfi plot {args.out}/experiment_b_{scenario}_traces.csv.gz -o out.png "
                         f"--drift-at {args.drift_at}`).", ""]
        text += [
            "## Settings", "",
            f"- Command: `python experiments/experiment_b.py --out {args.out} --trees {args.trees} --samplings "
            f"{','.join(samplings)} --alphas {args.alphas} --interval {args.interval} --repeats {args.repeats} "
            f"--reservoir {args.reservoir} --seeds {args.seeds}"
            + ("" if args.order == "explain-first" else f" --order {args.order}")
            + ("" if args.leaf_prediction == "nba" else f" --leaf-prediction {args.leaf_prediction}")
            + "` (a stopped run continues: finished runs are kept "
            "in `experiment_b.json`, the one under way in a checkpoint at each window's end).",
            "- Seed s: the streams (river Agrawal seed 1000 s for the function drift, 1000 s + 1 for the feature "
            "drift), the forest and every explainer.",
            f"- Streams: {args.rows:,} rows, drift at row {args.drift_at:,}. Function drift: river "
            "`Agrawal(classification_function=1)` (salary and age) then `classification_function=2` "
            "(age and elevel); river numbers the functions from 0, as the paper's code (which used river) did. "
            "Feature drift: function 2 throughout, and from the drift on the values of age and salary, and of "
            "elevel and car, are swapped.",
            f"- Model: river `{model_text}`"
            + (" (the paper's), " if args.leaf_prediction == "nba" else " (the paper's, but for the leaves), ")
            + ("otherwise default, learning each row before it is explained (`--order learn-first`, as the "
               "paper's published code does)." if args.order == "learn-first"
               else "otherwise default, learning each row after it is explained (prequential)."),
            f"- iPFI: {', '.join(samplings)} sampling, reservoir {args.reservoir} rows, M = {args.repeats}, alpha "
            f"{args.alphas} (the second alpha re-smooths the same per-row contributions, so both come from one "
            "pass and share their random draws), zero-one loss.",
            f"- Interval PFI: batch PFI (M = {args.repeats} permutations) of the model as it is at the end of each "
            f"window of {args.interval:,} rows, on that window's rows.",
            f"- Environment: {environment()}.",
            "",
        ]
        store.write_page(md_path, text, args.out / "experiment_b_windows.csv", SCRIPT_VERSION)

    if args.page_only:
        write_page()
        return
    for seed in seeds:
        for scenario in scenarios:
            if store.done(scenario, seed):
                log(f"{scenario} drift, seed {seed}: done before, kept")
                continue
            log(f"scenario {scenario} drift, seed {seed}")
            stream_seed = 1000 * seed + (0 if scenario == "function" else 1)
            if scenario == "function":
                rows = agrawal_function_drift(args.rows, args.drift_at, functions=(1, 2), seed=stream_seed)
                title = "agrawal, function drift (fn 1 -> fn 2), ARF"
            elif scenario == "feature":
                rows = swap_features(agrawal_rows(args.rows, 2, stream_seed), SWAPS, args.drift_at)
                title = "agrawal, feature drift (age<->salary, elevel<->car), ARF"
            else:
                parser.error(f"unknown scenario {scenario!r}")
            columns = list(rows[0][0])
            entry = run_scenario(
                f"experiment_b_{scenario}", title, rows, columns,
                lambda seed=seed: forest.ARFClassifier(n_models=args.trees, seed=seed, binary_split=True,
                                                      leaf_prediction=args.leaf_prediction),
                samplings=samplings, alphas=alphas, interval=args.interval, n_repeats=args.repeats,
                reservoir=args.reservoir, seed=seed, drift_at=args.drift_at, out=args.out,
                artifacts=seed == min(seeds), learn_first=args.order == "learn-first")
            store.add(scenario, seed, entry)
            write_page()
    write_page()


if __name__ == "__main__":
    main()
