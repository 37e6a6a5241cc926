"""Regenerate every file bundled in ``sample_data/``.

Usage::

    python sample_data/make_sample_data.py [--out DIR] [--datasets DIR] [--skip-checks]

Everything is deterministic: the synthetic streams come from river's
``Agrawal`` generator with fixed seeds, the scikit-learn models use
``random_state=0`` and the river models use ``seed=0``.  Running the script
twice with the same library versions gives byte-identical files.

Files written (default ``--out`` is the folder that contains this script):

=====================  =====================================================  ==========
file                   content                                                seed(s)
=====================  =====================================================  ==========
agrawal_drift.csv      20,000 rows: rows 0..9,999 ``Agrawal(classification_   42, 43
                       function=1)``, rows 10,000..19,999
                       ``Agrawal(classification_function=2)`` (abrupt drift)
agrawal_static.csv     5,000 rows of ``Agrawal(classification_function=1)``   7
elec2_excerpt.csv      first 5,000 data rows of ``elec2.csv``, copied         --
                       verbatim (needs ``--datasets``)
agrawal_hgb.joblib     ``HistGradientBoostingClassifier`` fitted on 20,000    data 1,
                       fresh rows of ``Agrawal(classification_function=1)``   model 0
elec2_hgb.joblib       ``HistGradientBoostingClassifier`` fitted on elec2     model 0
                       rows 5,000..24,999 (needs ``--datasets``)
agrawal_hoeffding.pkl  untrained ``HoeffdingAdaptiveTreeClassifier``          0
elec2_hoeffding.pkl    untrained ``HoeffdingAdaptiveTreeClassifier``          0
=====================  =====================================================  ==========

Notes
-----
* river numbers the Agrawal functions from 0, so ``classification_function=1``
  is ``Agrawal._classification_function_1`` (label from salary and age) and
  ``classification_function=2`` is ``Agrawal._classification_function_2``
  (label from elevel and age).  In the original paper's 1-based numbering
  these are functions 2 and 3.
* Floats are rounded to 2 decimals to keep the CSVs small.  Rounding can move
  a salary across a class boundary (49999.996 -> 50000.0), so the label is
  recomputed from the *rounded* features with the generator's own
  classification function; labels are therefore exactly consistent with the
  written features.
* ``--datasets`` defaults to ``<repo>/../shared/datasets``.  If ``elec2.csv``
  is not there, the existing ``elec2_excerpt.csv`` and ``elec2_hgb.joblib``
  are kept (the project must work without the shared folder) and a message is
  printed on stderr.
* The model files (``*.joblib``, ``*.pkl``) hold no fitted model: each is a
  pickled :class:`ipfi_cli.sample_models.Recipe` that builds the model when it
  is loaded, with whatever scikit-learn and river versions are installed (the
  river trees are constructed untrained; the scikit-learn models are fitted on
  the training rows stored in the file, once, and cached per library versions).
  The files themselves do not depend on any library version.

After writing, the script loads every model back, predicts on a few rows and
trains a fresh Hoeffding tree prequentially on ``agrawal_drift.csv`` as a
sanity check (skip with ``--skip-checks``).
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import joblib
import pandas as pd
from river.datasets import synth

from ipfi_cli.sample_models import Recipe, hist_gradient_boosting, river_model

SCRIPT_DIR = Path(__file__).resolve().parent
REPO_ROOT = SCRIPT_DIR.parent
DEFAULT_DATASETS = REPO_ROOT.parent / "shared" / "datasets"

AGRAWAL_FEATURES: list[str] = [
    "salary",
    "commission",
    "age",
    "elevel",
    "car",
    "zipcode",
    "hvalue",
    "hyears",
    "loan",
]
AGRAWAL_FLOATS: list[str] = ["salary", "commission", "hvalue", "loan"]
TARGET = "class"
DECIMALS = 2

DRIFT_ROWS_PER_CONCEPT = 10_000
DRIFT_CONCEPTS: list[tuple[int, int]] = [(1, 42), (2, 43)]  # (function, seed)
STATIC_ROWS, STATIC_FUNCTION, STATIC_SEED = 5_000, 1, 7
HGB_TRAIN_ROWS, HGB_TRAIN_FUNCTION, HGB_TRAIN_SEED = 20_000, 1, 1
ELEC2_EXCERPT_ROWS = 5_000
ELEC2_TRAIN_SLICE = slice(5_000, 25_000)  # 20,000 rows, disjoint from the excerpt
MODEL_SEED = 0
HOEFFDING_GRACE_PERIOD = 100


# --------------------------------------------------------------------------- Agrawal


def classification_function(function: int) -> Callable[..., int]:
    """Return river's own Agrawal labelling function number ``function`` (0-based)."""
    return getattr(synth.Agrawal, f"_classification_function_{function}")


