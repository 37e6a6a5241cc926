"""``ipfi explain --method sage``, ``--removal``, ``--smoothing`` through the command."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli.conftest import parse_csv
from tests.conftest import needs_adwin_state


def _last(result) -> dict[str, float]:
    records = parse_csv(result.stdout)
    return {k: float(v) for k, v in records[-1].items() if k != "row"}


def test_sage_values_add_up_to_the_explained_loss(run, agrawal_small, hgb, tmp_path):
    meta = tmp_path / "meta.json"
    result = run("explain", agrawal_small, "-m", hgb, "-t", "class", "--method", "sage", "--seed", "3",
                 "--no-live", "--meta", meta, "--every", "100")
    assert result.exit_code == 0, result.output
    values = _last(result)
    final = json.loads(meta.read_text())["final"]
    assert json.loads(meta.read_text())["settings"]["method"] == "sage"
    # per row the contributions add up to that row's marginal - model loss, so the smoothed values
    # add up to the smoothed explained loss (to rounding)
    assert sum(values.values()) == pytest.approx(final["explained_loss"], abs=1e-9)
    assert final["explained_loss"] == pytest.approx(final["marginal_loss"] - final["model_loss"], abs=1e-12)
    assert "explained loss" in result.stderr and "the SAGE values add up to it" in result.stderr
    assert values["salary"] > 0.1 and values["age"] > 0.05   # Agrawal fn 2 uses salary and age


def test_sage_matches_the_core_on_the_same_rows(run, agrawal_small, hgb):
    import joblib
    import pandas as pd

    from ipfi_cli.core.sage import ISAGEEstimator
    from ipfi_cli.models import as_predictor

    result = run("explain", agrawal_small, "-m", hgb, "-t", "class", "--method", "sage", "--seed", "4",
                 "--repeats", "2", "--inner", "3", "--smoothing", "mean", "--no-live", "-q")
    assert result.exit_code == 0, result.output
    model = joblib.load(hgb)
    frame = pd.read_csv(agrawal_small)
    columns = list(model.feature_names_in_)
    core = ISAGEEstimator(as_predictor(model), columns, n_repeats=2, n_inner=3, smoothing="mean", seed=4)
    expected = core.explain_many(frame[columns].to_numpy(dtype=np.float64), frame["class"].tolist())[-1]
    assert list(_last(result).values()) == expected.tolist()


def test_both_removals_write_both_values_and_their_gap(run, agrawal_small, hgb):
    result = run("explain", agrawal_small, "-m", hgb, "-t", "class", "--removal", "both", "--seed", "5",
                 "--features", "salary,age,commission", "--no-live", "-q", "--every", "300")
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[0].split(",")
    assert header == ["row", "salary", "commission", "age", "salary_conditional", "commission_conditional",
                      "age_conditional", "salary_gap", "commission_gap", "age_gap"]
    values = _last(result)
    for name in ("salary", "commission", "age"):
        assert values[f"{name}_gap"] == pytest.approx(values[name] - values[f"{name}_conditional"], abs=1e-12)


def test_marginal_pfi_output_is_unchanged_by_the_new_options(run, agrawal_small, hgb):
    plain = run("explain", agrawal_small, "-m", hgb, "-t", "class", "--seed", "6", "--no-live", "-q")
    spelled = run("explain", agrawal_small, "-m", hgb, "-t", "class", "--seed", "6", "--no-live", "-q",
                  "--method", "pfi", "--removal", "marginal", "--smoothing", "exponential")
    assert plain.exit_code == 0 and plain.stdout == spelled.stdout


@needs_adwin_state  # --detect saved in a state
def test_sage_feeds_the_change_detector_and_continues_from_state(run, agrawal_small, hgb, tmp_path):
    options = ["-m", hgb, "-t", "class", "--method", "sage", "--seed", "7", "--no-live", "-q", "--detect"]
    whole = tmp_path / "whole.csv"
    result = run("explain", agrawal_small, *options, "-o", whole)
    assert result.exit_code == 0 and len(whole.read_text().splitlines()) > 1
    # SAGE's state is plain data: stopped halfway and continued, the traces of one run
    lines = agrawal_small.read_text().splitlines()
    first = tmp_path / "first.csv"
    first.write_text("\n".join(lines[:len(lines) // 2]) + "\n")
    out, state = tmp_path / "resumed.csv", tmp_path / "run.state"
    assert run("explain", first, *options, "-o", out, "--state", state).exit_code == 0
    resumed = run("explain", agrawal_small, *options, "-o", out, "--state", state)
    assert resumed.exit_code == 0, resumed.stderr
    assert out.read_bytes() == whole.read_bytes()


def _text(stderr: str) -> str:
    """Typer's usage-error box, as one line of words."""
    return " ".join(stderr.replace("│", " ").split())


def test_what_sage_cannot_do_is_a_usage_error(run, agrawal_small, hgb):
    result = run("explain", agrawal_small, "-m", hgb, "-t", "class", "--method", "sage", "--features", "age")
    assert result.exit_code == 2
    assert "'--features': SAGE shares the loss among all the model's inputs" in _text(result.stderr)
    result = run("explain", agrawal_small, "-m", hgb, "-t", "class", "--method", "sage", "--removal", "conditional",
                 "--conditional-sampler", "tree")
    assert result.exit_code == 2 and "'--conditional-sampler': SAGE removes whole coalitions" in _text(result.stderr)


@pytest.mark.parametrize("command", ["explain", "batch", "compare"])
def test_sage_plays_the_log_loss_and_refuses_its_mean_empty_coalition(run, agrawal_small, hgb, command):
    """Issue 40: SAGE with the log loss was refused, although the SAGE paper and sage-importance use
    cross-entropy for classifiers (the marginal prediction is the mean probability vector). It runs;
    only the empty coalition scored by the smoothed mean prediction, which needs every class's
    probability, is a usage error naming --empty-coalition."""
    result = run(command, agrawal_small, "-m", hgb, "-t", "class", "--method", "sage", "--loss", "log", "-q",
                 "--seed", "1", *(("--permutations", "100") if command != "explain" else ()))
    assert result.exit_code == 0, result.stderr
    records = parse_csv(result.stdout)
    assert records and "unexpected" not in result.stderr
    assert all(r["importance"] not in ("", "nan", "inf") for r in records if "importance" in r)
    result = run(command, agrawal_small, "-m", hgb, "-t", "class", "--method", "sage", "--loss", "log", "-q",
                 "--empty-coalition", "mean", *(("--inner", "2") if command == "batch" else ()))
    assert result.exit_code == 2, result.stderr
    assert "'--empty-coalition'" in result.stderr and "unexpected" not in result.stderr and result.stdout == ""
