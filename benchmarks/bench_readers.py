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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

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
