"""Experiment C: uniform vs geometric sampling on elec2 with a feature drift.

The first ``--rows`` rows of elec2 stream through a river adaptive random forest
learning prequentially; at ``--drift-at`` (the middle) the values of ``nswprice``, the
most important feature, are swapped with those of a randomly chosen other feature.
iPFI with uniform and with geometric sampling (same alpha) is compared with interval
PFI: after the drift, uniform sampling keeps drawing replacement values from before
the drift, which lie off the new data manifold, so its estimates stay skewed; geometric
sampling forgets them and follows interval PFI.

    python experiments/experiment_c.py [--data DIR] [--out DIR] [--rows 20000] [--trees 5] [--seeds 0,1,2]

Each seed's run is kept in OUT/experiment_c.json as soon as it ends; run the same command
again to continue a stopped experiment. The run under way is saved at the end of each interval
window (``OUT/experiment_c_seed<s>.checkpoint``) and continues from there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
SCRIPT_VERSION = "2"  # 2: one run per seed, kept as it ends (resumable); ARF with binary_split=True
from _common import DEFAULT_DATA, DEFAULT_OUT, environment, fmt, log, need_files, table  # noqa: E402
from _learning import RunStore, pooled_summary, run_scenario, summary_table  # noqa: E402

# the supplement's table, elec2 "fe. 1", alpha 0.001: whole Q2 IQR Q1 Q3, before ..., after ...
PAPER = {
    "ipfi-uniform-0.001": (0.270, 0.305, 0.042, 0.347, 0.041, 0.061, 0.033, 0.093, 0.353, 0.068, 0.311, 0.378),
    "ipfi-geometric-0.001": (0.037, 0.039, 0.033, 0.072, 0.037, 0.066, 0.032, 0.098, 0.037, 0.022, 0.036, 0.057),
}


def elec2_rows(data: Path, rows: int | None = None) -> tuple[list, list[str]]:
    """``elec2.csv``'s first ``rows`` rows (all when None) as ``(features, class)`` pairs, and its feature columns."""
    import pandas as pd

    frame = pd.read_csv(data / "elec2.csv")
    if rows is not None:
        frame = frame.iloc[:rows]
    columns = [c for c in frame.columns if c != "class"]
    clean = [(dict(zip(columns, values)), label)
             for values, label in zip(frame[columns].itertuples(index=False, name=None), frame["class"])]
    return clean, columns


