"""Safe model loading: .skops files load with skops.io, untrusted types are refused and listed,
--trust names them; joblib/pickle still load; a file that is neither gives a clear error."""

from __future__ import annotations

import csv
import io
import sys
import zipfile
from pathlib import Path

import joblib
import pytest
import river
from packaging.version import Version
from typer.testing import CliRunner

from ipfi_cli.cli.app import app
from ipfi_cli.models.files import ModelFileError, load_model, model_file_kind, save_model

skops_io = pytest.importorskip("skops.io")

# skops and river before 0.25 (seen with 0.21.0 and 0.24.2; 0.25.0 and 0.26.1 pass): skops writes an adaptive
# tree without complaint, and a river pipeline read back from .skops fails on its first row
RIVER_BEFORE_0_25 = pytest.mark.skipif(
    Version(river.__version__) < Version("0.25"),
    reason="skops round-trips river models only from river 0.25 on (0.21.0 and 0.24.2 fail)")

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
TREE_PREDICTOR = "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor"
TREE = "sklearn.tree._tree.Tree"


def rows_csv(n: int) -> str:
    lines = (SAMPLE / "agrawal_static.csv").read_text().splitlines()
    return "\n".join(lines[:n + 1]) + "\n"


@pytest.fixture(scope="module")
def hgb_skops(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("skops") / "hgb.skops"
    skops_io.dump(joblib.load(SAMPLE / "agrawal_hgb.joblib"), path)
    return path


@pytest.fixture(scope="module")
def tree_skops(tmp_path_factory) -> tuple[Path, Path]:
    """A small decision tree (fast on a busy machine) as .skops and as .joblib."""
    import pandas as pd
    from sklearn.tree import DecisionTreeClassifier

    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", nrows=500)
    model = DecisionTreeClassifier(max_depth=5, random_state=0).fit(frame.drop(columns="class"), frame["class"])
    folder = tmp_path_factory.mktemp("skops")
    skops_io.dump(model, folder / "tree.skops")
    joblib.dump(model, folder / "tree.joblib")
    return folder / "tree.skops", folder / "tree.joblib"


@pytest.fixture(scope="module")
def river_skops(tmp_path_factory) -> tuple[Path, list[str]]:
    from river import linear_model, preprocessing

    path = tmp_path_factory.mktemp("skops") / "river.skops"
    skops_io.dump(preprocessing.StandardScaler() | linear_model.LogisticRegression(), path)
    return path, list(skops_io.get_untrusted_types(file=path))


def invoke(*args, input=None):
    return CliRunner().invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)


def test_kind_is_sniffed_from_the_bytes(hgb_skops, tmp_path):
    assert model_file_kind(hgb_skops) == "skops"
    renamed = tmp_path / "model.bin"
    renamed.write_bytes(hgb_skops.read_bytes())
    assert model_file_kind(renamed) == "skops"  # a zip archive is skops whatever its name
    assert model_file_kind(SAMPLE / "agrawal_hgb.joblib") == "pickle"


def test_untrusted_types_are_refused_and_listed(hgb_skops):
    with pytest.raises(ModelFileError) as error:
        load_model(hgb_skops)
    message = str(error.value)
    assert message.startswith(str(hgb_skops)) and "\n" not in message
    assert "refused" in message and TREE_PREDICTOR in message and f"--trust {TREE_PREDICTOR}" in message


def test_trusted_types_load_the_same_model(hgb_skops):
    model, warnings = load_model(hgb_skops, [TREE_PREDICTOR])
    original = joblib.load(SAMPLE / "agrawal_hgb.joblib")
    assert type(model) is type(original) and warnings == []
    import pandas as pd
    from threadpoolctl import threadpool_limits

    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", nrows=20)
    X = frame[list(original.feature_names_in_)]
    with threadpool_limits(1):  # OpenMP start-up costs seconds on a busy 2-core machine
        assert (model.predict_proba(X) == original.predict_proba(X)).all()


def test_river_pipeline_needs_every_type_named(river_skops):
    path, untrusted = river_skops
    assert "river.linear_model.log_reg.LogisticRegression" in untrusted
    with pytest.raises(ModelFileError) as error:
        load_model(path, untrusted[:-1])  # one short
    assert untrusted[-1] in str(error.value) and untrusted[0] not in str(error.value).split("trust by default:")[1]
    model, _ = load_model(path, untrusted)
    assert type(model).__name__ == "Pipeline"


