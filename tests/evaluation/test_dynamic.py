"""Experiment B runner: one prequential pass, interval points, alphas from one pass, drift split."""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.evaluation import compare_learning
from ipfi_cli.models import FunctionPredictor, as_predictor


def independent_error(estimate, reference):
    """The paper's error written out here (not with the function under test): both vectors
    clipped at 0 and divided by their sum, then the L1 distance."""
    a = np.clip(np.asarray(estimate, dtype=float), 0, None)
    b = np.clip(np.asarray(reference, dtype=float), 0, None)
    return float(np.abs(a / a.sum() - b / b.sum()).sum())

def stream(n=500, seed=0):
    rng = np.random.default_rng(seed)
    return [({"a": float(a), "b": float(b), "c": float(c)}, 3.0 * a + 0.5 * b) for a, b, c in rng.random((n, 3))]


def model():
    from river import linear_model, optim

    return as_predictor(linear_model.LinearRegression(optimizer=optim.SGD(0.05)))


def run(**kw):
    options = dict(interval=100, loss="absolute", n_repeats=3, seed=3)
    options.update(kw)
    return compare_learning(model(), stream(), ["a", "b", "c"], **options)


def test_interval_points_and_their_errors():
    result = run(drift_at=250)
    assert [p.row for p in result.intervals] == [100, 200, 300, 400, 500]
    assert [p.start for p in result.intervals] == [0, 100, 200, 300, 400]
    label = "ipfi-geometric-0.001"
    for point in result.intervals:
        assert point.errors[label] == pytest.approx(independent_error(point.ipfi[label], point.result.mean))
    assert len(result.errors(label, "before")) == 2 and len(result.errors(label, "after")) == 3
    summary = result.summary()[label]
    assert summary["whole"].n == 5 and summary["before"].n == 2 and summary["after"].n == 3
    assert result.n_rows == 500 and len(result.losses) == 500


def test_a_second_alpha_equals_a_separate_run_with_that_alpha():
    together = run(alphas=(0.01, 0.05), samplings=("uniform", "geometric"))
    alone = run(alphas=(0.05,), samplings=("uniform", "geometric"))
    by_label = {t.label: t for t in together.traces}
    for trace in alone.traces:
        np.testing.assert_allclose(by_label[trace.label].array(), trace.array(), rtol=1e-12, atol=1e-15)


def test_traces_are_thinned_but_keep_window_ends_and_the_last_row():
    result = run(trace_every=30)
    rows = result.traces[0].rows
    # rows 30, 60, ..., 480 (as explain --every), the window ends and the last row
    assert rows == sorted({*range(30, 501, 30), 100, 200, 300, 400, 500})
    table = result.trace_table()
    assert table[-1]["method"] == "interval" and table[-1]["row"] == 500


def test_records_hold_interval_then_ipfi_per_window():
    result = run(alphas=(0.01, 0.05))
    records = result.records()
    assert len(records) == 5 * (3 + 2 * 3)
    assert [r.method for r in records[:9]] == ["interval"] * 3 + ["ipfi"] * 6
    assert records[3].alpha == 0.01 and records[6].alpha == 0.05 and records[3].row == 100


def test_a_model_that_cannot_learn_is_refused():
    with pytest.raises(ValueError, match="cannot learn"):
        compare_learning(FunctionPredictor(lambda B: B[:, 0]), stream(10), ["a", "b", "c"], interval=5)


def phishing_run(rows, **kw):
    """A learning run on river's bundled Phishing data with a small adaptive random forest (its
    own random state, drift detectors and tree growth all have to survive a checkpoint)."""
    from river import datasets, forest

    data = list(datasets.Phishing())[:rows]
    columns = list(data[0][0])
    predictor = as_predictor(forest.ARFClassifier(n_models=2, seed=5))
    return compare_learning(predictor, data, columns, interval=100, n_repeats=2, seed=11,
                            samplings=("uniform", "geometric"), alphas=(0.01, 0.05), drift_at=300, **kw)


def test_a_run_stopped_and_continued_from_its_checkpoint_ends_with_the_numbers_of_one_that_never_stopped(tmp_path):
    checkpoint = tmp_path / "run.checkpoint"
    whole = phishing_run(600)
    stopped = phishing_run(350, checkpoint=checkpoint)  # the stream ends mid-window: saved at row 300
    assert [p.row for p in stopped.intervals] == [100, 200, 300] and checkpoint.exists()
    continued = phishing_run(600, checkpoint=checkpoint)
    assert continued.n_rows == 600
    np.testing.assert_array_equal(continued.losses, whole.losses)  # the first row's loss is NaN in both
    assert [p.row for p in continued.intervals] == [p.row for p in whole.intervals]
    for a, b in zip(continued.intervals, whole.intervals):
        np.testing.assert_array_equal(a.result.mean, b.result.mean)
        np.testing.assert_array_equal(list(a.errors.values()), list(b.errors.values()))
    for a, b in zip(continued.traces, whole.traces):
        assert a.rows == b.rows
        np.testing.assert_array_equal(a.array(), b.array())
    assert continued.cpu_seconds > stopped.cpu_seconds > 0


def test_a_checkpoint_of_other_settings_is_refused(tmp_path):
    checkpoint = tmp_path / "run.checkpoint"
    phishing_run(150, checkpoint=checkpoint)
    with pytest.raises(ValueError, match=r"of another run \(other .*n_repeats.*\)"):
        from river import datasets, forest

        data = list(datasets.Phishing())[:300]
        compare_learning(as_predictor(forest.ARFClassifier(n_models=2, seed=5)), data, list(data[0][0]),
                         interval=100, n_repeats=3, seed=11, checkpoint=checkpoint)


def test_learn_first_explains_each_row_with_the_model_that_has_just_learned_it():
    """A one-nearest-neighbour model answers a row it has learned with that row's own label: learning
    first, every explained row's loss is 0; explaining first (prequential) it is the model's real
    error on rows it has not seen."""
    from river import neighbors

    rng = np.random.default_rng(4)
    X = rng.random((300, 2))
    data = [({"a": float(a), "b": float(b)}, int(a + 0.3 * rng.random() > 0.6)) for a, b in X]

    def run_order(learn_first):
        predictor = as_predictor(neighbors.KNNClassifier(n_neighbors=1))
        return compare_learning(predictor, data, ["a", "b"], interval=100, n_repeats=2, seed=1,
                                learn_first=learn_first)

    first = run_order(True)
    assert np.nansum(first.losses) == 0 and not np.isnan(first.losses[1:]).any()
    prequential = run_order(False)
    assert np.nansum(prequential.losses) > 10  # labels with noise: the unseen rows are often misclassified


def test_a_checkpoint_made_on_another_stream_is_refused(tmp_path):
    """The same settings on other rows would continue with wrong numbers: the last row skipped is checked."""
    from river import datasets, forest

    checkpoint = tmp_path / "run.checkpoint"
    phishing_run(150, checkpoint=checkpoint)  # saved at row 100
    data = list(datasets.Phishing())[:300]
    data[99] = ({**data[99][0], "https": data[99][0]["https"] + 1.0}, data[99][1])
    with pytest.raises(ValueError, match=r"another stream \(row 100 differs\)"):
        compare_learning(as_predictor(forest.ARFClassifier(n_models=2, seed=5)), data, list(data[0][0]),
                         interval=100, n_repeats=2, seed=11, samplings=("uniform", "geometric"),
                         alphas=(0.01, 0.05), drift_at=300, checkpoint=checkpoint)
