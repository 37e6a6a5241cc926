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
            patch.setattr(RowSteps, "_bounds_per_row", lambda self, explainer=None: False)
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


@pytest.mark.parametrize("kind", ["chebyshev", *KINDS])
def test_keyed_runs_with_bounds_explain_the_keys_together(monkeypatch, datasets, kind):
    """``--by`` with ``--bounds``: every key's rows of a micro-batch go to the model in one call (each key's
    explainer folds its rows in up to its due records; ``--running-mean``/``--half-life`` keys, whose
    explainers read event times, in a call per key), with the bytes of one key at a time cut at records."""
    data, model = datasets["cancer"]
    options = ["--by", "key", "--batch-size", "50", *KINDS.get(kind, [])]
    keyed = data.with_name("keyed.csv")
    lines = data.read_text().splitlines()
    keyed.write_text("\n".join([lines[0] + ",key"] + [f"{line},{'abc'[i % 3]}" for i, line in enumerate(lines[1:])])
                     + "\n")
    expected, cut_calls = explain(monkeypatch, keyed, model, options, cut=True)
    assert cut_calls >= (len(lines) - 1) // 7  # one key at a time, a call per record
    assert "_bound" in expected.splitlines()[0] and len(expected.splitlines()) > 70
    got, calls = explain(monkeypatch, keyed, model, options, cut=False)
    assert got == expected
    if kind in ("chebyshev", "realisations"):
        assert calls == 0  # no key on its own: prepare, one model call for the keys, finish
    else:  # the smoothings that merge have their own explain_many (event times): a call per key, none per record
        assert calls <= 3 * -(-(len(lines) - 1) // 50)
