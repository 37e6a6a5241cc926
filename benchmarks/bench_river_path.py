"""The learning path's own cost: ipfi on a river model that learns, against the bare calls.

A river ``HoeffdingTreeClassifier`` learns river's Agrawal stream prequentially (explain row
t, then ``learn_one``), M = 10, geometric reservoir of 100, zero-one loss. Three runs, in
interleaved rounds (CPU time, ``time.process_time``):

* **bare**: for each row, ``predict_one`` on every perturbed row ipfi builds for it (recorded
  once beforehand, untimed) and one ``learn_one``: the calls the row needs;
* **ipfi**: ``IPFIEstimator.explain_one`` + ``learn_one``, as ``ipfi explain --learn`` runs it;
  the river adapter asks each distinct perturbed row once (a quarter of Agrawal's repeat);
* **ipfi, every row asked**: the same with that turned off, to show what it saves.

Target (the cost-of-a-row issue): ipfi / bare <= 1.05.

    python benchmarks/bench_river_path.py [--rows 1500] [--rounds 4]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()

    from river import tree

    import ipfi_cli.models.adapters as adapters
    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.evaluation.drift import agrawal_rows
    from ipfi_cli.models import as_predictor

    rows = agrawal_rows(args.rows, 2, 7)
    columns = list(rows[0][0])

    def explainer(predictor: Any) -> IPFIEstimator:
        return IPFIEstimator(predictor, columns, loss="zero-one", n_repeats=10, sampling="geometric",
                             reservoir_size=100, seed=0)

    class Recorder:
        def __init__(self, inner: Any) -> None:
            self.inner, self.records = inner, []

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def predict_records(self, records: list[dict[str, Any]], output: Any, target: Any) -> Any:
            self.records.append([dict(r) for r in records])
            return self.inner.predict_records(records, output, target)

    recorder = Recorder(as_predictor(tree.HoeffdingTreeClassifier()))
    recording = explainer(recorder)
    for x, y in rows:
        recording.explain_one(x, y)
        recorder.learn_one(x, y)
    per_row = [[], *recorder.records]  # the first row is only stored
    asked = sum(len(r) for r in per_row)
    distinct = sum(len({tuple(d.items()) for d in r}) for r in per_row)

    keep_distinct = adapters._distinct

    def run(kind: str) -> float:
        model = tree.HoeffdingTreeClassifier()
        start = time.process_time()
        if kind == "bare":
            for i, (x, y) in enumerate(rows):
                for record in per_row[i]:
                    model.predict_one(record)
                model.learn_one(x, y)
        else:
            adapters._distinct = keep_distinct if kind == "ipfi" else (lambda records: (records, None))
            try:
                predictor = as_predictor(model)
                ex = explainer(predictor)
                for x, y in rows:
                    ex.explain_one(x, y)
                    predictor.learn_one(x, y)
            finally:
                adapters._distinct = keep_distinct
        return time.process_time() - start

    kinds = ["bare", "ipfi", "ipfi, every row asked"]
    times: dict[str, list[float]] = {k: [] for k in kinds}
    for k in kinds:  # warm-up
        run(k)
    for _ in range(args.rounds):
        for k in kinds:
            times[k].append(run(k))
    print(f"{args.rows} rows, M = 10, {args.rounds} rounds; CPU seconds, best and median; "
          f"perturbed rows {asked:,}, distinct {distinct:,} ({distinct / asked:.1%})")
    for k in kinds:
        print(f"   {k:<24} {min(times[k]):8.3f} {statistics.median(times[k]):8.3f}")
    for k in kinds[1:]:
        best = min(times[k]) / min(times["bare"])
        median = statistics.median(times[k]) / statistics.median(times["bare"])
        target = f"   target <= 1.05: {'MET' if best <= 1.05 else 'MISSED'}" if k == "ipfi" else ""
        print(f"   ratio {k} / bare   {best:6.3f} {median:6.3f}{target}")


if __name__ == "__main__":
    main()
