"""``explain --bounds`` no longer cuts a micro-batch at every record: the explainer gives the bounds after
the rows whose records are due from one model call (iPFI's by every method and smoothing). The traces are
those of the run that cut (one call per record), byte for byte, on real data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ipfi_cli.cli.app import app
from ipfi_cli.core.incremental import IPFIEstimator
from ipfi_cli.run.steps import RowSteps

#: the bounds kinds that used to cut micro-batches at records (the exponential smoothing's chebyshev and
#: normal bounds did not: its tracker records its moments row by row)
KINDS = {
    "realisations": ["--bounds-method", "realisations"],
    "running-mean": ["--running-mean"],
    "running-mean-normal": ["--running-mean", "--bounds-method", "normal"],
    "half-life": ["--half-life", "30m", "--time-column", "time"],
}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """scikit-learn's bundled breast cancer data (six features, a classifier) and diabetes data (one feature, a
    regression: a lone feature's sums are reduced along their only axis), each with event times a minute
    apart."""
    import joblib
    from sklearn.datasets import load_breast_cancer, load_diabetes
    from sklearn.linear_model import LinearRegression, LogisticRegression

    folder = tmp_path_factory.mktemp("bounds")
    cancer = load_breast_cancer(as_frame=True)
    X = cancer.data.iloc[:, :6].set_axis([f"f{i}" for i in range(6)], axis=1)
    diabetes = load_diabetes(as_frame=True)
    out = {}
    for name, frame, model in [
            ("cancer", X, LogisticRegression(max_iter=1000).fit(X, cancer.target)),
            ("diabetes", diabetes.data[["bmi"]], LinearRegression().fit(diabetes.data[["bmi"]], diabetes.target))]:
        target = cancer.target if name == "cancer" else diabetes.target
        data, model_path = folder / f"{name}.csv", folder / f"{name}.joblib"
        frame.assign(time=np.arange(len(frame)) * 60.0, target=target).to_csv(data, index=False)
        joblib.dump(model, model_path)
        out[name] = (data, model_path)
    return out


def explain(monkeypatch, data: Path, model: Path, options: list[str], *, cut: bool) -> tuple[str, int]:
    """The trace of ``ipfi explain --bounds`` and the explainer's calls; ``cut``: as before, a micro-batch cut
    at every record (the bounds read after a call that ends there)."""
    calls = []
    explain_many = IPFIEstimator.explain_many

    def counted(self, *args, **kwargs):
        calls.append(len(args[0]))
        return explain_many(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(IPFIEstimator, "explain_many", counted)
        if cut:
            patch.setattr(RowSteps, "_bounds_per_row", lambda self: False)
        result = CliRunner().invoke(app, ["explain", str(data), "-m", str(model), "-t", "target", "--bounds",
                                          "--every", "7", "-M", "3", "-L", "20", "--seed", "2", "-q", *options],
                                    catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout, len(calls)


@pytest.mark.parametrize("dataset", ["cancer", "diabetes"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_bounds_of_every_kind_need_no_cut_at_records(monkeypatch, datasets, dataset, kind):
    data, model = datasets[dataset]
    expected, cut_calls = explain(monkeypatch, data, model, [*KINDS[kind], "--batch-size", "64"], cut=True)
    rows = len(data.read_text().splitlines()) - 1
    assert cut_calls >= rows // 7  # the reference: a call per record
    lines = expected.splitlines()
    assert len(lines) >= 1 + rows // 7 and ("f0_bound" in lines[0] or "bmi_bound" in lines[0])
    assert lines[-1].split(",")[-1] not in ("", "nan", "NaN")  # bounds there, not NaN
    for batch_size in ("1", "64", "1000"):
        got, calls = explain(monkeypatch, data, model, [*KINDS[kind], "--batch-size", batch_size], cut=False)
        assert got == expected, (kind, batch_size)
        assert calls <= -(-rows // int(batch_size)) + 1, (kind, batch_size, calls)  # a call per micro-batch
