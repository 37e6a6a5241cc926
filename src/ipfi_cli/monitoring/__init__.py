"""Files ipfi ships for the monitoring stack: Prometheus alerting rules (``prometheus-rules.yml``).

>>> RULES.name
'prometheus-rules.yml'
>>> RULES.is_file()
True
"""

from __future__ import annotations

from pathlib import Path

#: the alerting rules for ipfi's metrics (load them in Prometheus' ``rule_files``)
RULES = Path(__file__).resolve().with_name("prometheus-rules.yml")
