"""The constraints file of the oldest supported versions pins exactly pyproject.toml's lower bounds."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def lower_bounds() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    lines = list(project["dependencies"]) + [line for extra in project["optional-dependencies"].values()
                                             for line in extra]
    bounds: dict[str, str] = {}
    for line in lines:
        requirement = Requirement(line)
        for spec in requirement.specifier:
            if spec.operator == ">=":
                bounds[canonicalize_name(requirement.name)] = spec.version
    return bounds


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "ci" / "constraints-oldest.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_every_runtime_dependency_is_pinned_at_its_lower_bound():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = {canonicalize_name(Requirement(line).name) for line in project["dependencies"]}
    pins, bounds = constraints(), lower_bounds()
    assert runtime <= set(pins), runtime - set(pins)
    for name, version in pins.items():
        assert bounds[name] == version or bounds[name] + ".0" == version, (name, bounds[name], version)


def test_no_model_library_is_pinned():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for line in project["dependencies"]:
        assert all(spec.operator != "==" for spec in Requirement(line).specifier), line
