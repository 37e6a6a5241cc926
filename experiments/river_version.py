"""Experiments B and C on one stream with the forest of another river version.

The paper's runs used river's ``ensemble.AdaptiveRandomForestClassifier`` of 2022 (river
0.11); ipfi's use ``forest.ARFClassifier`` of the river installed. River's ``Agrawal``
generator changed between those versions too, so the stream is written once to a file and
read back by the run: the forest is then the only difference.

Two steps, each run with the Python whose river is meant:

    # with ipfi's river: the stream of seed 0 (as experiment_b.py makes it)
    python experiments/river_version.py write-stream --seed 0 --stream /tmp/fn0.json
    # or Experiment C's (as experiment_c.py --shuffle --width 0 makes it, 40,000 rows, swap at row 20,000)
    python experiments/river_version.py write-stream --scenario elec2-swap --partner nswdemand --stream /tmp/c0.json
    # with each river: the paper's protocol on that stream (50 trees, learned first, reservoir 1,000)
    python experiments/river_version.py run --stream /tmp/fn0.json --out OUT --samplings geometric

The stream file names its scenario (``agrawal-function``, Experiment B's function drift, when
it names none: files written before version 2), its columns, drift row and seed; ``run`` takes
them from there, with the scenario's defaults for ``--alphas`` (B: 0.001,0.01; C: 0.001).
``run`` writes the traces (``OUT/experiment_b_function_traces.csv.gz``, read by
``unused_share.py``, or ``OUT/experiment_c_traces.csv.gz``) and ``OUT/river_version.json``
(river's version, the settings, each window's errors, CPU time), and continues from its
checkpoint when stopped (run the same command again). Python 3.10 with river 0.11.1 needs
numpy < 1.24 and pandas < 2 beside ipfi (``pip install --no-deps --ignore-requires-python``).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
SCRIPT_VERSION = "2"  # 2: Experiment C's stream (--scenario elec2-swap); the stream file names its scenario
from _common import DEFAULT_DATA, environment, fmt, log, need_files, table, write_json  # noqa: E402

# each scenario: its key (the traces' file name) and defaults; B's title is fixed, C's names the swap
SCENARIOS = {
    "agrawal-function": {"key": "experiment_b_function", "title": "agrawal, function drift (fn 1 -> fn 2), ARF",
                         "rows": 20_000, "alphas": "0.001,0.01"},
    "elec2-swap": {"key": "experiment_c", "rows": 40_000, "alphas": "0.001"},
}


def forest_class() -> type:
    """River's adaptive random forest classifier, by its name in the river installed."""
    try:
        from river.forest import ARFClassifier
    except ImportError:  # river before 0.19
        from river.ensemble import AdaptiveRandomForestClassifier as ARFClassifier
    return ARFClassifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["write-stream", "run"])
    parser.add_argument("--stream", type=Path, required=True, help="the stream's JSON file")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--scenario", choices=list(SCENARIOS), default="agrawal-function",
                        help="write-stream: Experiment B's function drift (agrawal-function) or Experiment C's "
                             "shuffled elec2 with a feature swap (elec2-swap)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="elec2-swap: the folder with elec2.csv")
    parser.add_argument("--feature", default="nswprice", help="elec2-swap: the feature swapped")
    parser.add_argument("--partner", default=None,
                        help="elec2-swap: the feature it is swapped with (default: drawn with the seed, as "
                             "experiment_c.py does; the paper's code: nswdemand)")
    parser.add_argument("--width", type=int, default=0, help="elec2-swap: the swap's width in rows (0: at once)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=None, help="default: 20,000 (B), 40,000 (C)")
    parser.add_argument("--drift-at", type=int, default=None, help="default: the middle of the stream")
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--samplings", default="uniform,geometric")
    parser.add_argument("--alphas", default=None, help="default: 0.001,0.01 (B), 0.001 (C)")
    parser.add_argument("--reservoir", type=int, default=1000)
    parser.add_argument("--interval", type=int, default=2000)
    args = parser.parse_args()

    import river

    if args.step == "write-stream":
        n_rows = args.rows if args.rows is not None else SCENARIOS[args.scenario]["rows"]
        drift_at = args.drift_at if args.drift_at is not None else n_rows // 2
        header = {"scenario": args.scenario, "seed": args.seed, "drift_at": drift_at, "river": river.__version__}
        if args.scenario == "agrawal-function":
            from ipfi_cli.evaluation.drift import agrawal_function_drift

            rows = agrawal_function_drift(n_rows, drift_at, functions=(1, 2), seed=1000 * args.seed)
            header["title"] = SCENARIOS[args.scenario]["title"]
            what = f"river {river.__version__}'s Agrawal"
        else:
            import hashlib

            from experiment_c import drift_stream, elec2_rows

            from ipfi_cli.evaluation.drift import pick_swap_partner

            need_files(args.data, ["elec2.csv"])
            clean, columns = elec2_rows(args.data)
            partner = args.partner or pick_swap_partner(columns, args.feature, seed=args.seed)
            try:
                rows = drift_stream(clean, args.feature, partner, drift_at, n_rows, args.seed, shuffle=True,
                                    width=args.width)
            except ValueError as e:
                parser.error(str(e))
            header |= {"title": f"elec2, feature drift ({args.feature}<->{partner} at row {drift_at:,}), ARF",
                       "feature": args.feature, "partner": partner, "shuffle": True, "width": args.width,
                       "data": "elec2.csv", "data_sha256": hashlib.sha256((args.data / "elec2.csv").read_bytes())
                       .hexdigest()}
            what = f"elec2 ({args.feature} swapped with {partner} at row {drift_at}, shuffled as experiment_c.py)"
        header["columns"] = list(rows[0][0])
        args.stream.write_text(json.dumps({**header, "rows": [[x, y] for x, y in rows]}))
        log(f"{len(rows)} rows of {what}, seed {args.seed}, to {args.stream}")
        return
    if args.out is None:
        parser.error("run needs --out")
    from _learning import run_scenario

    stream = json.loads(args.stream.read_text())
    scenario = stream.get("scenario", "agrawal-function")  # files of version 1 held B's stream only
    if scenario not in SCENARIOS:
        parser.error(f"{args.stream} holds a stream of scenario {scenario!r}, not one of {', '.join(SCENARIOS)}")
    key = SCENARIOS[scenario]["key"]
    title = stream.get("title", SCENARIOS[scenario].get("title", scenario))
    rows = [(x, y) for x, y in stream["rows"]]
    columns = stream.get("columns", list(rows[0][0]))
    args.out.mkdir(parents=True, exist_ok=True)
    seed = int(stream["seed"])
    forest = forest_class()
    samplings = [s for s in args.samplings.split(",") if s]
    alphas = [float(a) for a in (args.alphas or SCENARIOS[scenario]["alphas"]).split(",") if a]
    log(f"river {river.__version__}: {forest.__module__}.{forest.__name__}, {args.trees} trees, seed {seed}; "
        f"{scenario}: {len(rows)} rows, drift at {stream['drift_at']}")
    entry = run_scenario(
        key, title, rows, columns,
        lambda: forest(n_models=args.trees, seed=seed, binary_split=True),
        samplings=samplings, alphas=alphas, interval=args.interval, n_repeats=10, reservoir=args.reservoir, seed=seed,
        drift_at=stream["drift_at"], out=args.out, learn_first=True)
    result = {"script_version": SCRIPT_VERSION, "river": river.__version__,
              "forest": f"{forest.__module__}.{forest.__name__}(n_models={args.trees}, seed={seed}, binary_split=True)",
              "stream": {"file": args.stream.name, "scenario": scenario, "river": stream["river"], "seed": seed,
                         **{k: stream[k] for k in ("feature", "partner", "shuffle", "width", "data_sha256")
                            if k in stream}},
              "order": "learn-first", "reservoir": args.reservoir, "environment": environment(), **entry}
    write_json(args.out / "river_version.json", result)
    print(table(["trace", "whole", "before", "after"],
                [[label, *(fmt(parts[p]["median"]) for p in ("whole", "before", "after"))]
                 for label, parts in entry["summary"].items()]))


if __name__ == "__main__":
    main()
