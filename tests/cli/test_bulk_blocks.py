"""``ipfi explain`` on CSV files read in bulk blocks writes the bytes of the row-by-row path.

Every run here is made twice in this process: as a user runs it, and with blocks switched
off (the session asks its reader for lists of rows, so every row takes the row reader and
the row checks). The expected output is the second run's: nothing in it comes
from the code under test. Small ``--batch-size`` values make most of each file blocks.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from ipfi_cli.run.explain import ExplainSession
from ipfi_cli.run.rows import RowChecker

from .conftest import SAMPLE


def _both(run, monkeypatch, args):
    """The run as a user makes it, and with every batch a list of rows; and, for the first,
    per block read, whether it was explained as arrays."""
    used = []
    original = RowChecker.check_block

    def counting(self, block):
        good = original(self, block)
        used.append(good is not None)
        return good

    with monkeypatch.context() as m:
        m.setattr(RowChecker, "check_block", counting)
        fast = run(*args)
    with monkeypatch.context() as m:
        m.setattr(ExplainSession, "_batches", lambda self, reader: reader.batches(self.settings.reading.batch_size))
        slow = run(*args)
    return fast, slow, used


def _stderr(result) -> str:
    return re.sub(r"[\d,.]+ (rows/s|s|ms)\b", "T", result.stderr)  # timings differ between the runs


@pytest.fixture(scope="module")
def breast_cancer(tmp_path_factory):
    """scikit-learn's bundled breast cancer data (30 features) and a logistic regression of it."""
    import joblib
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    data = load_breast_cancer(as_frame=True)
    frame = data.frame.rename(columns=lambda c: c.replace(" ", "_"))
    features = [c for c in frame.columns if c != "target"]
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(frame[features][:200],
                                                                                  frame["target"][:200])
    folder = tmp_path_factory.mktemp("bulk")
    joblib.dump(model, folder / "model.joblib")
    frame.to_csv(folder / "clean.csv", index=False)
    # a user's export: missing-value tokens, a bad label, a text value in a number column, CRLF
    messy = frame.astype(object).copy()
    messy.iloc[50, 3] = "NA"
    messy.iloc[120, 7] = "?"
    messy.iloc[200, 0] = ""
    messy.iloc[300, 30] = ""  # no label
    messy.iloc[400, 5] = "n/a"
    messy.iloc[450, 2] = "1e400"
    (folder / "messy.csv").write_bytes(messy.to_csv(index=False, lineterminator="\r\n").encode())
    return folder


@pytest.mark.parametrize("options", [
    [],
    ["--every", "7"],
    ["--sampling", "uniform", "-M", "3"],
    ["--bounds", "--every", "5"],
    ["--output-format", "jsonl"],
    ["--detect"],
])
def test_a_clean_file(run, monkeypatch, breast_cancer, options):
    args = ["explain", "-m", breast_cancer / "model.joblib", "-t", "target", "--seed", "3", "--batch-size", "16",
            *options, breast_cancer / "clean.csv"]
    fast, slow, used = _both(run, monkeypatch, args)
    assert slow.exit_code == 0, slow.stderr
    assert (fast.exit_code, fast.stdout, _stderr(fast)) == (slow.exit_code, slow.stdout, _stderr(slow))
    assert sum(used) >= 30  # most of the 569 rows went in blocks
    assert len(fast.stdout.splitlines()) > 10


@pytest.mark.parametrize("options", [
    ["--on-bad-row", "skip", "-v"], [],
    ["--on-bad-row", "skip", "--bounds", "--bounds-method", "realisations", "-e", "3"],
])
def test_a_messy_export(run, monkeypatch, breast_cancer, options):
    args = ["explain", "-m", breast_cancer / "model.joblib", "-t", "target", "--seed", "3", "--batch-size", "16",
            *options, breast_cancer / "messy.csv"]
    fast, slow, used = _both(run, monkeypatch, args)
    assert (fast.exit_code, fast.stdout, _stderr(fast)) == (slow.exit_code, slow.stdout, _stderr(slow))
    assert any(used)
    if not options:  # the model refuses NaN: the run stops at that row, naming it, after the rows before it
        assert slow.exit_code != 0 and "row 51 (line 52), column 'mean_area'" in slow.stderr
        assert len(slow.stdout.splitlines()) == 51


