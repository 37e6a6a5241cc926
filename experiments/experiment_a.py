"""Experiment A: iPFI of a static model vs batch PFI (the paper's Table 1).

For each data set a model like the paper's is fitted on a random 67 % of the rows
(the paper's split), then iPFI explains the model over the whole data set streamed in
``--orderings`` random orders, with uniform and with geometric sampling, and each run's
final estimate is compared with batch PFI of the same model on the same rows (computed
once). The error is the paper's (both vectors clipped at 0 and divided by their sum,
then the L1 distance); the page reports its median and IQR over the orderings.

    python experiments/experiment_a.py [--data DIR] [--out DIR] [--datasets agrawal,bank] ...

Results: ``OUT/experiment_a.md`` (rewritten after every data set, so partial results
exist), ``OUT/experiment_a.json`` (every run's numbers) and ``OUT/experiment_a_<data>.png``.
Every finished run (data set, sampling, ordering) is also appended to ``--runs-csv`` with
the script version and its wall and CPU time; with ``--resume`` the runs already there
(same settings) are not run again, so a stopped run continues where it stopped, and the
medians are taken over all runs in the file.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
SCRIPT_VERSION = "2"  # 2: runs appended to a CSV, resumable per run
from _common import DEFAULT_DATA, DEFAULT_OUT, environment, fmt, log, need_files, table, write_json, write_text  # noqa: E402

# the paper's Table 1: model, performance, uniform median (IQR), geometric median (IQR)
PAPER = {
    "agrawal": ("LGBM", "99%", 0.011, 0.006, 0.010, 0.006),
    "elec2": ("LGBM", "88%", 0.038, 0.012, 0.037, 0.011),
    "adult": ("GBT", "86%", 0.126, 0.040, 0.114, 0.025),
    "bank": ("NN", "91%", 0.126, 0.024, 0.132, 0.013),
    "bike": ("LGBM", "26.6 MAE", 0.022, 0.005, 0.019, 0.008),
}
OUR_MODEL = {
    "agrawal": "HistGradientBoostingClassifier",
    "elec2": "HistGradientBoostingClassifier",
    "adult": "ordinal-encoded GradientBoostingClassifier(n_estimators=200)",
    "bank": "one-hot + standardised MLPClassifier((128, 64), max_iter=50)",
    "bike": "HistGradientBoostingRegressor",
}
FILES = {"elec2": "elec2.csv", "adult": "adult.csv", "bank": "bank.csv", "bike": "bike.csv"}


def load(name: str, data: Path, seed: int):
    """(features DataFrame, target array, is_classifier) with the paper's preprocessing."""
    import pandas as pd

    if name == "agrawal":
        from ipfi_cli.evaluation.drift import agrawal_rows

        rows = agrawal_rows(20_000, function=1, seed=seed)
        return pd.DataFrame([x for x, _ in rows]), np.array([y for _, y in rows]), True
    frame = pd.read_csv(data / FILES[name])
    if name == "adult":
        frame = frame.dropna().reset_index(drop=True)
        return frame.drop(columns=["class"]), frame["class"].to_numpy(), True
    if name == "bank":
        return frame.drop(columns=["y"]), frame["y"].to_numpy(), True
    if name == "bike":
        frame = frame.drop(columns=["instant", "dteday", "casual", "registered"])
        return frame.drop(columns=["cnt"]), frame["cnt"].to_numpy(dtype=float), False
    return frame.drop(columns=["class"]), frame["class"].to_numpy(), True


def make_model(name: str, X, seed: int):
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import (
        GradientBoostingClassifier,
        HistGradientBoostingClassifier,
        HistGradientBoostingRegressor,
    )
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    categorical = [c for c in X.columns if X[c].dtype == object or str(X[c].dtype).startswith(("str", "string"))]
    numeric = [c for c in X.columns if c not in categorical]
    if name in ("agrawal", "elec2"):
        return HistGradientBoostingClassifier(random_state=seed)
    if name == "bike":
        return HistGradientBoostingRegressor(random_state=seed)
    if name == "adult":
        encode = ColumnTransformer([("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1),
                                     categorical)], remainder="passthrough")
        return make_pipeline(encode, GradientBoostingClassifier(n_estimators=200, random_state=seed))
    encode = ColumnTransformer([("cat", OneHotEncoder(handle_unknown="ignore"), categorical),
                                ("num", StandardScaler(), numeric)])
    return make_pipeline(encode, MLPClassifier(hidden_layer_sizes=(128, 64), max_iter=50, random_state=seed))


RUN_FIELDS = ["script_version", "dataset", "n_rows", "sampling", "ordering", "error", "wall_seconds",
              "cpu_seconds", "alpha", "repeats", "reservoir", "seed", "max_rows", "estimates"]


