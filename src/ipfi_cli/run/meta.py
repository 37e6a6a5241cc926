"""The ``--meta`` sidecar of a run: seed, settings, library versions, rows, final importances."""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ipfi_cli.run.explain import ExplainSession


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


def write_meta(session: ExplainSession) -> None:
    """Write the session's ``--meta`` file (JSON, atomically)."""
    from ipfi_cli.io.writers import write_json

    s, explainer, reader, progress = session.settings, session.explainer, session.reader, session.progress
    settings = asdict(s)
    settings["seed"] = session.seed
    settings["http"] = s.http.for_meta() if s.http is not None else None  # never a header's value
    settings["loss"] = session.loss.name if session.loss is not None else s.loss
    settings["task"] = (("classification" if session.classification else "regression")
                        if session.classification is not None else s.task)
    finished = time.time()
    meta: dict[str, Any] = {
        "command": "explain",
        "status": session.status.value,
        "error": session.error,
        "seed": session.seed,
        "settings": settings,
        "model": {"path": s.model, "type": type(session.loaded.model).__name__, "kind": session.loaded.kind}
        if session.loaded is not None else None,
        "input": {"source": reader.name if reader else s.input,
                  "format": reader.known_format if reader and reader.known_format else s.format,
                  "columns": session.input_columns},
        "model_columns": session.columns,
        "names": explainer.names if explainer is not None else None,
        "rows": {"processed": progress.rows, "skipped": session.checker.skipped if session.checker else 0,
                 "explained": explainer.n_explained if explainer is not None else 0,
                 "records_written": session.writer.records if session.writer is not None else 0},
        "final": {"importances": dict(zip(explainer.names, explainer.importance_array().tolist())),
                  "bounds": dict(zip(explainer.names, explainer.bound_array(s.delta).tolist())),
                  "mean_loss": explainer.mean_loss} if explainer is not None else None,
        "versions": library_versions(),
        "started": _iso(session.started),
        "finished": _iso(finished),
        "elapsed_seconds": round(finished - session.started, 3),
    }
    if s.http is not None and session.loaded is not None:
        meta["http"] = session.loaded.predictor.stats()  # requests, rows sent, seconds: never a header
    if session.watch is not None:
        meta["changes"] = [event.to_dict() for event in session.watch.events]
    if session.state is not None:
        state = session.state
        meta["state"] = {"path": s.state, "checkpoints_saved": state.checkpoints,
                         "continued_after_input_row": state.resumed["run"]["input_rows"] if state.resumed else None,
                         "input_rows_handled": progress.input_rows}
    assert s.meta is not None
    write_json(s.meta, meta)
