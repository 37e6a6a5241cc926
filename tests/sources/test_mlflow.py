"""MLflow models: a local model directory, and models:/ and runs:/ URIs of models really logged
to a SQLite tracking store and registry made here. The scikit-learn flavour loads as the
estimator itself, so its traces equal the joblib file's byte for byte (log loss included)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from sources.conftest import FEATURES

mlflow = pytest.importorskip("mlflow")
# saving a model, MLflow starts Python to find its requirements, and git to tag the run
pytestmark = pytest.mark.process

MODEL_NAME = "agrawal-forest"


def explain(run, *args: Any) -> str:
    result = run("explain", *args, "-t", "class", "--seed", 5, "--no-live", "-q")
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def registry(tmp_path_factory, forest, fit_frame) -> Iterator[tuple[str, str]]:
    """A SQLite tracking store holding one run with the forest, registered as version 1.

    Yields ``(tracking_uri, run_id)``. MLflow reads ``MLFLOW_TRACKING_URI`` here as it does for a user.
    """
    import mlflow.sklearn
    from mlflow.models import infer_signature

    folder = tmp_path_factory.mktemp("mlruns")
    uri = f"sqlite:///{folder}/mlflow.db"
    saved = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = uri
    try:
        # artifacts beside the database, not in ./mlruns of the working directory
        experiment = mlflow.create_experiment("ipfi-tests", artifact_location=(folder / "artifacts").as_uri())
        mlflow.set_experiment(experiment_id=experiment)
        model, _ = forest
        sample = fit_frame[FEATURES].astype("float64")
        with mlflow.start_run() as active:
            mlflow.sklearn.log_model(model, name="model", signature=infer_signature(sample, model.predict(sample)),
                                     registered_model_name=MODEL_NAME, serialization_format="cloudpickle")
        yield uri, active.info.run_id
    finally:
        if saved is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = saved


def test_local_model_directory(run, mlflow_model_dir, forest, data_csv):
    _, joblib_path = forest
    for loss in ("zero-one", "log"):
        assert explain(run, data_csv, "-m", mlflow_model_dir, "--loss", loss) == \
            explain(run, data_csv, "-m", joblib_path, "--loss", loss)
    result = run("batch", data_csv, "-m", mlflow_model_dir, "-t", "class", "--seed", 5, "-v")
    assert result.exit_code == 0 and "MLflow scikit-learn RandomForestClassifier" in result.stderr


def test_registered_and_run_uris_and_a_missing_version(registry, forest, data_csv, run, monkeypatch):
    """`--model models:/NAME/1` and `runs:/ID/model`, resolved with the user's MLFLOW_TRACKING_URI."""
    uri, run_id = registry
    _, joblib_path = forest
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    expected = explain(run, data_csv, "-m", joblib_path)
    assert explain(run, data_csv, "-m", f"models:/{MODEL_NAME}/1") == expected
    assert explain(run, data_csv, "-m", f"runs:/{run_id}/model") == expected
    result = run("explain", data_csv, "-m", f"models:/{MODEL_NAME}/9", "-t", "class", "-q")
    assert result.exit_code == 1
    line = result.stderr.strip()
    assert "\n" not in line and f"models:/{MODEL_NAME}/9" in line and "cannot load the MLflow model" in line


class ForestPyfunc(mlflow.pyfunc.PythonModel):
    """A custom pyfunc (no scikit-learn flavour): labels from the forest it loads from its artifacts."""

    def load_context(self, context: Any) -> None:
        import joblib

        self.model = joblib.load(context.artifacts["forest"])

    def predict(self, context: Any, model_input: Any, params: Any = None) -> Any:
        return self.model.predict(model_input[FEATURES])


def test_a_pyfunc_model_gives_labels_and_needs_the_task(run, forest, data_csv, tmp_path):
    import mlflow.pyfunc

    _, joblib_path = forest
    path = tmp_path / "pyfunc"
    mlflow.pyfunc.save_model(str(path), python_model=ForestPyfunc(), artifacts={"forest": str(joblib_path)})
    expected = explain(run, data_csv, "-m", joblib_path)
    assert explain(run, data_csv, "-m", path, "--task", "classification") == expected
    no_task = run("explain", data_csv, "-m", path, "-t", "class", "-q")
    assert no_task.exit_code == 1 and "--task" in no_task.stderr
    no_proba = run("explain", data_csv, "-m", path, "-t", "class", "--task", "classification", "--loss", "log", "-q")
    assert no_proba.exit_code == 1 and "probabilities" in no_proba.stderr
