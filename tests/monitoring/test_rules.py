"""The shipped alerting rules: Prometheus accepts them, and promtool's unit tests (rules_test.yml) show
each alert firing on a series with the change and not on a steady one; a real Prometheus fires the
ranking alert of a pushed run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ipfi_cli.monitoring import RULES

from .conftest import HGB, Prometheus, ipfi, need, sample_lines, wait_for

HERE = Path(__file__).resolve().parent


def test_promtool_accepts_the_shipped_rules():
    result = subprocess.run([need("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 4 rules found" in result.stdout


def test_each_alert_fires_on_a_change_and_not_on_a_steady_series(tmp_path):
    tests = tmp_path / "rules_test.yml"
    tests.write_text((HERE / "rules_test.yml").read_text().replace("  - RULES", f"  - {RULES}"))
    result = subprocess.run([need("promtool"), "test", "rules", str(tests)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_rules_test_can_fail(tmp_path):
    """A loss rule that asks for a 100-fold jump does not fire where the test expects it: promtool says so."""
    rules = tmp_path / "rules.yml"
    rules.write_text(RULES.read_text().replace("> 1.5 *", "> 100 *"))
    tests = tmp_path / "rules_test.yml"
    tests.write_text((HERE / "rules_test.yml").read_text().replace("  - RULES", f"  - {rules}"))
    result = subprocess.run([need("promtool"), "test", "rules", str(tests)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert "IpfiLossJumped" in result.stdout + result.stderr


@pytest.mark.slow
def test_a_pushed_run_that_ended_departed_fires_at_once_in_a_real_prometheus(pushgateway, tmp_path):
    """``explain --reference --pushgateway``: the ranking alert fires as soon as Prometheus has scraped the
    push (it was pending for 10 minutes, then fired until the next push). The reference is the batch
    importances reversed: the top features are the model's least important ones."""
    rows = tmp_path / "rows.csv"
    rows.write_text("\n".join(sample_lines("agrawal_static.csv")[:301]) + "\n")
    reference = tmp_path / "reference.csv"
    reference.write_text("feature,importance\nloan,9\nzipcode,8\nelevel,7\ncar,6\nhvalue,5\nhyears,4\n"
                         "commission,3\nsalary,2\nage,1\n")
    prometheus = Prometheus(tmp_path, {"pushgateway": pushgateway.removeprefix("http://")}, [str(RULES)])
    try:
        result = ipfi("explain", str(rows), "-m", HGB, "-t", "class", "--seed", "1", "-M", "2", "--detect",
                      "--reference", str(reference), "-q", "-o", str(tmp_path / "traces.csv"),
                      "--pushgateway", pushgateway, "--push-job", "nightly")
        assert result.returncode == 0, result.stderr
        wait_for(lambda: prometheus.query("ipfi_ranking_ndcg < ipfi_ranking_ndcg_threshold"), 30,
                 "the pushed nDCG to be scraped", prometheus.log)
        alert = wait_for(lambda: [a for a in prometheus.alerts()
                                  if a["labels"]["alertname"] == "IpfiRankingDeparted" and a["state"] == "firing"],
                         30, "the alert to fire", prometheus.log)
        assert alert[0]["labels"]["exported_job"] == "nightly"
        assert alert[0]["annotations"]["summary"].startswith("The feature ranking departed from the reference (nDCG 0.")
    finally:
        prometheus.stop()