def test_not_a_zip_named_skops(tmp_path):
    path = tmp_path / "fake.skops"
    path.write_bytes(b"\x80\x04not a zip")  # a pickle prefix: must not be unpickled because of the name
    with pytest.raises(ModelFileError, match="not a .skops model file"):
        load_model(path)


def test_zip_without_a_skops_schema(tmp_path):
    path = tmp_path / "other.skops"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("readme.txt", "hello")
    path.write_bytes(buffer.getvalue())
    with pytest.raises(ModelFileError, match="not a .skops model file") as error:
        load_model(path)
    assert "\n" not in str(error.value)


def test_neither_skops_nor_pickle(tmp_path):
    path = tmp_path / "data.model"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ModelFileError, match="nor a .skops"):
        load_model(path)


def test_skops_not_installed(hgb_skops, monkeypatch):
    monkeypatch.setitem(sys.modules, "skops", None)
    monkeypatch.setitem(sys.modules, "skops.io", None)
    with pytest.raises(ModelFileError, match=r"needs the skops package: pip install 'ipfi-cli\[safe\]'"):
        load_model(hgb_skops)


def test_trust_with_a_pickle_file_warns_that_pickle_runs_code():
    model, warnings = load_model(SAMPLE / "agrawal_hgb.joblib", ["x.Y"])
    assert len(warnings) == 1 and "runs any code" in warnings[0]


def test_save_model_as_skops_round_trip(tmp_path):
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression().fit([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1])
    path = tmp_path / "lr.skops"
    save_model(path, model)
    loaded, _ = load_model(path)  # LogisticRegression is trusted by default
    assert loaded.predict([[3.0]]).tolist() == [1]


@RIVER_BEFORE_0_25
def test_save_model_as_skops_that_skops_cannot_write(tmp_path):
    import pickle

    hoeffding = pickle.loads((SAMPLE / "agrawal_hoeffding.pkl").read_bytes())
    with pytest.raises(ModelFileError, match="save it as .joblib"):
        save_model(tmp_path / "tree.skops", hoeffding)
    assert list(tmp_path.iterdir()) == []


# -- through the commands ------------------------------------------------------------------------
def test_explain_refuses_then_runs_with_trust(tree_skops):
    skops_path, joblib_path = tree_skops
    data = rows_csv(30)
    refused = invoke("explain", "-m", skops_path, "-t", "class", "-M", "2", "--seed", "1", "-q", input=data)
    assert refused.exit_code == 1 and refused.stdout == ""
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in refused.stderr and f"--trust {TREE}" in lines[0]
    trusted = invoke("explain", "-m", skops_path, "-t", "class", "-M", "2", "--seed", "1", "-q",
                     "--trust", TREE, input=data)
    assert trusted.exit_code == 0, trusted.stderr
    pickled = invoke("explain", "-m", joblib_path, "-t", "class", "-M", "2", "--seed", "1", "-q", input=data)
    assert trusted.stdout == pickled.stdout and len(list(csv.reader(io.StringIO(trusted.stdout)))) == 31


@RIVER_BEFORE_0_25
def test_learn_with_a_trusted_river_skops_model(river_skops):
    path, untrusted = river_skops
    data = rows_csv(20)
    result = invoke("explain", "-m", path, "-t", "class", "--learn", "-M", "2", "--seed", "1", "-q",
                    "--trust", ",".join(untrusted), input=data)
    assert result.exit_code == 0, result.stderr
    assert len(result.stdout.splitlines()) == 21


@pytest.mark.parametrize("command", ["batch", "compare"])
def test_batch_and_compare_take_trust(command, tree_skops, tmp_path):
    data = tmp_path / "rows.csv"
    data.write_text(rows_csv(60))
    refused = invoke(command, data, "-m", tree_skops[0], "-t", "class", "--seed", "1", "-q")
    assert refused.exit_code == 1 and TREE in refused.stderr and "Traceback" not in refused.stderr
    result = invoke(command, data, "-m", tree_skops[0], "-t", "class", "--seed", "1", "-q", "--trust", TREE,
                    "--repeats", "2")
    assert result.exit_code == 0, result.stderr


def test_help_says_pickle_runs_code_and_offers_trust():
    for command in ("explain", "batch", "compare"):
        text = " ".join(invoke(command, "--help").stdout.split())
        assert "runs code" in text and "--trust" in text and ".skops" in text, command
