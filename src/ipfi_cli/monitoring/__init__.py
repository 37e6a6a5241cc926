"""Files ipfi ships for the monitoring stack: Prometheus alerting rules (``prometheus-rules.yml``)
and a Grafana dashboard of ipfi's metrics (``grafana-dashboard.json``, to import).

>>> RULES.name, DASHBOARD.name
('prometheus-rules.yml', 'grafana-dashboard.json')
>>> RULES.is_file() and DASHBOARD.is_file()
True
"""

from __future__ import annotations

from pathlib import Path

#: the alerting rules for ipfi's metrics (load them in Prometheus' ``rule_files``)
RULES = Path(__file__).resolve().with_name("prometheus-rules.yml")

#: a Grafana dashboard of ipfi's metrics (Dashboards > New > Import; its ``job`` variable picks the streams)
DASHBOARD = Path(__file__).resolve().with_name("grafana-dashboard.json")