def test_the_sample_data_with_the_bundled_model(run, monkeypatch, tmp_path):
    data = tmp_path / "agrawal.csv"
    data.write_text("\n".join((SAMPLE / "agrawal_static.csv").read_text().splitlines()[:1501]) + "\n")
    args = ["explain", "-m", SAMPLE / "agrawal_hgb.joblib", "-t", "class", "--seed", "1", "--batch-size", "64", data]
    fast, slow, used = _both(run, monkeypatch, args)
    assert slow.exit_code == 0
    assert fast.stdout == slow.stdout and sum(used) >= 20


def test_a_regressor_with_a_constant_column(run, monkeypatch, tmp_path):
    import joblib
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge

    frame = load_diabetes(as_frame=True, scaled=False).frame
    frame["constant"] = 1
    model = Ridge().fit(frame.drop(columns="target"), frame["target"])
    joblib.dump(model, tmp_path / "ridge.joblib")
    frame.to_csv(tmp_path / "diabetes.csv", index=False)
    args = ["explain", "-m", tmp_path / "ridge.joblib", "-t", "target", "--seed", "0", "--batch-size", "10",
            "--loss", "absolute", tmp_path / "diabetes.csv"]
    fast, slow, used = _both(run, monkeypatch, args)
    assert slow.exit_code == 0
    assert fast.stdout == slow.stdout and sum(used) >= 30
    np.testing.assert_array_equal(pd.read_csv(__import__("io").StringIO(fast.stdout))["row"], np.arange(1, 443))


def test_parquet_files(run, monkeypatch, breast_cancer, tmp_path):
    """Typed columns: ints, floats with nulls, an infinite value, a bool column, text labels."""
    frame = pd.read_csv(breast_cancer / "clean.csv")
    frame["target"] = frame["target"].map({0: "malignant", 1: "benign"})
    frame["flag"] = frame["mean_radius"] > 14  # bool, not a model input
    frame["count"] = np.arange(len(frame), dtype="int64")
    frame.loc[100, "mean_texture"] = np.nan
    frame.loc[300, "count"] = None
    frame.loc[400, "worst_area"] = np.inf
    frame["count"] = frame["count"].astype("Int64")
    frame.to_parquet(tmp_path / "data.parquet", row_group_size=128)
    import joblib
    from sklearn.ensemble import HistGradientBoostingClassifier

    features = [c for c in frame.columns if c not in ("target", "flag", "count")]
    model = HistGradientBoostingClassifier(max_iter=20, random_state=0).fit(frame[features][:250].replace(np.inf, 0),
                                                                         frame["target"][:250])
    joblib.dump(model, tmp_path / "hgb.joblib")
    for options in ([], ["--on-bad-row", "skip"], ["--every", "3", "--sampling", "uniform"]):
        args = ["explain", "-m", tmp_path / "hgb.joblib", "-t", "target", "--seed", "5", "--batch-size", "32",
                *options, tmp_path / "data.parquet"]
        fast, slow, used = _both(run, monkeypatch, args)
        assert (fast.exit_code, fast.stdout, _stderr(fast)) == (slow.exit_code, slow.stdout, _stderr(slow))
        assert sum(used) >= 5
        if not options:  # the infinite value stops the run at its row, after the rows before it
            assert slow.exit_code != 0 and "row 401" in slow.stderr and "worst_area" in slow.stderr


