"""The shipped alerting rules: Prometheus accepts them, and promtool's unit tests (rules_test.yml) show
each alert firing on a series with the change and not on a steady one."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ipfi_cli.monitoring import RULES

from .conftest import need

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
