"""What a ``--state`` file must hold, and what must not change for a run to continue it.

:func:`run_settings` is the one check of a continuation's settings: every option that changes the
numbers (the explainer's parameters, the model file's digest, the target, the output's format, how
the input is read, the hash seed a model may depend on), which :class:`~ipfi_cli.run.resume.StateKeeper`
saves with each checkpoint and compares when a run continues (:func:`settings_differences` names
what differs). :func:`check_state` checks the parts and counters of a state as it is read (a state
crafted with a valid checksum may hold anything).
"""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any

from ipfi_cli.core.state_fields import StateFieldError, fields, within
from ipfi_cli.io.writers import output_format_for
from ipfi_cli.models.hashing import depends_on_hashing
from ipfi_cli.models.sources import model_digest

if TYPE_CHECKING:
    from ipfi_cli.run.plan import RunPlan
    from ipfi_cli.run.settings import ExplainSettings, RunParts


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes (the model a run started with)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


#: an explainer's parameter -> the option that sets it, where the two names differ
OPTION_NAMES = {"n_repeats": "--repeats", "empty": "--empty-coalition"}
#: run settings left out of a state at these values (states saved before the option resume as they
#: did); a state without one has it at this value
_OMITTED_SETTINGS: dict[str, Any] = {
    "--bounds-method": "chebyshev",
    "--removal": "marginal",  # the explainer's params leave the paper's removal out
    "--empty-coalition": "mean",  # SAGE's states of before the choice scored it by the mean prediction
    # how the input is read: another reading of the same rows is another run
    "--na-values": None, "--no-default-na": False, "--delimiter": None, "--decimal": None, "--text": None,
    "--skip-initial-space": False,
    # a river model's sums run in the order of its sets of names, which Python's string hashing sets: a state
    # records the seed of a model that may depend on it (ipfi_cli.models.hashing); one without it was saved
    # when ipfi pinned 0, and continues only under 0
    "PYTHONHASHSEED": "0",
}


def run_settings(plan: RunPlan, s: ExplainSettings, parts: RunParts) -> dict[str, Any]:
    """Everything that must be the same for a run to continue another: option -> value."""
    params, read = parts.explainer.params(), s.inputs
    own = {OPTION_NAMES.get(key, "--" + key.replace("_", "-")): value for key, value in params.items()
           if key not in ("method", "columns", "names", "groups", "loss", "smoothing")}  # smoothing: --half-life etc.
    return {
        "model inputs": list(params["columns"]), "explained (--features/--drop/--group)": list(params["names"]),
        "--group": params["groups"], "--loss": params["loss"], "--method": params["method"], **own,
        "--time-column": s.method.time_column, "--half-life": s.method.half_life,
        "--running-mean": s.method.running_mean,
        "--model": model_digest(s.model.path), "--target": s.selection.target, "--learn": s.model.learn,
        "--task": "classification" if plan.classification else "regression", "--every": s.output.every,
        "--bounds": s.output.bounds, "--delta": s.output.delta if s.output.bounds else None,
        # only when not the default, so a state saved before the option resumes as it did
        **({"--bounds-method": s.output.bounds_method}
           if s.output.bounds_method != _OMITTED_SETTINGS["--bounds-method"] else {}),
        **{key: value for key, value in (("--na-values", sorted(read.na_values) if read.na_values else None),
                                          ("--no-default-na", read.no_default_na), ("--delimiter", read.delimiter),
                                          ("--decimal", read.decimal),
                                          ("--text", sorted(read.text) if read.text else None),
                                          ("--skip-initial-space", read.skip_initial_space))
           if value != _OMITTED_SETTINGS[key]},
        "--by": list(s.selection.by) if s.selection.by else None,
        **_hash_seed(s.model.path),
        "--output-format": output_format_for(s.output.path, s.output.format),
        "--detect": None if s.watch is None else {
            "--change-delta": s.watch.delta, "--min-change": s.watch.min_change,
            "--reference": file_digest(s.watch.reference) if s.watch.reference else None,
            "--ndcg-threshold": s.watch.ndcg_threshold, "--top-k": s.watch.top_k},
    }