def test_a_number_longer_than_int_reads(run, monkeypatch, tmp_path):
    """4,301 zeros then a digit: float() reads it, the row reader (int()) refuses it: the rows decide."""
    import joblib
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    frame = load_iris(as_frame=True).frame
    model = LogisticRegression(max_iter=500).fit(frame.drop(columns="target"), frame["target"])
    joblib.dump(model, tmp_path / "iris.joblib")
    text = frame.to_csv(index=False).splitlines()
    padded = "0" * 4301 + "5"
    for line, column in ((41, 0), (120, 4)):  # a model input; the label
        lines = list(text)
        fields = lines[line].split(",")
        fields[column] = padded
        lines[line] = ",".join(fields)
        (tmp_path / "iris.csv").write_text("\n".join(lines) + "\n")
        for options in ([], ["--on-bad-row", "skip"]):
            args = ["explain", "-m", tmp_path / "iris.joblib", "-t", "target", "--seed", "1", "--batch-size", "7",
                    *options, tmp_path / "iris.csv"]
            fast, slow, used = _both(run, monkeypatch, args)
            assert (fast.exit_code, fast.stdout, _stderr(fast)) == (slow.exit_code, slow.stdout, _stderr(slow))
            assert any(used)
            assert "expected a number" in slow.stderr
            assert (slow.exit_code == 0) == bool(options)


@pytest.fixture(scope="module")
def parquet_folder(breast_cancer, tmp_path_factory):
    """breast cancer's first 200 rows as 4 files of 50: row 45 is NaN (the model refuses it), row 55 inf."""
    frame = pd.read_csv(breast_cancer / "clean.csv").iloc[:200].copy()
    frame.loc[44, "mean_texture"] = np.nan
    frame.loc[54, "worst_area"] = np.inf
    folder = tmp_path_factory.mktemp("parts")
    for part in range(4):
        frame.iloc[part * 50:(part + 1) * 50].to_parquet(folder / f"part-{part}.parquet", row_group_size=20)
    return folder


def test_a_parquet_folder_keeps_the_row_paths_micro_batches(run, monkeypatch, breast_cancer, parquet_folder,
                                                            tmp_path):
    """Blocks span files and record batches as the row path's micro-batches do, so bad rows are met
    in the same order, and a failed model call is bisected as on the row path (the same calls)."""
    for batch in ("32", "7", "50"):
        metrics = {}
        for name in ("fast", "slow"):
            metrics[name] = tmp_path / f"{name}-{batch}.prom"
        args = ["explain", "-m", breast_cancer / "model.joblib", "-t", "target", "--seed", "2", "--batch-size", batch,
                "--on-bad-row", "skip", "-v", parquet_folder]
        fast, slow, used = _both(run, monkeypatch, [*args[:-1], "--metrics-textfile", metrics["fast"], args[-1]])
        assert sum(used) >= 2
        assert (fast.exit_code, fast.stdout, _stderr(fast)) == (slow.exit_code, slow.stdout, _stderr(slow))
        assert "skipped 2 bad row(s)" in slow.stderr


def test_model_calls_are_counted_alike(run, monkeypatch, breast_cancer, tmp_path):
    """A model that fails on a row of a block: the row is found with the row path's calls."""
    lines = (breast_cancer / "clean.csv").read_text().splitlines()[:201]
    fields = lines[45].split(",")
    fields[3] = ""
    lines[45] = ",".join(fields)
    (tmp_path / "nan.csv").write_text("\n".join(lines) + "\n")
    counts = []
    for blocks_on in (True, False):
        prom = tmp_path / f"m-{blocks_on}.prom"
        args = ["explain", "-m", breast_cancer / "model.joblib", "-t", "target", "--seed", "2", "--batch-size", "16",
                "--on-bad-row", "skip", "--metrics-textfile", prom, tmp_path / "nan.csv"]
        with monkeypatch.context() as m:
            if not blocks_on:
                m.setattr(ExplainSession, "_batches",
                          lambda self, reader: reader.batches(self.settings.reading.batch_size))
            assert run(*args).exit_code == 0
        counts.append(sorted(line for line in prom.read_text().splitlines()
                             if line.startswith(("ipfi_model_calls_total", "ipfi_model_predictions_total"))))
    assert counts[0] == counts[1] and counts[0]
