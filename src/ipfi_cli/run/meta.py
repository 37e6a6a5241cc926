"""The ``--meta`` sidecar of a run: seed, settings, library versions, rows, final importances."""

from __future__ import annotations

import datetime as _dt
import time
from typing import TYPE_CHECKING, Any

from ipfi_cli.io.targets import write_json

if TYPE_CHECKING:
    from ipfi_cli.run.plan import RunPlan
    from ipfi_cli.run.resume import StateKeeper
    from ipfi_cli.run.settings import ExplainSettings, RunParts, RunStatus


def library_versions() -> dict[str, str]:
    """Versions of Python and the libraries a run depends on."""
    import platform
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for name in ("ipfi-cli", "numpy", "scikit-learn", "river", "pandas", "joblib"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def _iso(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).isoformat(timespec="seconds")


def _method_figures(explainer: Any) -> dict[str, Any]:
    """SAGE's losses (explained, marginal, model) and its game (``n_inner`` imputations per coalition: that of
    ``batch --method sage --inner K``), and a conditional sampler's R^2 per column, where they exist."""
    figures: dict[str, Any] = {}
    if getattr(explainer, "explained_loss", None) is not None:
        figures.update(explained_loss=explainer.explained_loss, marginal_loss=explainer.marginal_loss,
                       model_loss=explainer.model_loss)
        if getattr(explainer, "n_inner", None) is not None:
            figures["n_inner"] = int(explainer.n_inner)
    fit = getattr(explainer, "removal_fit", None)
    if fit:
        figures["removal_fit"] = fit
    return figures


def write_meta(path: str, *, plan: RunPlan, settings: ExplainSettings, parts: RunParts, status: RunStatus,
               error: str | None, seed: int, started: float, state: StateKeeper | None,
               pushed: bool | None = None, counts: dict[str, Any] | None = None) -> None:
    """Write a run's ``--meta`` file (JSON, atomically) to ``path``; ``pushed``: whether the metrics
    reached ``--pushgateway`` (``None``: no push was asked for); ``counts``: what the run lost or left
    out (``"labels"``, ``"webhook"``, ``"lost"``: see :meth:`~ipfi_cli.run.ending.RunEnding.lost_counts`)."""
    s, explainer, progress = settings, parts.explainer, parts.progress
    names = explainer.names
    meta_settings = s.flat()
    config = s.config
    if config is not None:  # the seed the run used, so that --config META runs it again
        config = {table: {key: seed if key == "seed" else v for key, v in keys.items()}
                  for table, keys in config.items()}
    meta_settings["seed"] = seed
    monitor = meta_settings.get("monitor")
    if isinstance(monitor, dict):  # a webhook's token is often its path (Slack's, Discord's); a URL's password
        from ipfi_cli.io.webhook import shown_url

        for key in ("webhook", "pushgateway"):
            if monitor.get(key):
                monitor[key] = shown_url(monitor[key])
    meta_settings["loss"] = plan.loss.name
    meta_settings["task"] = "classification" if plan.classification else "regression"
    finished = time.time()
    meta: dict[str, Any] = {
        "command": "explain",
        "status": status.value,
        "error": error,
        "seed": seed,
        "settings": meta_settings,
        "config": config,
        "model": {"path": s.model.path, "type": type(plan.loaded.model).__name__, "kind": plan.loaded.kind},
        "input": {"source": plan.source, "format": plan.input_format, "columns": plan.input_columns},
        "model_columns": plan.columns,
        "names": names,
        "rows": {"processed": progress.rows, "skipped": parts.checker.skipped,
                 "explained": explainer.n_explained,
                 "records_written": parts.writer.records if parts.writer is not None else 0},
        "final": {"importances": dict(zip(names, explainer.importance_array().tolist())),
                  "bounds": dict(zip(names, explainer.bound_array(s.output.delta).tolist())),
                  "mean_loss": explainer.mean_loss, **_method_figures(explainer)},
        "versions": library_versions(),
        "started": _iso(started),
        "finished": _iso(finished),
        "elapsed_seconds": round(finished - started, 3),
    }
    if pushed is not None:
        meta["pushed"] = pushed
    meta.update(counts or {})
    if s.model.http is not None:
        meta["http"] = plan.predictor.stats()  # requests, rows sent, seconds: never a header
    if parts.watch is not None:
        meta["changes"] = [event.to_dict() for event in parts.watch.events]
    summaries = getattr(explainer, "summaries", None)
    if summaries is not None:  # explain --by: every key's figures; no one key's are the run's
        meta["keys"] = summaries(plan.by, s.output.delta)
        meta["final"] = None
        meta["rows"]["explained"] = sum(key["explained"] for key in meta["keys"])
    if state is not None:
        meta["state"] = {"path": s.state.path if s.state is not None else None, "checkpoints_saved": state.checkpoints,
                         "continued_after_input_row": state.resumed["run"]["input_rows"] if state.resumed else None,
                         "input_rows_handled": progress.input_rows}
    write_json(path, meta)
