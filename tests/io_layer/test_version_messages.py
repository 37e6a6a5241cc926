"""Model files written with other library versions: both versions named, and a fix ipfi's ranges allow.

The supported ranges are read here from ``pyproject.toml``; the code under test reads them
from the installed package's metadata. The cross-environment test needs a second Python
environment with other library versions, named by ``IPFI_OTHER_PYTHON`` (``.ci/run`` sets it
to the oldest-versions environment when it tests the newest, and the other way round).
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ipfi_cli.models.files import ModelFileError, load_model

ROOT = Path(__file__).resolve().parents[2]


def declared_ranges() -> dict[str, SpecifierSet]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {Requirement(line).name: Requirement(line).specifier for line in project["dependencies"]}


def advised_versions(message: str, distribution: str) -> list[str]:
    """Every ``distribution==X`` the message tells the user to install."""
    return re.findall(rf"{re.escape(distribution)}==([\w.+-]+)", message)


def fitted_pipeline():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression()).fit([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1])


def with_saved_version(tmp_path: Path, saved: str) -> Path:
    """A real pickle of a fitted pipeline whose recorded scikit-learn version is ``saved``."""
    from sklearn import __version__

    assert len(saved) == len(__version__)  # the pickle's string sizes stay right
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(fitted_pipeline()).replace(__version__.encode(), saved.encode()))
    return path


def test_a_version_inside_the_range_is_advised_with_the_range(tmp_path):
    from sklearn import __version__

    supported = declared_ranges()["scikit-learn"]
    saved = next(v for v in ("1.3.0", "1.4.2", "1.5.2", "1.3.10") if v != __version__ and len(v) == len(__version__))
    assert saved in supported
    _, warnings = load_model(with_saved_version(tmp_path, saved))
    assert len(warnings) == 1
    line = warnings[0]
    assert f"saved with scikit-learn {saved}" in line and f"loaded with scikit-learn {__version__}" in line
    assert advised_versions(line, "scikit-learn") == [saved]
    assert f"ipfi supports scikit-learn{supported}" in line


def test_a_version_below_the_range_is_never_advised(tmp_path):
    from sklearn import __version__

    supported = declared_ranges()["scikit-learn"]
    saved = "0.0." + "9" * (len(__version__) - 4)
    assert saved not in supported
    _, warnings = load_model(with_saved_version(tmp_path, saved))
    line = warnings[0]
    assert f"saved with scikit-learn {saved}" in line and f"loaded with scikit-learn {__version__}" in line
    assert advised_versions(line, "scikit-learn") == []
    assert f"fit and save the model again with scikit-learn {__version__}" in line


def test_a_module_the_installed_library_lacks_names_it_and_the_range(tmp_path):
    import numpy

    path = tmp_path / "model.pkl"
    path.write_bytes(b"cnumpy._no_such_core\nThing\n.")  # what a pickle of a numpy from another time looks like
    with pytest.raises(ModelFileError) as error:
        load_model(path)
    message = str(error.value)
    assert f"another version of numpy than the installed {numpy.__version__}" in message
    assert f"ipfi supports numpy{declared_ranges()['numpy']}" in message and "numpy._no_such_core" in message


OTHER_PYTHON = os.environ.get("IPFI_OTHER_PYTHON")

PICKLE_THERE = """
import sys, joblib, sklearn, numpy, river
from river import linear_model, preprocessing
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
model = make_pipeline(StandardScaler(), LogisticRegression()).fit([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1])
joblib.dump(model, sys.argv[1])
from sklearn.ensemble import HistGradientBoostingClassifier
rows = [[float(i), float(i % 7)] for i in range(60)]
joblib.dump(HistGradientBoostingClassifier(max_iter=5).fit(rows, [i % 2 for i in range(60)]), sys.argv[3])
stream = preprocessing.StandardScaler() | linear_model.LogisticRegression()
stream.learn_one({"x": 1.0}, True)
joblib.dump(stream, sys.argv[2])
print(sklearn.__version__, numpy.__version__, river.__version__)
"""


@pytest.mark.process  # pickles in the other environment's Python
@pytest.mark.other_python
@pytest.mark.skipif(not OTHER_PYTHON, reason="needs IPFI_OTHER_PYTHON, a Python with other library versions "
                                              "(.ci/run sets it)")
def test_models_pickled_in_another_environment(tmp_path):
    import numpy
    import river
    import sklearn

    sk_path, river_path, hgb_path = tmp_path / "sklearn.joblib", tmp_path / "river.joblib", tmp_path / "hgb.joblib"
    done = subprocess.run([OTHER_PYTHON, "-c", PICKLE_THERE, str(sk_path), str(river_path), str(hgb_path)],
                          capture_output=True, text=True, timeout=300, check=True)
    other_sklearn, other_numpy, other_river = done.stdout.split()
    if (other_sklearn, other_numpy, other_river) == (sklearn.__version__, numpy.__version__, river.__version__):
        pytest.skip("the other environment has the same library versions")
    ranges = declared_ranges()
    for path in (sk_path, hgb_path, river_path):
        try:
            _, warnings = load_model(path)
        except ModelFileError as error:  # cannot load at all: the installed version and the range are named
            message = str(error)
            assert re.search(r"the installed (scikit-learn )?\d\S* ", message), message
            assert any(f"ipfi supports {name}{spec}" in message for name, spec in ranges.items()), message
            assert all(Version(v) in ranges[name] for name in ranges for v in advised_versions(message, name))
            if "saved with scikit-learn" in message:  # scikit-learn said which version wrote it
                assert f"saved with scikit-learn {other_sklearn}" in message
                assert f"installed scikit-learn {sklearn.__version__}" in message
            continue
        if other_sklearn != sklearn.__version__ and path != river_path:
            assert len(warnings) == 1, warnings
            line = warnings[0]
            assert f"saved with scikit-learn {other_sklearn}" in line
            assert f"loaded with scikit-learn {sklearn.__version__}" in line
            assert advised_versions(line, "scikit-learn") == [other_sklearn]
            assert Version(other_sklearn) in ranges["scikit-learn"]
    assert sys.executable != OTHER_PYTHON
