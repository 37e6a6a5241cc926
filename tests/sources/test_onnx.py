"""ONNX models: scikit-learn models exported with skl2onnx explain like the originals.

Tolerances: ONNX graphs compute in float32, the originals in float64. Tree ensembles compare
float32 inputs with float32 thresholds either way, so labels are equal and zero-one traces
agree to 1e-12; probabilities agree to ~1e-7, so log-loss traces and batch PFI get
``atol=1e-5``; a regressor's float32 output (loans up to 5e5, float32 spacing 0.03 there) gets
``atol=0.1`` on importances of size 1e2..1e4.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sources.conftest import FEATURES, with_text_zipcode

pytest.importorskip("onnxruntime")
skl2onnx = pytest.importorskip("skl2onnx")


def frame_of(text: str) -> Any:
    import pandas as pd

    return pd.read_csv(io.StringIO(text))


def traces(run, *args: Any) -> Any:
    result = run("explain", *args, "--seed", 7, "--no-live", "-q")
    assert result.exit_code == 0, result.stderr
    return frame_of(result.stdout)


def batch(run, *args: Any) -> Any:
    result = run("batch", *args, "--seed", 7, "-q")
    assert result.exit_code == 0, result.stderr
    return frame_of(result.stdout).set_index("feature")


def export(model: Any, path: Path, initial_types: Any = None, sample: Any = None) -> Path:
    onx = skl2onnx.to_onnx(model, sample, initial_types=initial_types, target_opset={"": 17, "ai.onnx.ml": 3})
    path.write_bytes(onx.SerializeToString())
    return path


@pytest.fixture(scope="session")
def forest_onnx(tmp_path_factory, forest) -> Path:
    """The forest as one float tensor input [N, 9] (columns by position), ZipMap probabilities."""
    model, _ = forest
    sample = np.zeros((1, len(FEATURES)), dtype=np.float32)
    return export(model, tmp_path_factory.mktemp("onnx") / "forest.onnx", sample=sample)


@pytest.fixture(scope="session")
def text_pipeline(tmp_path_factory, fit_frame) -> tuple[Path, Path]:
    """Scaler + one-hot(zipcode text) + logistic regression; joblib file and ONNX graph with one input per column."""
    import joblib
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numeric = [c for c in FEATURES if c != "zipcode"]
    frame = with_text_zipcode(fit_frame)
    pipeline = Pipeline([
        ("columns", ColumnTransformer([("numbers", StandardScaler(), numeric),
                                       ("zip", OneHotEncoder(handle_unknown="ignore"), ["zipcode"])])),
        ("model", LogisticRegression(max_iter=1000)),
    ]).fit(frame[FEATURES], frame["class"])
    folder = tmp_path_factory.mktemp("onnx")
    joblib.dump(pipeline, folder / "pipeline.joblib")
    types = [(c, StringTensorType([None, 1]) if c == "zipcode" else FloatTensorType([None, 1])) for c in FEATURES]
    return folder / "pipeline.joblib", export(pipeline, folder / "pipeline.onnx", initial_types=types)


def test_onnx_classifier_traces_and_batch_match_the_forest(run, forest, forest_onnx, data_csv):
    _, joblib_path = forest
    for loss, atol in (("zero-one", 1e-12), ("log", 1e-5)):
        expected = traces(run, data_csv, "-m", joblib_path, "-t", "class", "--loss", loss)
        got = traces(run, data_csv, "-m", forest_onnx, "-t", "class", "--loss", loss)
        assert list(got.columns) == list(expected.columns)
        assert got.iloc[-1, 1:].abs().max() > 0.01  # something was learned, so the comparison means something
        np.testing.assert_allclose(got.to_numpy(float), expected.to_numpy(float), atol=atol, rtol=0, equal_nan=True)
        np.testing.assert_allclose(batch(run, data_csv, "-m", forest_onnx, "-t", "class", "--loss", loss)
                                   [["importance", "std"]].to_numpy(),
                                   batch(run, data_csv, "-m", joblib_path, "-t", "class", "--loss", loss)
                                   [["importance", "std"]].to_numpy(), atol=atol, rtol=0)


def test_onnx_pipeline_with_a_text_column_one_input_per_column(run, text_pipeline, text_csv):
    joblib_path, onnx_path = text_pipeline
    expected = traces(run, text_csv, "-m", joblib_path, "-t", "class", "--loss", "log")
    got = traces(run, text_csv, "-m", onnx_path, "-t", "class", "--loss", "log")
    np.testing.assert_allclose(got.to_numpy(float), expected.to_numpy(float), atol=1e-5, rtol=0, equal_nan=True)
    np.testing.assert_allclose(batch(run, text_csv, "-m", onnx_path, "-t", "class", "--loss", "log")["importance"],
                               batch(run, text_csv, "-m", joblib_path, "-t", "class", "--loss", "log")["importance"],
                               atol=1e-5, rtol=0)


def test_onnx_regressor(run, tmp_path, fit_frame, data_csv):
    import joblib
    from sklearn.ensemble import GradientBoostingRegressor

    inputs = [c for c in FEATURES if c != "loan"]
    model = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0)
    model.fit(fit_frame[inputs].to_numpy(), fit_frame["loan"])
    joblib.dump(model, tmp_path / "gbr.joblib")
    export(model, tmp_path / "gbr.onnx", sample=np.zeros((1, len(inputs)), dtype=np.float32))
    options = ("-t", "loan", "--drop", "class")
    expected = traces(run, data_csv, "-m", tmp_path / "gbr.joblib", *options)
    got = traces(run, data_csv, "-m", tmp_path / "gbr.onnx", *options)
    # float32 spacing is 0.03 at the largest loans (5e5): the errors, and so the importances, differ by that much
    np.testing.assert_allclose(got.to_numpy(float)[1:], expected.to_numpy(float)[1:], rtol=1e-6, atol=0.1)


def test_onnx_checks_columns_and_types_before_the_first_row(run, text_pipeline, text_csv, data_csv, tmp_path):
    _, onnx_path = text_pipeline
    lines = text_csv.read_text().splitlines()
    missing = tmp_path / "no_zip.csv"
    header = lines[0].split(",")
    keep = [i for i, c in enumerate(header) if c != "zipcode"]
    missing.write_text("\n".join(",".join(line.split(",")[i] for i in keep) for line in lines) + "\n")
    result = run("explain", missing, "-m", onnx_path, "-t", "class", "-q")
    assert result.exit_code == 1 and "zipcode" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""
    # a text value where the graph takes floats: one line naming the column, before any trace row
    bad = tmp_path / "text_age.csv"
    age = header.index("age")
    rows = [line.split(",") for line in lines]
    rows[1][age] = "old"
    bad.write_text("\n".join(",".join(r) for r in rows) + "\n")
    result = run("explain", bad, "-m", onnx_path, "-t", "class", "-q")
    assert result.exit_code == 1
    assert "'age'" in result.stderr and "tensor(float)" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "\n2," not in result.stdout


def test_onnx_errors_name_the_file(run, tmp_path, data_csv):
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a graph")
    result = run("explain", data_csv, "-m", broken, "-t", "class", "-q")
    assert result.exit_code == 1 and str(broken) in result.stderr and "ONNX" in result.stderr


@pytest.mark.process  # python -c
def test_help_imports_no_model_runtime():
    """Only the standard-library rule of ipfi_cli.models.hashing may load (the hash-seed decision):
    no adapter, loader or runtime."""
    code = ("import sys; sys.argv = ['ipfi', 'explain', '--help']\n"
            "from ipfi_cli.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print([m for m in sys.modules if m in ('onnxruntime', 'mlflow', 'http.client', 'numpy')"
            " or m.startswith('ipfi_cli.models.') and m != 'ipfi_cli.models.hashing'], file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "--model-url" in result.stdout
    assert result.stderr.strip() == "[]"
