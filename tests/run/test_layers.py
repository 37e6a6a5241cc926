"""The layers keep their rooms: the core and the run layer import neither Typer nor Rich (nor
anything from the command line), and the command line's option choices are the core's
registries."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "ipfi_cli"


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", ["core", "run", "io", "models", "evaluation"])
def test_lower_layers_import_no_cli_typer_or_rich(layer):
    for path in sorted((PACKAGE / layer).glob("*.py")):
        banned = {name for name in imported_modules(path)
                  if name.split(".")[0] in ("typer", "rich", "click") or name.startswith("ipfi_cli.cli")}
        assert not banned, f"{path.name} imports {banned}"


def test_the_core_does_no_io():
    for path in sorted((PACKAGE / "core").glob("*.py")):
        banned = {name for name in imported_modules(path)
                  if name.startswith(("ipfi_cli.io", "ipfi_cli.run", "ipfi_cli.models", "ipfi_cli.evaluation"))
                  or name in ("os", "sys")}
        assert not banned, f"{path.name} imports {banned}"


@pytest.mark.process  # python -c
def test_a_run_session_loads_without_typer_or_rich():
    code = ("import sys, ipfi_cli.run.explain, ipfi_cli.run.resume, ipfi_cli.run.dataset\n"
            "print(sorted(m for m in ('typer', 'rich', 'click') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_option_choices_are_the_core_registries():
    from ipfi_cli.cli.options import LossName, MethodName, Sampling
    from ipfi_cli.core.choices import LOSS_NAMES, METHOD_NAMES, SAMPLING_NAMES
    from ipfi_cli.core.explainer import METHODS
    from ipfi_cli.core.losses import LOSSES
    from ipfi_cli.core.samplers import SAMPLERS

    assert set(LOSS_NAMES) == set(LOSSES) and set(SAMPLING_NAMES) == set(SAMPLERS)
    assert [m.value for m in LossName] == list(LOSS_NAMES)
    assert [m.value for m in Sampling] == list(SAMPLING_NAMES)
    assert list(METHOD_NAMES) == list(METHODS) == [m.value for m in MethodName]


def test_no_module_imports_itself_back():
    """No import cycle between ipfi's modules, counting imports inside functions and the ones
    only a type checker follows."""
    grimp = pytest.importorskip("grimp")  # installed with import-linter (the dev extra)
    graph = grimp.build_graph("ipfi_cli")
    cycles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            chain = graph.find_shortest_chain(importer=imported, imported=module) if imported != module else None
            if chain:
                cycles.add(" -> ".join((module, *chain)))
    assert sorted(cycles) == []


@pytest.mark.process  # python -c
def test_the_metric_families_are_their_own_module_and_the_old_names_still_import():
    """run/metrics.py builds the families, run/monitor.py sends them: batch and compare build theirs
    without loading the exporter, the webhook or a session; ``ipfi_cli.run.monitor`` still exports the
    names it had (the same objects)."""
    code = ("import sys, ipfi_cli.run.metrics\n"
            "print(sorted(m for m in ('ipfi_cli.run.monitor', 'ipfi_cli.run.webhook', 'ipfi_cli.run.explain')"
            " if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    from ipfi_cli.run import metrics, monitor

    for name in metrics.__all__:
        if name != "build_families":
            assert getattr(monitor, name) is getattr(metrics, name), name
    assert {"MetricsExporter", "MonitorSettings", "StreamMonitor", "publish"} <= set(monitor.__all__)
    assert "def stream_families" not in (PACKAGE / "run" / "monitor.py").read_text()