def agrawal_frame(function: int, seed: int, n_rows: int) -> pd.DataFrame:
    """Draw ``n_rows`` rows of Agrawal, round floats and relabel from the rounded values."""
    generator = synth.Agrawal(classification_function=function, seed=seed)
    rows = [x for x, _ in generator.take(n_rows)]
    frame = pd.DataFrame(rows, columns=AGRAWAL_FEATURES)
    frame[AGRAWAL_FLOATS] = frame[AGRAWAL_FLOATS].astype(float).round(DECIMALS)
    label = classification_function(function)
    frame[TARGET] = [label(**row) for row in frame[AGRAWAL_FEATURES].to_dict("records")]
    return frame


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` without index and with ``\\n`` line ends."""
    frame.to_csv(path, index=False, lineterminator="\n")
    print(f"wrote {path.name}: {len(frame):,} rows x {frame.shape[1]} columns")


def make_agrawal_drift(out: Path) -> pd.DataFrame:
    """Write ``agrawal_drift.csv``: function 1 then function 2, abrupt switch."""
    parts = [agrawal_frame(f, s, DRIFT_ROWS_PER_CONCEPT) for f, s in DRIFT_CONCEPTS]
    frame = pd.concat(parts, ignore_index=True)
    write_csv(frame, out / "agrawal_drift.csv")
    return frame


def make_agrawal_static(out: Path) -> pd.DataFrame:
    """Write ``agrawal_static.csv``: function 1 only."""
    frame = agrawal_frame(STATIC_FUNCTION, STATIC_SEED, STATIC_ROWS)
    write_csv(frame, out / "agrawal_static.csv")
    return frame


# --------------------------------------------------------------------------- elec2


def report_missing_source(source: Path, target: Path) -> None:
    """Tell on stderr that ``target`` cannot be regenerated because ``source`` is missing."""
    state = "keeping the existing" if target.is_file() else "not writing (and there is no existing)"
    print(f"{source} not found: {state} {target.name}", file=sys.stderr)


def make_elec2_excerpt(source: Path, out: Path) -> bool:
    """Copy the header and the first data rows of ``source`` verbatim.

    Returns False (and keeps any existing excerpt) when ``source`` is missing.
    """
    target = out / "elec2_excerpt.csv"
    if not source.is_file():
        report_missing_source(source, target)
        return False
    with source.open("r", encoding="utf-8", newline="") as f:
        lines = [f.readline() for _ in range(ELEC2_EXCERPT_ROWS + 1)]
    if not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    with target.open("w", encoding="utf-8", newline="") as f:
        f.writelines(lines)
    print(f"wrote {target.name}: {ELEC2_EXCERPT_ROWS:,} rows copied from {source}")
    return True


# --------------------------------------------------------------------------- models


def hgb_recipe(features: pd.DataFrame, target: pd.Series) -> Recipe:
    """A recipe that fits ``HistGradientBoostingClassifier(random_state=0)`` on these rows when loaded."""
    data = {column: features[column].tolist() for column in features.columns}
    return Recipe(hist_gradient_boosting, {"random_state": MODEL_SEED}, list(features.columns), data,
                  target.tolist())


def accuracy(model: Any, frame: pd.DataFrame) -> float:
    """Accuracy of ``model`` on ``frame`` (all columns but ``class`` are features)."""
    predictions = model.predict(frame.drop(columns=TARGET))
    return float((predictions == frame[TARGET].to_numpy()).mean())


def write_recipe(recipe: Recipe, path: Path) -> Any:
    """Write ``recipe`` (zlib-compressed joblib pickle) and return the model it builds."""
    joblib.dump(recipe, path, compress=3)
    return joblib.load(path)


def make_agrawal_hgb(out: Path, test: pd.DataFrame) -> None:
    """Write ``agrawal_hgb.joblib`` and print its accuracy on ``test``."""
    train = agrawal_frame(HGB_TRAIN_FUNCTION, HGB_TRAIN_SEED, HGB_TRAIN_ROWS)
    model = write_recipe(hgb_recipe(train[AGRAWAL_FEATURES], train[TARGET]), out / "agrawal_hgb.joblib")
    print(f"wrote agrawal_hgb.joblib: accuracy on agrawal_static.csv = {accuracy(model, test):.4f}")


def make_elec2_hgb(source: Path, out: Path) -> None:
    """Write ``elec2_hgb.joblib`` (trained on rows 5,000..24,999) and print excerpt accuracy."""
    if not source.is_file():
        report_missing_source(source, out / "elec2_hgb.joblib")
        return
    data = pd.read_csv(source)
    train = data.iloc[ELEC2_TRAIN_SLICE]
    model = write_recipe(hgb_recipe(train.drop(columns=TARGET), train[TARGET]), out / "elec2_hgb.joblib")
    excerpt = pd.read_csv(out / "elec2_excerpt.csv")
    print(f"wrote elec2_hgb.joblib: accuracy on elec2_excerpt.csv = {accuracy(model, excerpt):.4f}")


def hoeffding_recipe() -> Recipe:
    """An untrained Hoeffding adaptive tree with the bundled settings, built when loaded."""
    # delta=1e-5 (default 1e-7) lets the tree split sooner, so it learns each
    # 10,000-row concept of agrawal_drift.csv well enough for the drift to show.
    params = {"grace_period": HOEFFDING_GRACE_PERIOD, "delta": 1e-5, "seed": MODEL_SEED}
    return Recipe(river_model, "tree.HoeffdingAdaptiveTreeClassifier", params)


def make_hoeffding(out: Path) -> None:
    """Write the two untrained river models."""
    for name in ("agrawal_hoeffding.pkl", "elec2_hoeffding.pkl"):
        with (out / name).open("wb") as f:
            pickle.dump(hoeffding_recipe(), f, protocol=4)
        print(f"wrote {name}: untrained HoeffdingAdaptiveTreeClassifier")


# --------------------------------------------------------------------------- checks


def check_labels(path: Path, functions: list[int], rows_per_function: int) -> None:
    """Re-read a written Agrawal CSV and assert each label matches its features."""
    frame = pd.read_csv(path)
    for i, function in enumerate(functions):
        part = frame.iloc[i * rows_per_function : (i + 1) * rows_per_function]
        label = classification_function(function)
        expected = [label(**r) for r in part[AGRAWAL_FEATURES].to_dict("records")]
        mismatches = int((part[TARGET].to_numpy() != expected).sum())
        assert mismatches == 0, f"{path.name}: {mismatches} labels disagree with features"
    print(f"check {path.name}: all labels consistent with features; class balance "
          f"{frame[TARGET].mean():.3f}")


def check_sklearn_model(model_path: Path, csv_path: Path) -> None:
    """Load a joblib model back and predict 5 rows of the matching CSV."""
    model = joblib.load(model_path)
    rows = pd.read_csv(csv_path, nrows=5)
    predictions = model.predict(rows.drop(columns=TARGET))
    print(f"check {model_path.name}: features {list(model.feature_names_in_)}")
    print(f"    predict  {predictions.tolist()}\n    true     {rows[TARGET].tolist()}")


def check_river_model(model_path: Path, csv_path: Path) -> None:
    """Load a river model back, learn 5 rows and predict the next 5."""
    model = joblib.load(model_path)
    records = pd.read_csv(csv_path, nrows=10).to_dict("records")
    for record in records[:5]:
        y = record.pop(TARGET)
        model.learn_one(record, y)
    predictions = [model.predict_one({k: v for k, v in r.items() if k != TARGET})
                   for r in records[5:]]
    print(f"check {model_path.name}: {type(model).__name__}, after 5 learn_one: "
          f"predict_one {predictions}, true {[r[TARGET] for r in records[5:]]}")


def check_prequential(csv_path: Path) -> None:
    """Test-then-train a fresh Hoeffding tree and print accuracy before/after the drift."""
    records = pd.read_csv(csv_path).to_dict("records")
    model = pickle.loads(pickle.dumps(hoeffding_recipe()))
    hits: list[bool] = []
    start = time.perf_counter()
    for record in records:
        y = record.pop(TARGET)
        hits.append(model.predict_one(record) == y)
        model.learn_one(record, y)
    seconds = time.perf_counter() - start
    n, tail = DRIFT_ROWS_PER_CONCEPT, 2_000
    print(f"check prequential HoeffdingAdaptiveTreeClassifier on {csv_path.name} "
          f"({seconds:.2f} s, {1e6 * seconds / len(records):.0f} us per row for "
          f"predict_one + learn_one):")
    for first in range(0, len(hits), n):
        part = hits[first : first + n]
        print(f"    rows {first}-{first + len(part) - 1}: accuracy {sum(part) / len(part):.4f}"
              f" (last {tail:,} rows {sum(part[-tail:]) / tail:.4f})")


def run_checks(out: Path) -> None:
    """Run every post-generation check on the files in ``out``."""
    check_labels(out / "agrawal_drift.csv", [f for f, _ in DRIFT_CONCEPTS], DRIFT_ROWS_PER_CONCEPT)
    check_labels(out / "agrawal_static.csv", [STATIC_FUNCTION], STATIC_ROWS)
    check_sklearn_model(out / "agrawal_hgb.joblib", out / "agrawal_static.csv")
    if (out / "elec2_hgb.joblib").is_file() and (out / "elec2_excerpt.csv").is_file():
        check_sklearn_model(out / "elec2_hgb.joblib", out / "elec2_excerpt.csv")
        check_river_model(out / "elec2_hoeffding.pkl", out / "elec2_excerpt.csv")
    check_river_model(out / "agrawal_hoeffding.pkl", out / "agrawal_drift.csv")
    check_prequential(out / "agrawal_drift.csv")


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SCRIPT_DIR,
                        help="output folder (default: the folder of this script)")
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS,
                        help="folder holding elec2.csv (default: <repo>/../shared/datasets)")
    parser.add_argument("--skip-checks", action="store_true",
                        help="do not reload the models or run the prequential check")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Regenerate all sample data in ``--out``."""
    args = parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    elec2_source = args.datasets / "elec2.csv"

    make_agrawal_drift(out)
    static = make_agrawal_static(out)
    make_elec2_excerpt(elec2_source, out)
    make_agrawal_hgb(out, static)
    make_elec2_hgb(elec2_source, out)
    make_hoeffding(out)
    if not args.skip_checks:
        run_checks(out)


if __name__ == "__main__":
    main()
