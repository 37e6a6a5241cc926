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
