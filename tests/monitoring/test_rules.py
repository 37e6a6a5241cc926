"""The shipped alerting rules: Prometheus accepts them, and promtool's unit tests (rules_test.yml) show
each alert firing on a series with the change and not on a steady one; a real Prometheus fires the
ranking alert of a pushed run."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from ipfi_cli.monitoring import RULES

from .conftest import HGB, Prometheus, ipfi, need, sample_lines, wait_for

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.process  # promtool


def test_promtool_accepts_the_shipped_rules():
    result = subprocess.run([need("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


def test_each_alert_fires_on_a_change_and_not_on_a_steady_series(tmp_path):
    tests = tmp_path / "rules_test.yml"
    tests.write_text((HERE / "rules_test.yml").read_text().replace("  - RULES", f"  - {RULES}"))
    result = subprocess.run([need("promtool"), "test", "rules", str(tests)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def rules() -> list[dict]:
    import yaml

    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def readme_anchors() -> set[str]:
    """The anchors of docs/monitoring.md's headings (as GitHub and mkdocs make them): lower case,
    punctuation but - and _ dropped, spaces -."""
    anchors, fenced = set(), False
    for line in (HERE.parents[1] / "docs" / "monitoring.md").read_text().splitlines():
        fenced ^= line.startswith("```")
        if line.startswith("#") and not fenced:
            anchors.add(re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-"))
    return anchors


def test_every_alert_has_a_severity_tier_and_a_runbook_section_that_exists():
    found = {rule["alert"]: rule for rule in rules()}
    severities = {name: rule["labels"]["severity"] for name, rule in found.items()}
    assert severities == {"IpfiDown": "critical", "IpfiServedModelDown": "critical", "IpfiLossChanged": "critical",
                          "IpfiLossJumped": "critical", "IpfiStreamStale": "warning",
                          "IpfiImportanceChanged": "warning", "IpfiRankingDeparted": "warning",
                          "IpfiRowsLost": "warning"}
    anchors = readme_anchors()
    for name, rule in found.items():
        url = rule["annotations"]["runbook_url"]
        assert url == f"docs/monitoring.md#runbook-{name.lower()}" and url.split("#")[1] in anchors, name
        # the stream is named by its job, never empty in Prometheus (instance is empty for pushed series)
        assert "$labels.job" in rule["annotations"]["summary"], name
    # the alerts on published series fire on through a Pushgateway restart
    assert {n for n, r in found.items() if "keep_firing_for" in r} == {
        "IpfiLossChanged", "IpfiImportanceChanged", "IpfiRankingDeparted", "IpfiRowsLost"}


PARITY_TEST = """
rule_files:
  - {rules}
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{series}
    alert_rule_test:
{checks}
"""


def test_the_webhooks_alertmanager_alert_has_the_labels_of_the_rules_alert_for_the_same_event(tmp_path):
    """For one event the rule and ``--webhook-format alertmanager`` send one alert, not two: promtool
    expects, for each rule alert, exactly the labels :func:`alertmanager_payload` posts, for a scraped run
    (job and instance, a --metrics-label) and for a pushed one (the Pushgateway's job and instance, the push
    job as exported_job, a --push-label)."""
    import yaml

    from ipfi_cli.core.events import ChangeEvent
    from ipfi_cli.run.webhook import alertmanager_payload

    def event(kind: str, feature: str | None, direction: str) -> ChangeEvent:
        return ChangeEvent(row=900, feature=feature, kind=kind, direction=direction, before=0.3, after=0.05,
                           before_bound=0.02, after_bound=0.3, n_before=800, n_after=100, start_row=850)

    cases = [  # (event, the series' labels, the webhook's --push-job and constant labels)
        (event("importance", "salary", "down"), 'kind="importance",feature="salary",direction="down",'
         'job="ipfi-churn",instance="h:9187",model="churn"', "ipfi-churn", {"model": "churn"}),
        (event("loss", None, "up"), 'kind="loss",direction="up",job="ipfi-churn",instance="h:9187",model="churn"',
         "ipfi-churn", {"model": "churn"}),
        (event("importance", "age", "up"), 'kind="importance",feature="age",direction="up",job="pushgateway",'
         'exported_job="nightly",instance="pg:9091",stream="payments"', "nightly", {"stream": "payments"}),
    ]
    series, checks = [], []
    for ev, labels, job, constant in cases:
        series.append(f"      - series: 'ipfi_change_events_total{{{labels}}}'\n        values: '0x5 1x10'")
        (alert,) = alertmanager_payload(ev, event_id="x", source="-", labels=constant, resolve_after=60, job=job)
        expected = {k: v for k, v in alert["labels"].items() if k != "alertname"}
        checks.append(f"      - eval_time: 8m\n        alertname: {alert['labels']['alertname']}\n"
                      f"        exp_alerts:\n          - exp_labels: {json.dumps(expected)}")
    # the two importance events are one check with two alerts
    checks = [checks[0].replace("exp_alerts:\n", "exp_alerts:\n" + checks[2].split("exp_alerts:\n")[1] + "\n"),
              checks[1]]
    stripped = yaml.safe_load(RULES.read_text())
    for group in stripped["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)  # the labels are under test
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(stripped))
    test = tmp_path / "parity_test.yml"
    test.write_text(PARITY_TEST.format(rules=tmp_path / "rules.yml", series="\n".join(series),
                                       checks="\n".join(checks)))
    result = subprocess.run([need("promtool"), "test", "rules", str(test)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr + test.read_text()


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
        assert alert[0]["labels"]["job"] == "nightly"  # the push job (exported_job), as the webhook's alert has it
        assert alert[0]["annotations"]["summary"].startswith("The feature ranking of ipfi nightly departed from the "
                                                             "reference (nDCG 0.")
    finally:
        prometheus.stop()
