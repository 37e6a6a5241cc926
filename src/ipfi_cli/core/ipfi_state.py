"""iPFI's state: its settings and what it learned from the stream, as plain data, and the settings
it depends on.

:func:`state_dict` gives dicts, lists, numbers, strings and NumPy arrays (the random generator's state
is a dict): loading it (:func:`load_state_dict`) runs no code, and checks each field as it reads it
(:mod:`~ipfi_cli.core.state_fields`). :func:`save_stream` / :func:`restore_stream` copy and put back
the stream state alone (generator, reservoir, trackers), for all-or-nothing calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ipfi_cli.core.bounds import check_bounds_alpha, needs_realisations
from ipfi_cli.core.removal import REMOVALS
from ipfi_cli.core.samplers import SAMPLERS, make_sampler
from ipfi_cli.core.state_fields import array, fields, generator_state, integer, number, within

if TYPE_CHECKING:
    from ipfi_cli.core.ipfi_parts import EstimatorParts

#: settings :func:`settings_dict` leaves out at these values (states of the paper's iPFI stay as they
#: were); named in messages as they are
OMITTED_SETTINGS = {"smoothing": "exponential", "bounds_method": "chebyshev"}


def check_options(n_repeats: int, sampling: str, reservoir_size: int, removal: str, smoothing: str,
                  bounds_method: str, alpha: float) -> None:
    """A :class:`ValueError` for the first of iPFI's options that is out of its range, or that another excludes."""
    if n_repeats < 1:
        raise ValueError(f"n_repeats must be at least 1, got {n_repeats}")
    if needs_realisations(bounds_method) and n_repeats < 2:
        raise ValueError(f"bounds method {bounds_method!r} measures the spread of the realisations: "
                         f"it needs at least 2 repeats, got {n_repeats}")
    if sampling not in SAMPLERS:  # the reservoirs are made at the first row: their settings are checked now
        raise ValueError(f"unknown sampling {sampling!r}; choose one of {', '.join(SAMPLERS)}")
    if int(reservoir_size) < 1:
        raise ValueError(f"reservoir_size must be at least 1, got {reservoir_size}")
    if removal not in REMOVALS:
        raise ValueError(f"unknown removal {removal!r}; choose one of {', '.join(REMOVALS)}")
    if bounds_method == "realisations" and smoothing != "exponential":
        raise ValueError("bounds_method='realisations' follows the exponential smoothing; with "
                         f"smoothing={smoothing!r} choose 'chebyshev' or 'normal'")
    if needs_realisations(bounds_method):
        check_bounds_alpha(float(alpha))


def params(e: EstimatorParts) -> dict[str, Any]:
    """The settings a resumed run must share, as plain data; smoothing and removal only where they are
    not the paper's (so that older state files still match)."""
    out = {"method": "pfi", "columns": list(e.columns), "names": list(e.names),
           "groups": {name: list(cols) for name, cols in e.groups.items()}, "loss": e.loss.name,
           "alpha": e.alpha, "n_repeats": e.n_repeats, "sampling": e.sampling,
           "reservoir_size": e.reservoir_size, "seed": e.seed}
    if e.smoothing != "exponential":
        out["smoothing"] = e.smoothing
    if e._remover is not None:
        out["removal"] = e.removal
        out["conditional_sampler"] = e._remover.name
    return out


def settings_dict(explainer: EstimatorParts) -> dict[str, Any]:
    """What an explainer's state depends on: explainers with equal settings can exchange states."""
    settings = {"columns": list(explainer.columns), "groups": {name: [int(c) for c in cols]
                                                               for name, cols in explainer.groups.items()},
                "loss": explainer.loss.name, "alpha": explainer.alpha, "n_repeats": explainer.n_repeats,
                "sampling": explainer.sampling, "reservoir_size": explainer.reservoir_size, "seed": explainer.seed}
    # only where not the paper's, so that the states of the paper's iPFI stay as they were
    if explainer.smoothing != "exponential":
        settings["smoothing"] = explainer.smoothing
    if explainer._remover is not None:
        settings["removal"] = explainer.removal
        settings["conditional_sampler"] = explainer._remover.name
    if explainer.bounds_method != "chebyshev":
        settings["bounds_method"] = explainer.bounds_method
    return settings


def state_dict(explainer: EstimatorParts) -> dict[str, Any]:
    """The explainer's state as plain data (see :meth:`IPFIEstimator.state_dict`)."""
    e = explainer
    state = {"explainer": e._state_kind, "settings": e.settings_dict(), "rng": e._rng.bit_generator.state,
             "tracker": e._tracker.state_dict(), "sampler": None if e._sampler is None else e._sampler.state_dict(),
             "n_seen": e.n_seen, "last_contributions": e.last_contributions.copy(),
             "last_loss": e.last_loss, "loss_sum": e._loss_sum,
             "model_calls": e.n_model_calls, "predictions": e.n_predictions}
    if e._remover is not None:
        state["remover"] = e._remover.state_dict()
    if e._spread is not None:
        state["spread"] = e._spread.state_dict()
    return state


def check_settings(explainer: EstimatorParts, state: Mapping[str, Any]) -> None:
    """A :class:`ValueError` unless ``state`` is of the explainer's kind and settings (naming the first
    that differs)."""
    if state.get("explainer") != explainer._state_kind:
        raise ValueError(f"the state belongs to another kind of explainer (explainer: state "
                         f"{state.get('explainer')!r}, here {explainer._state_kind!r})")
    mine = explainer.settings_dict()
    theirs = state.get("settings", {})
    with within("settings"):
        fields(theirs)
    differing = [key for key in [*mine, *(k for k in theirs if k not in mine)] if theirs.get(key) != mine.get(key)]
    if differing:
        key = differing[0]
        default = OMITTED_SETTINGS.get(key)  # settings_dict leaves out these defaults
        raise ValueError(f"the state belongs to an explainer with other settings ({key}: state "
                         f"{theirs.get(key, default)!r}, here {mine.get(key, default)!r})")


def load_state_dict(explainer: EstimatorParts, state: Mapping[str, Any]) -> None:
    """Continue from :func:`state_dict`'s data (see :meth:`IPFIEstimator.load_state_dict`)."""
    e = explainer
    state = fields(state)
    check_settings(e, state)
    generator_state(e._rng, state, "rng")
    tracker = state["tracker"]
    with within("tracker"):
        e._tracker.load_state_dict(tracker)
    sampler = state["sampler"]
    if sampler is None:
        e._sampler = None
    else:
        with within("sampler"):
            rows = np.asarray(fields(sampler)["rows"])
            e._sampler = make_sampler(e.sampling, e.reservoir_size, e.n_repeats, len(e.columns),
                                      rows.dtype if rows.dtype.kind in "fiubO" else np.dtype(object))
            e._sampler.load_state_dict(sampler)
    e.n_seen = integer(state, "n_seen")
    # NaN before the first row explained
    e.last_contributions = array(state, "last_contributions", e.last_contributions.shape,
                                 finite=False).astype(np.float64)
    e.last_loss = number(state, "last_loss", low=0.0, nan=True)
    e._loss_sum = number(state, "loss_sum", low=0.0)
    # the model's calls so far (a state saved before they were kept starts them at 0 again)
    e.n_model_calls = integer(state, "model_calls") if "model_calls" in state else 0
    e.n_predictions = integer(state, "predictions") if "predictions" in state else 0
    if e._remover is not None:
        remover = state["remover"]
        with within("remover"):
            e._remover.load_state_dict(remover)
    if e._spread is not None:
        spread = state["spread"]
        with within("spread"):
            e._spread.load_state_dict(spread)
