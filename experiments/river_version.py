"""Experiment B's function drift on one stream with the forest of another river version.

The paper's runs used river's ``ensemble.AdaptiveRandomForestClassifier`` of 2022 (river
0.11); ipfi's use ``forest.ARFClassifier`` of the river installed. River's ``Agrawal``
generator changed between those versions too, so the stream is written once to a file and
read back by the run: the forest is then the only difference.

Two steps, each run with the Python whose river is meant:

    # with ipfi's river: the stream of seed 0 (as experiment_b.py makes it)
    python experiments/river_version.py write-stream --seed 0 --stream /tmp/fn0.json
    # with each river: the paper's protocol on that stream (50 trees, learned first, reservoir 1,000)
    python experiments/river_version.py run --stream /tmp/fn0.json --out OUT --samplings geometric

``run`` writes ``OUT/experiment_b_function_traces.csv.gz`` (read by ``unused_share.py``) and
``OUT/river_version.json`` (river's version, the settings, each window's errors, CPU time),
and continues from its checkpoint when stopped. Python 3.10 with river 0.11.1 needs
numpy < 1.24 and pandas < 2 beside ipfi (``pip install --no-deps --ignore-requires-python``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
SCRIPT_VERSION = "1"
from _common import environment, fmt, log, table, write_json  # noqa: E402


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
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--drift-at", type=int, default=10_000)
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--samplings", default="uniform,geometric")
    parser.add_argument("--alphas", default="0.001,0.01")
    parser.add_argument("--reservoir", type=int, default=1000)
    parser.add_argument("--interval", type=int, default=2000)
    args = parser.parse_args()

    import river

    if args.step == "write-stream":
        from ipfi_cli.evaluation.drift import agrawal_function_drift

        rows = agrawal_function_drift(args.rows, args.drift_at, functions=(1, 2), seed=1000 * args.seed)
        args.stream.write_text(json.dumps({"seed": args.seed, "drift_at": args.drift_at, "river": river.__version__,
                                           "rows": [[x, y] for x, y in rows]}))
        log(f"{len(rows)} rows of river {river.__version__}'s Agrawal, seed {args.seed}, to {args.stream}")
        return
    if args.out is None:
        parser.error("run needs --out")
    from _learning import run_scenario

    stream = json.loads(args.stream.read_text())
    rows = [(x, y) for x, y in stream["rows"]]
    args.out.mkdir(parents=True, exist_ok=True)
    seed = int(stream["seed"])
    forest = forest_class()
    samplings = [s for s in args.samplings.split(",") if s]
    alphas = [float(a) for a in args.alphas.split(",") if a]
    log(f"river {river.__version__}: {forest.__module__}.{forest.__name__}, {args.trees} trees, seed {seed}")
    entry = run_scenario(
        "experiment_b_function", "agrawal, function drift (fn 1 -> fn 2), ARF", rows, list(rows[0][0]),
        lambda: forest(n_models=args.trees, seed=seed, binary_split=True),
        samplings=samplings, alphas=alphas, interval=args.interval, n_repeats=10, reservoir=args.reservoir, seed=seed,
        drift_at=stream["drift_at"], out=args.out, learn_first=True)
    result = {"script_version": SCRIPT_VERSION, "river": river.__version__,
              "forest": f"{forest.__module__}.{forest.__name__}(n_models={args.trees}, seed={seed}, binary_split=True)",
              "stream": {"file": args.stream.name, "river": stream["river"], "seed": seed},
              "order": "learn-first", "reservoir": args.reservoir, "environment": environment(), **entry}
    write_json(args.out / "river_version.json", result)
    print(table(["trace", "whole", "before", "after"],
                [[label, *(fmt(parts[p]["median"]) for p in ("whole", "before", "after"))]
                 for label, parts in entry["summary"].items()]))


if __name__ == "__main__":
    main()
