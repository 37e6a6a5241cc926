"""CPU time per row of the one reader on JSONL and CSV, against the parser alone in the same run.

Run::

    python benchmarks/bench_readers.py              # about 30 seconds
    python benchmarks/bench_readers.py --rows 20000 --rounds 3

The rows are UCI Adult's columns (6 numbers, 9 strings) written by ``json.dumps`` and by
``csv.writer``. Per round, interleaved: ``orjson.loads`` on every line (the floor of JSONL
parsing), ipfi's reader on the JSONL bytes (types, missing values, the check for a key given
twice), ``csv.reader`` on the CSV lines, and ipfi's reader on the CSV bytes row by row. The best
round of each, and its ratio to its floor. CPU time (``time.process_time``): the machine is shared.

Measured (2 cores shared with a long experiment, 100,000 rows, 5 rounds), before the check for a
key given twice: the JSONL reader 4.8-5.2 us/row; with it 5.7-5.8 (one ``str.count`` and two
substring tests per line; a line that fails them is parsed again by ``json``). With it, 50,000
rows, 3 rounds: orjson.loads 0.77 us/row, the JSONL reader 5.88 (7.6x), csv.reader 0.82, the CSV
reader row by row 4.62 (5.7x; runs of CSV rows waiting in a file are parsed in bulk instead, see
bench_row_cost.py).

``--blocks`` measures what a run reads instead: a regular file of LogisticRegression d = 9 style
rows (9 numbers and a 0/1 label) read as micro-batches of 1,000 with bulk blocks
(``reader.batches(1000, blocks=True)``, the number columns' float arrays and the label column
taken from each block, as the run takes them), as CSV and as JSONL, with pyarrow loaded as
pandas loads it. Run it against two checkouts to compare (``PYTHONPATH=OTHER/src``).
Measured (2 cores shared with four other workers, 100,000 rows, 5 rounds, medians, two runs
each, old and new alternating): CSV 1.87-1.90 -> 0.75-0.76 us/row (bytes parsed by pyarrow in
spans of up to 8,192 lines, instead of a Python string per line joined again per block), JSONL
5.23-5.41 -> 2.58-2.80 us/row (objects with the same keys taken in bulk; before: row by row).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import time


def rows(n: int) -> list[dict[str, object]]:
    return [{"age": 39 + i % 20, "workclass": "State-gov", "fnlwgt": 77516 + i, "education": "Bachelors",
             "education-num": 13, "marital-status": "Never-married", "occupation": "Adm-clerical",
             "relationship": "Not-in-family", "race": "White", "sex": "Male", "capital-gain": 2174 * (i % 3),
             "capital-loss": 0, "hours-per-week": 40, "native-country": "United-States", "class": "<=50K"}
            for i in range(n)]


def numeric_rows(n: int) -> list[dict[str, object]]:
    """Rows like river's Agrawal stream: 9 numbers (floats and integers) and a 0/1 label."""
    import numpy as np

    rng = np.random.default_rng(0)
    salary, loan, hvalue = (rng.uniform(2e4, 5e5, n).tolist() for _ in range(3))
    ints = rng.integers(0, 80, (n, 5)).tolist()
    return [{"salary": salary[i], "commission": 0.0 if i % 3 else salary[i] / 7, "age": ints[i][0],
             "elevel": ints[i][1] % 5, "car": ints[i][2] % 20, "zipcode": ints[i][3] % 9, "hvalue": hvalue[i],
             "hyears": ints[i][4] % 30, "loan": loan[i], "class": i % 2} for i in range(n)]


def blocks_main(args: argparse.Namespace) -> None:
    """The readers as a run uses them on a regular file: micro-batches with bulk blocks."""
    import os
    import statistics
    import tempfile

    import pyarrow  # noqa: F401 - loaded, as pandas loads it in a run

    import ipfi_cli
    from ipfi_cli.io.readers import open_rows

    data = numeric_rows(args.rows)
    folder = tempfile.mkdtemp(prefix="ipfi-readers-")
    paths = {"CSV": os.path.join(folder, "rows.csv"), "JSONL": os.path.join(folder, "rows.jsonl")}
    with open(paths["CSV"], "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(list(data[0]))
        writer.writerows([list(r.values()) for r in data])
    with open(paths["JSONL"], "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in data)

    def read(path: str) -> int:
        count = 0
        with open_rows(path) as reader:
            for part in reader.batches(1000, blocks=True):
                if getattr(part, "floats", None) is not None:
                    part.column("class")  # type: ignore[union-attr]
                count += len(part)
        return count

    times: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(args.rounds):
        for name, path in paths.items():
            start = time.process_time()
            count = read(path)
            times[name].append((time.process_time() - start) / count * 1e6)
    print(f"{args.rows:,} rows (9 numbers and a label), micro-batches of 1,000 with bulk blocks, {args.rounds} "
          f"interleaved rounds, CPU time; ipfi from {os.path.dirname(ipfi_cli.__file__)}")
    for name, values in times.items():
        print(f"  ipfi {name:5} reader  median {statistics.median(values):5.2f} us/row  "
              f"[{min(values):.2f}-{max(values):.2f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--blocks", action="store_true", help="micro-batches with bulk blocks from regular files")
    args = parser.parse_args()
    if args.blocks:
        blocks_main(args)
        return

    import orjson

    from ipfi_cli.io.readers import RowReader

    data = rows(args.rows)
    jsonl = "".join(json.dumps(r) + "\n" for r in data).encode()
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(list(data[0]))
    writer.writerows([list(r.values()) for r in data])
    csv_bytes = text.getvalue().encode()
    lines = jsonl.decode().splitlines()
    csv_lines = text.getvalue().splitlines()

    def orjson_only() -> int:
        return sum(1 for line in lines if orjson.loads(line))

    def jsonl_reader() -> int:
        return sum(1 for _ in RowReader(io.BytesIO(jsonl), name="adult.jsonl"))

    def csv_module() -> int:
        return sum(1 for _ in csv.reader(csv_lines)) - 1

    def csv_reader() -> int:
        return sum(1 for _ in RowReader(io.BytesIO(csv_bytes), name="adult.csv"))

    cases = {"orjson.loads alone": orjson_only, "ipfi JSONL reader": jsonl_reader,
             "csv.reader alone": csv_module, "ipfi CSV reader (row by row)": csv_reader}
    best = {name: float("inf") for name in cases}
    for _ in range(args.rounds):
        for name, run in cases.items():
            start = time.process_time()
            count = run()
            best[name] = min(best[name], (time.process_time() - start) / count * 1e6)
    print(f"{args.rows:,} rows of UCI Adult's columns, best of {args.rounds} interleaved rounds, CPU time")
    for name, value in best.items():
        print(f"  {name:32} {value:6.2f} us/row")
    print(f"  -> JSONL reader / orjson.loads = {best['ipfi JSONL reader'] / best['orjson.loads alone']:.1f}")
    print(f"  -> CSV reader / csv.reader = {best['ipfi CSV reader (row by row)'] / best['csv.reader alone']:.1f}")


if __name__ == "__main__":
    main()
