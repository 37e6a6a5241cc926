"""``explain --metrics-textfile``: what the file's families say of themselves."""

from __future__ import annotations

import json

from prometheus_client.parser import text_string_to_metric_families

from .conftest import HGB, ipfi, sample_lines


def test_the_bound_gauge_says_which_bound_it_holds(tmp_path):
    """``ipfi_feature_importance_bound`` holds the bound of ``--bounds-method`` at ``--delta`` (the ones
    ``--meta`` reports); its help text names both (it said Chebyshev whatever the method)."""
    data = tmp_path / "rows.csv"
    data.write_text("\n".join(sample_lines("agrawal_static.csv")[:401]) + "\n")
    prom, meta = tmp_path / "m.prom", tmp_path / "meta.json"
    result = ipfi("explain", str(data), "-m", HGB, "-t", "class", "--seed", "1", "-M", "3", "--bounds-method",
                  "realisations", "--delta", "0.1", "--no-live", "-q", "--metrics-textfile", str(prom),
                  "--meta", str(meta), "-o", str(tmp_path / "t.csv"))
    assert result.returncode == 0, result.stderr
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    bound = families["ipfi_feature_importance_bound"]
    assert "at level 1 - 0.1 (realisations bound" in bound.documentation
    final = json.loads(meta.read_text())["final"]
    assert {s.labels["feature"]: s.value for s in bound.samples} == final["bounds"]
    assert len(bound.samples) == 9


def test_model_counters_continue_across_a_resume(tmp_path):
    """``--state``: the model-call counters are cumulative over the run's processes, as the row
    counters are (they restarted at 0 in a resumed process). Each explained row costs one
    unperturbed prediction and one per feature and realisation: 9 features x M = 10, plus 1."""
    lines = sample_lines("agrawal_static.csv")
    first, whole = tmp_path / "first.csv", tmp_path / "whole.csv"
    first.write_text("\n".join(lines[:301]) + "\n")
    whole.write_text("\n".join(lines[:601]) + "\n")
    state = tmp_path / "run.ipfi"
    numbers = []
    for data, name in ((first, "a"), (whole, "b")):
        prom = tmp_path / f"{name}.prom"
        result = ipfi("explain", str(data), "-m", HGB, "-t", "class", "--seed", "1", "--state", str(state),
                      "--no-live", "-q", "--metrics-textfile", str(prom), "-o", str(tmp_path / "t.csv"))
        assert result.returncode == 0, result.stderr
        families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
        numbers.append({name: families[name].samples[0].value for name in (
            "ipfi_rows_explained", "ipfi_model_predictions", "ipfi_model_calls")})
    assert numbers[0]["ipfi_rows_explained"] == 299 and numbers[1]["ipfi_rows_explained"] == 599
    assert numbers[0]["ipfi_model_predictions"] == 299 * (9 * 10 + 1)
    assert numbers[1]["ipfi_model_predictions"] == 599 * (9 * 10 + 1)
    assert numbers[1]["ipfi_model_calls"] > numbers[0]["ipfi_model_calls"] >= 1