def drift_stream(clean: list, feature: str, partner: str, drift_at: int, rows: int, seed: int, *,
                 shuffle: bool, width: int = 0) -> list:
    """One run's stream: ``feature`` swapped with ``partner`` from row ``drift_at`` on.

    Without ``shuffle``, ``clean`` as it is; with it, the stream of the paper's published code:
    ``drift_at`` rows drawn at random (with ``seed``) in random order, then the same rows again,
    ``rows`` rows in all; ``width`` > 0 (with ``shuffle``) makes the swap a sigmoid that wide.
    """
    import numpy as np

    from ipfi_cli.evaluation.drift import gradual_drift, swap_features

    columns = list(clean[0][0]) if clean else []
    if feature not in columns or partner not in columns or partner == feature:
        raise ValueError(f"the swapped features must be two columns of the data: {', '.join(columns)}")
    if width and not shuffle:
        raise ValueError("a gradual swap (width) needs the shuffled stream")
    if shuffle and not 0 < rows - drift_at <= drift_at:
        raise ValueError("the shuffled stream replays the rows before the drift after it: rows must be more than "
                         "drift_at and at most twice it")
    stream = clean
    if shuffle and width:  # the paper's code: both streams read the same sample from its start
        sample = [clean[i] for i in np.random.default_rng(seed).permutation(len(clean))[:rows]]
        swapped = swap_features(sample, {feature: partner}, 0)
        return gradual_drift(sample, swapped, drift_at, width, seed)[:rows]
    if shuffle:  # as the paper's code: one seeded sample in random order, replayed after the drift
        sample = [clean[i] for i in np.random.default_rng(seed).permutation(len(clean))[:drift_at]]
        stream = sample + sample[: rows - drift_at]
    return swap_features(stream, {feature: partner}, drift_at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with elec2.csv")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--rows", type=int, default=20_000, help="stream the first this many rows (all: 45312)")
    parser.add_argument("--drift-at", type=int, default=None, help="default: the middle of the stream")
    parser.add_argument("--feature", default="nswprice")
    parser.add_argument("--partner", default=None,
                        help="the feature swapped with --feature (default: one drawn with each run's seed; the "
                             "paper's published code swapped nswprice with nswdemand)")
    parser.add_argument("--interval", type=int, default=2000)
    parser.add_argument("--trees", type=int, default=5, help="ARF ensemble size (the paper: 50)")
    parser.add_argument("--alpha", type=float, default=0.001)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--reservoir", type=int, default=100)
    parser.add_argument("--seeds", default="0", help="comma-separated; one run per seed")
    parser.add_argument("--shuffle", action="store_true",
                        help="the stream of the paper's published code: --drift-at rows drawn at random (with the "
                             "seed) from the whole file, in random order, then the same rows again with the "
                             "features swapped, up to --rows rows in all (without it: the file's first --rows rows "
                             "in time order)")
    parser.add_argument("--width", type=int, default=0,
                        help="the drift's width in rows: 0 swaps at --drift-at at once; more draws each row from the "
                             "swapped stream with river's sigmoid (ConceptDriftStream), as the paper's code does "
                             "(width 1 %% of the stream, 400 rows for 40,000); needs --shuffle")
    parser.add_argument("--order", choices=["explain-first", "learn-first"], default="explain-first",
                        help="explain each row before the model learns it (prequential), or after (the order of "
                             "the paper's published code)")
    parser.add_argument("--leaf-prediction", choices=["nba", "mc", "nb"], default="nba",
                        help="the forest's leaf prediction (river's default nba: naive Bayes adaptive; mc: majority "
                             "class, whose prediction depends only on the features the tree splits on)")
    parser.add_argument("--notes", type=Path, default=None, help="markdown bullet notes to add to the page")
    parser.add_argument("--page-only", action="store_true", help="rebuild the page from OUT/experiment_c.json")
    args = parser.parse_args()
    md_path = args.out / "experiment_c.md"
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    settings = {"rows": args.rows, "drift_at": args.drift_at, "feature": args.feature, "interval": args.interval,
                "trees": args.trees, "alpha": args.alpha, "repeats": args.repeats, "reservoir": args.reservoir,
                "model": "river forest.ARFClassifier(n_models=trees, seed=seed, binary_split=True)",
                "script_version": SCRIPT_VERSION}
    if args.order != "explain-first":  # kept out otherwise: runs saved before the option stay valid
        settings["order"] = args.order
    if args.shuffle:
        settings["shuffle"] = True
    if args.partner:
        settings["partner"] = args.partner
    if args.width:
        settings["width"] = args.width
    leaves = "" if args.leaf_prediction == "nba" else f", leaf_prediction={args.leaf_prediction!r}"
    if leaves:  # kept out otherwise: runs saved before the option stay valid
        settings["leaf_prediction"] = args.leaf_prediction
        settings["model"] = settings["model"].replace(")", f"{leaves})")
    store = RunStore(args.out / "experiment_c.json", settings)
    if args.notes and args.notes.is_file():
        store.extra["notes"] = [line[2:].strip() for line in args.notes.read_text().splitlines()
                                if line.startswith("- ")]

    def write_page() -> None:
        entries = store.of("elec2")
        text = [
            "# Experiment C: uniform vs geometric sampling under feature drift (elec2)",
            "",
            "Error between iPFI's estimate and interval PFI at the end of each interval window (the paper's error), "
            "median (IQR) [Q1, Q3] over the windows of every seed's run, pooled, over the whole stream, before and "
            "after the drift, beside the supplement's table (elec2 fe. 1, alpha 0.001).",
            "",
        ]
        if not entries:
            text += ["(not run yet)", ""]
        else:
            first = entries[0]
            cpu = [e.get("cpu_seconds", float("nan")) for e in entries]
            drift_at = first["drift_at"]
            text += [
                f"{len(entries)} run(s); {first['n_rows']:,} rows each; `{args.feature}` swapped from row "
                f"{drift_at:,} on with " + (f"`{args.partner}` (`--partner`" if args.partner else
                                             "a feature chosen at random by each run's seed (")
                + ("" if args.partner else ", ".join(f"seed {e['seed']}: `{e['partner']}`" for e in entries))
                + f"); CPU time per run {min(cpu) / 60:.1f}-{max(cpu) / 60:.1f} min; ARF accuracy over the last "
                "2,000 rows " + ", ".join(f"{e['final_accuracy']:.1%}" for e in entries) + ".",
                "",
                summary_table({"summary": pooled_summary(entries, drift_at)}, PAPER),
                "",
            ]
            if len(entries) > 1:
                text += ["Per seed (median error: whole / before / after):", "",
                         table(["trace", *(f"seed {e['seed']}" for e in entries)],
                               [[label, *(" / ".join(fmt(e["summary"][label][part]["median"])
                                                     for part in ("whole", "before", "after")) for e in entries)]
                                for label in first["summary"]]), ""]
            text += [*[f"![elec2]({f})" for f in first["figures"]], ""]
            if first["figures"]:
                text += [f"Traces of both samplings and interval PFI (seed {first['seed']}): "
                         f"`experiment_c_traces.csv.gz` (redraw with `ipfi plot {args.out}/experiment_c_traces.csv.gz "
                         f"-o out.png --drift-at {drift_at}`).", ""]
        text += [
            "## Settings",
            "",
            f"- Command: `python experiments/experiment_c.py --out {args.out} --rows {args.rows} "
            + (f"--drift-at {args.drift_at} " if args.drift_at is not None else "")
            + f"--trees {args.trees} --alpha {args.alpha} --interval {args.interval} --repeats {args.repeats} "
            f"--reservoir {args.reservoir} --seeds {args.seeds}"
            + ("" if args.order == "explain-first" else f" --order {args.order}")
            + (" --shuffle" if args.shuffle else "")
            + (f" --partner {args.partner}" if args.partner else "")
            + (f" --width {args.width}" if args.width else "")
            + ("" if args.leaf_prediction == "nba" else f" --leaf-prediction {args.leaf_prediction}")
            + "` (a stopped run continues: finished runs are kept "
            "in `experiment_c.json`, the one under way in a checkpoint at each window's end).",
            (f"- Data: {drift_at:,} rows of `elec2.csv` drawn at random with each run's seed, in random order, then "
             f"the same rows again from the first, with the features swapped, {args.rows:,} rows in all (`--shuffle`: "
             "the stream of the paper's published code, `mmschlk/iPFI`'s `data_sets.py`); target `class`, all 8 "
             "other columns as features."
             + (f" The swap is gradual (`--width {args.width}`): each row comes from the swapped replay with river's "
                "sigmoid probability around the drift row (`ConceptDriftStream`), as in the paper's code."
                if args.width else "") if args.shuffle else
             f"- Data: the first {args.rows:,} rows of `elec2.csv` in their time order (target `class`, all 8 "
             "other columns as features)."),
            f"- Model: river `forest.ARFClassifier(n_models={args.trees}, seed=s, binary_split=True{leaves})` "
            + ("(the paper's), " if args.leaf_prediction == "nba" else "(the paper's, but for the leaves), ")
            + ("learning each row before it is explained (`--order learn-first`, as the paper's published code "
               "does)." if args.order == "learn-first" else "learning each row after it is explained."),
            f"- iPFI: uniform and geometric sampling, alpha {args.alpha}, reservoir {args.reservoir} rows, "
            f"M = {args.repeats}, zero-one loss. Interval PFI: batch PFI (M = {args.repeats}) of the current model on "
            f"each window of {args.interval:,} rows.",
            f"- Environment: {environment()}.",
            "",
        ]
        store.write_page(md_path, text, args.out / "experiment_c_windows.csv", SCRIPT_VERSION)

    if args.page_only:
        write_page()
        return
    need_files(args.data, ["elec2.csv"])
    from river import forest

    from ipfi_cli.evaluation.drift import pick_swap_partner

    clean, columns = elec2_rows(args.data, None if args.shuffle else args.rows)
    drift_at = args.drift_at if args.drift_at is not None else min(args.rows, len(clean)) // 2
    if args.width and not args.shuffle:
        parser.error("--width needs --shuffle (the paper's stream)")
    if args.shuffle and not 0 < args.rows - drift_at <= drift_at:
        parser.error("--shuffle replays the rows before the drift after it: --rows must be more than --drift-at "
                     "and at most twice it")
    for seed in seeds:
        if store.done("elec2", seed):
            log(f"elec2, seed {seed}: done before, kept")
            continue
        partner = args.partner or pick_swap_partner(columns, args.feature, seed=seed)
        if partner not in columns or partner == args.feature:
            parser.error(f"--partner must be another column of elec2.csv: {', '.join(columns)}")
        rows = drift_stream(clean, args.feature, partner, drift_at, args.rows, seed, shuffle=args.shuffle,
                            width=args.width)
        log(f"elec2, seed {seed}: {len(rows)} rows, {args.feature} swapped with {partner} at row {drift_at}")
        entry = run_scenario(
            "experiment_c", f"elec2, feature drift ({args.feature}<->{partner} at row {drift_at:,}), ARF",
            rows, columns, lambda seed=seed: forest.ARFClassifier(n_models=args.trees, seed=seed, binary_split=True,
                                                             leaf_prediction=args.leaf_prediction),
            samplings=["uniform", "geometric"], alphas=[args.alpha], interval=args.interval,
            n_repeats=args.repeats, reservoir=args.reservoir, seed=seed, drift_at=drift_at, out=args.out,
            artifacts=seed == min(seeds), learn_first=args.order == "learn-first")
        store.add("elec2", seed, entry | {"partner": partner, "drift_at": drift_at})
        write_page()
    write_page()


if __name__ == "__main__":
    main()