def _hash_seed(model: str) -> dict[str, Any]:
    """``PYTHONHASHSEED`` for a model whose numbers may depend on string hashing (in their last digits),
    whatever its value (a state saved without it ran under 0, ipfi's earlier pin)."""
    return {"PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "random")} if depends_on_hashing(model) else {}

def settings_differences(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What differs between a state's settings (``saved``) and a run's (``now``), one phrase each:
    the option, the state's value and the run's (the model file: that it differs)."""
    keys = [*now, *(key for key in _OMITTED_SETTINGS if key not in now)]
    return [f"{key}: the model file differs from the one the run started with" if key == "--model"
            else f"{key}: state {_shown(state)}, now {_shown(value)}" + _hash_seed_hint(key, state)
            for key in keys
            for state, value in [(saved.get(key, _OMITTED_SETTINGS.get(key)), now.get(key, _OMITTED_SETTINGS.get(key)))]
            if state != value]


def check_state(path: str, state: dict[str, Any]) -> None:
    """Check the parts of a state and the run's counters as they are read (a state crafted with a valid
    checksum may hold anything): a :class:`~ipfi_cli.io.run_state.StateFileError` names the field. The
    explainer's and the change watch's own fields are checked by their ``load_state_dict``."""
    from ipfi_cli.io.run_state import StateFileError

    try:
        for part in ("settings", "explainer", "run"):
            if part not in state:
                raise StateFieldError(part, "is missing")
            with within(part):
                fields(state[part])
        for part in ("model", "watch"):
            if part not in state:
                raise StateFieldError(part, "is missing")
            if state[part] is not None:
                with within(part):
                    fields(state[part])
        with within("run"):
            check_run(state["run"])
    except StateFieldError as error:
        raise StateFileError(path, str(error)) from None


def check_run(run: dict[str, Any]) -> None:
    """The fields of a state's ``run`` (its counters), as :meth:`StateKeeper._checkpoint` writes them."""
    from ipfi_cli.core.state_fields import StateFieldError, fields, integer, number, text, within

    integer(run, "seed")
    integer(run, "input_rows")
    integer(run, "rows")
    integer(run, "skipped")
    if run.get("first_skip", 0) is not None:
        text(run, "first_skip")
    if run.get("last_written", 0) is not None:
        integer(run, "last_written")
    last = run["last"]
    if last is not None:
        if not isinstance(last, (list, tuple)) or len(last) != 2 or not isinstance(last[1], (list, tuple)):
            raise StateFieldError("last", "must be a row number and its importances")
        with within("last"):
            integer({"row": last[0]}, "row")
            for value in last[1]:
                number({"importance": value}, "importance", nan=True)
    integer(run, "records")
    for name, kind in fields(run["kinds"]).items():
        if not isinstance(name, str) or kind not in ("number", "text"):
            raise StateFieldError("kinds", f"must give each column the kind 'number' or 'text', not {kind!r}")
    if run.get("last_print", 0) is not None:
        integer(run, "last_print", high=0xFFFFFFFF)
    with within("output"):
        output = fields(run["output"])
        integer(output, "size")
        integer(output, "crc", high=0xFFFFFFFF)
    text(run, "input")
    if run.get("lineage") is not None:
        text(run, "lineage")
    for key in ("parts", "lineages", "merged"):  # a merged state's
        if run.get(key) is not None and (not isinstance(run[key], list)
                                         or not all(isinstance(item, str) for item in run[key])):
            raise StateFieldError(key, "must be a list of texts")


def _hash_seed_hint(key: str, state: Any) -> str:
    """How to continue a run under the hash seed it started under (an environment variable, not an option)."""
    if key != "PYTHONHASHSEED" or state == "random":
        return ""
    return f" (continue it with PYTHONHASHSEED={state} in the environment)"


def _shown(value: Any) -> str:
    """A setting as the options say it: none, on/off, ``--option value`` pairs, a list's items."""
    if value is None:
        return "none"
    if value is False:
        return "off"
    if value is True:
        return "on"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} {_shown(v)}" for k, v in value.items()) + "}" if value else "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)