def read_runs(path: Path, name: str, args) -> list[dict]:
    """The runs of data set ``name`` in the CSV made with the same settings (estimates parsed)."""
    import csv
    import json

    if not path.is_file():
        return []
    same = {"alpha": str(args.alpha), "repeats": str(args.repeats), "reservoir": str(args.reservoir),
            "seed": str(args.seed), "max_rows": str(args.max_rows or "")}
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if r["dataset"] == name and all(r[k] == v for k, v in same.items())]
    return [{**r, "ordering": int(r["ordering"]), "error": float(r["error"]),
             "estimates": json.loads(r["estimates"])} for r in rows]


def append_run(path: Path, row: dict) -> None:
    import csv
    import os

    new = not path.is_file()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, RUN_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow(row)
        f.flush()
        os.fsync(f.fileno())


def boxplot(path: Path, result, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = result.names
    groups = [("batch PFI (repeats)", result.batch.values.T), ]
    for sampling in ("geometric", "uniform"):
        runs = [r["estimates"] for r in result.runs if r["sampling"] == sampling]
        if runs:
            groups.append((f"iPFI {sampling} (orderings)", np.array(runs)))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 0.32 * len(names) + 1.6), sharex=True,
                             sharey=True)
    for ax, (label, values) in zip(np.atleast_1d(axes), groups):
        ax.boxplot(values[:, ::-1], orientation="horizontal", widths=0.6)
        ax.set_yticks(range(1, len(names) + 1), names[::-1])
        ax.set_title(label, fontsize=10)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_xlabel("PFI")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def page(results: dict, args, total_seconds: float) -> str:
    rows = []
    for name in args.datasets:
        paper = PAPER[name]
        ours = results.get(name)
        if ours is None or "summary" not in ours:
            rows.append([name, "(not run yet)", "", "", "", f"{paper[2]:.3f} ({paper[3]:.3f})",
                         f"{paper[4]:.3f} ({paper[5]:.3f})", ""])
            continue
        u, g = ours["summary"].get("uniform"), ours["summary"].get("geometric")
        cell = lambda s: "–" if s is None else f"{fmt(s['median'])} ({fmt(s['iqr'])})"  # noqa: E731
        rows.append([f"{name} ({ours['n_rows']:,})", f"{ours['model_short']} ({ours['performance']})",
                     f"{ours['orderings_done']}", cell(u), cell(g),
                     f"{paper[2]:.3f} ({paper[3]:.3f})", f"{paper[4]:.3f} ({paper[5]:.3f})",
                     f"{ours['seconds']:.0f} s" + (f" ({ours['cpu_seconds']:.0f} s CPU, the runs that recorded it)"
                                                   if ours.get("cpu_seconds", 0) > 0 else "")])
    text = [
        "# Experiment A: iPFI vs batch PFI on a static model",
        "",
        "Median error of iPFI's final estimate against batch PFI over random orderings of each data set "
        "(IQR, Q3 − Q1, in brackets), beside the paper's Table 1. Error: both importance vectors clipped at 0 "
        "and divided by their sum (the paper's published evaluation code), then the sum of the absolute "
        "differences (0 = identical shares, 2 = disjoint).",
        "",
        table(["data (N)", "model (perf.)", "orderings", "ours uniform", "ours geometric", "paper uniform",
               "paper geometric", "runtime"], rows),
        "",
        "## Settings",
        "",
        f"- Command: `python experiments/experiment_a.py --orderings {args.orderings} --repeats {args.repeats} "
        f"--alpha {args.alpha} --reservoir {args.reservoir} --seed {args.seed}"
        + (f" --max-rows {args.max_rows}" if args.max_rows else "")
        + (" --orderings-for " + ",".join(f"{k}={v}" for k, v in results.get("_args", {}).get("orderings_for", {}).items())  # noqa: E501
           if results.get("_args", {}).get("orderings_for") else "") + "`",
        f"- Seed {args.seed} (model fitting, the 67/33 split, the orderings and every explainer derive from it).",
        f"- iPFI: alpha = {args.alpha}, M = {args.repeats} realisations, reservoir of {args.reservoir} rows "
        "(the paper's published runs used alpha 0.001 and 1000), uniform and geometric sampling; zero-one loss "
        "for the classifiers, absolute error for bike (as in the paper).",
        f"- Batch PFI: M = {args.repeats} permutations of all N rows, with the N/(N-1) scaling, computed once per "
        "data set (it does not depend on the ordering) and shared by all runs.",
        "- Models are fitted on a random 67 % of the rows (the paper's split); performance is on the other 33 %; "
        "both iPFI and batch PFI use all N rows. Categorical columns are encoded inside a scikit-learn "
        "Pipeline, so the explainers permute raw columns.",
        "- Data: agrawal = 20,000 rows of river's `Agrawal(classification_function=1)`; adult with `dropna()` "
        "(45,222 rows); bike without `instant, dteday, casual, registered`; elec2 and bank as they are.",
        f"- Environment: {environment()}.",
        f"- Total runtime: {total_seconds / 60:.1f} min.",
        "",
    ]
    notes = results.get("_notes")
    if notes:
        text += ["## Where and why our numbers differ from the paper's", ""] + [f"- {n}" for n in notes] + [""]
    text += ["## Per-feature estimates", ""]
    for name in args.datasets:
        ours = results.get(name)
        if ours is None or "names" not in ours:
            continue
        text += [f"### {name}", "", f"![{name}](experiment_a_{name}.png)", ""]
        header = ["feature", "batch PFI (std)", "uniform iPFI (median)", "geometric iPFI (median)"]
        body = [[f, f"{b:.4f} ({s:.4f})", fmt(ours["median_estimates"].get("uniform", {}).get(f, float('nan')), 4),
                 fmt(ours["median_estimates"].get("geometric", {}).get(f, float('nan')), 4)]
                for f, b, s in zip(ours["names"], ours["batch_mean"], ours["batch_std"])]
        text += [table(header, body), ""]
    return "\n".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with the paper's datasets")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--datasets", default="agrawal,elec2,adult,bank,bike")
    parser.add_argument("--orderings", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--alpha", type=float, default=0.001)
    parser.add_argument("--reservoir", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-rows", type=int, default=None, help="subsample each data set to this many rows")
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--notes", type=Path, default=None, help="markdown bullet notes to add to the page")
    parser.add_argument("--page-only", action="store_true", help="rebuild the page from OUT/experiment_a.json")
    parser.add_argument("--resume", action="store_true",
                        help="keep the data sets already finished in OUT/experiment_a.json and run the others")
    parser.add_argument("--samplings", default="uniform,geometric",
                        help="run only these samplings (the page shows every sampling in --runs-csv)")
    parser.add_argument("--runs-csv", type=Path, default=None,
                        help="append every finished run here (default OUT/experiment_a_runs.csv)")
    parser.add_argument("--orderings-for", default="",
                        help="per data set orderings, e.g. bank=5,adult=5 (default: --orderings)")
    args = parser.parse_args()
    args.datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    unknown = [d for d in args.datasets if d not in PAPER]
    if unknown:
        parser.error(f"unknown data set(s): {', '.join(unknown)}")
    json_path = args.out / "experiment_a.json"
    runs_csv = args.runs_csv or args.out / "experiment_a_runs.csv"
    md_path = args.out / "experiment_a.md"
    notes = []
    if args.notes and args.notes.is_file():
        notes = [line[2:].strip() for line in args.notes.read_text().splitlines() if line.startswith("- ")]
    if args.page_only:
        import json

        results = json.loads(json_path.read_text())
        results["_notes"] = notes or results.get("_notes", [])
        saved = results.get("_args", {})
        for key in ("orderings", "repeats", "alpha", "reservoir", "seed", "max_rows"):
            setattr(args, key, saved.get(key, getattr(args, key)))
        write_text(md_path, page(results, args, results.get("_total_seconds", float("nan"))))
        return
    need_files(args.data, [FILES[d] for d in args.datasets if d in FILES])
    args.out.mkdir(parents=True, exist_ok=True)

    from sklearn.metrics import accuracy_score, mean_absolute_error
    from sklearn.model_selection import train_test_split

    from ipfi_cli.core import default_loss
    from ipfi_cli.evaluation import compare_static
    from ipfi_cli.models import as_predictor

    results: dict = {"_notes": notes, "_args": {k: getattr(args, k) for k in
                                                ("orderings", "repeats", "alpha", "reservoir", "seed", "max_rows")}}
    if args.resume and json_path.is_file():
        import json

        results = json.loads(json_path.read_text())
        results["_notes"] = notes or results.get("_notes", [])
    per_dataset = {k.strip(): int(v) for k, v in (item.split("=") for item in args.orderings_for.split(",") if item)}
    results["_args"]["orderings_for"] = {**results["_args"].get("orderings_for", {}), **per_dataset}
    started = time.perf_counter() - results.get("_total_seconds", 0.0)
    for name in args.datasets:
        orderings = per_dataset.get(name, args.orderings)
        earlier = [r for r in read_runs(runs_csv, name, args) if r["ordering"] < orderings] if args.resume else []
        done = {(r["ordering"], r["sampling"]) for r in earlier}
        samplings = [s.strip() for s in args.samplings.split(",") if s.strip()]
        if args.resume and all((k, s) in done for k in range(orderings) for s in samplings) \
                and "summary" in results.get(name, {}):
            log(f"{name}: already done, kept")
            continue
        t0 = time.perf_counter()
        X, y, classification = load(name, args.data, args.seed)
        if args.max_rows and len(X) > args.max_rows:
            keep = np.sort(np.random.default_rng(args.seed).choice(len(X), args.max_rows, replace=False))
            X, y = X.iloc[keep].reset_index(drop=True), y[keep]
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.33, random_state=args.seed)
        model = make_model(name, X, args.seed).fit(X_train, y_train)
        predicted = model.predict(X_test)
        performance = (f"{accuracy_score(y_test, predicted):.1%}" if classification
                       else f"{mean_absolute_error(y_test, predicted):.1f} MAE")
        fit_seconds = time.perf_counter() - t0
        log(f"{name}: {len(X)} rows, model fitted in {fit_seconds:.0f} s, test performance {performance}")
        predictor = as_predictor(model)
        loss = default_loss(classification)
        entry = {"n_rows": len(X), "model": OUR_MODEL[name], "model_short": PAPER[name][0],
                 "performance": performance, "fit_seconds": fit_seconds, "orderings_done": 0, "runs": []}

        clock, n_rows = [time.process_time()], len(X)

        def on_run(run, entry=entry, name=name, clock=clock, n_rows=n_rows):
            import json

            cpu = time.process_time() - clock[0]   # one process: the CPU since the last run (the first: + batch PFI)
            clock[0] = time.process_time()
            entry["runs"].append({"sampling": run.sampling, "ordering": run.ordering, "error": run.error,
                                  "seconds": run.seconds, "estimates": run.estimates.tolist()})
            append_run(runs_csv, {"script_version": SCRIPT_VERSION, "dataset": name, "n_rows": n_rows,
                                  "sampling": run.sampling, "ordering": run.ordering, "error": repr(run.error),
                                  "wall_seconds": round(run.seconds, 2), "cpu_seconds": round(cpu, 2),
                                  "alpha": args.alpha, "repeats": args.repeats, "reservoir": args.reservoir,
                                  "seed": args.seed, "max_rows": args.max_rows or "",
                                  "estimates": json.dumps(run.estimates.tolist())})
            log(f"{name}: {run.sampling} ordering {run.ordering}: error {run.error:.4f} "
                f"({run.seconds:.0f} s wall, {cpu:.0f} s CPU)")
            write_json(json_path, results)

        results[name] = entry
        result = compare_static(predictor, X, y, list(X.columns), orderings=orderings, loss=loss,
                                alpha=args.alpha, n_repeats=args.repeats, reservoir_size=args.reservoir,
                                seed=args.seed, n_jobs=args.n_jobs, on_run=on_run, skip=done,
                                samplings=samplings)
        log(f"{name}: batch PFI took {result.batch_seconds:.0f} s")
        from ipfi_cli.evaluation.metrics import summarise

        every_run = [r for r in read_runs(runs_csv, name, args) if r["ordering"] < orderings]
        present = [s for s in ("uniform", "geometric") if any(r["sampling"] == s for r in every_run)]
        summary = {s: summarise(r["error"] for r in every_run if r["sampling"] == s) for s in present}
        entry.update({
            "names": result.names, "batch_mean": result.batch.mean, "batch_std": result.batch.std,
            "batch_values": result.batch.values.tolist(), "batch_seconds": result.batch_seconds,
            "summary": {s: v.as_dict() for s, v in summary.items()},
            "orderings_done": " / ".join(str(summary[s].n) for s in present),   # per sampling, from the CSV
            "median_estimates": {s: dict(zip(result.names, np.median([r["estimates"] for r in every_run
                                                                     if r["sampling"] == s], axis=0).tolist()))
                                 for s in present},
            "seconds": time.perf_counter() - t0,
            "cpu_seconds": float(np.nansum([float(r["cpu_seconds"]) for r in every_run])),
            "runs": [{k: r[k] for k in ("sampling", "ordering", "error", "estimates")} for r in every_run],
        })

        class Every:   # what boxplot reads
            batch, names, runs = result.batch, result.names, every_run
        boxplot(args.out / f"experiment_a_{name}.png", Every,
                f"{name}: PFI per feature, batch vs iPFI ({orderings} orderings)")
        results["_total_seconds"] = time.perf_counter() - started
        write_json(json_path, results)
        write_text(md_path, page(results, args, time.perf_counter() - started))
        log(f"{name}: done in {entry['seconds']:.0f} s; " + ", ".join(
            f"{s} median {v.median:.4f} IQR {v.iqr:.4f}" for s, v in summary.items()))
    write_text(md_path, page(results, args, time.perf_counter() - started))


if __name__ == "__main__":
    main()
