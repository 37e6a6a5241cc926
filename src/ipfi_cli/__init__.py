"""ipfi: incremental permutation feature importance for models on data streams.

From Python (see :mod:`ipfi_cli.api`)::

    from ipfi_cli import IncrementalPFI, IntervalPFI, batch_pfi, load_model, ChangeDetector, explain_stream

The package is layered so that each layer only imports the ones below it:

* ``ipfi_cli.errors`` - the one hierarchy of errors every layer raises (one line each)
* ``ipfi_cli.core``   - the pure estimators (iPFI behind the ``Explainer`` protocol and its registry of
  methods, batch and interval PFI), samplers, losses
* ``ipfi_cli.models`` - adapters that give scikit-learn, river and plain callables one interface,
  and loading model files
* ``ipfi_cli.io``     - the one streaming reader (values, sources, rows) and the writers beside it
* ``ipfi_cli.run``    - a command's session: set-up, row checks, explain-then-write, checkpoints,
  reporting to a list of observers, the ``Reporter`` first (no Typer, no Rich)
* ``ipfi_cli.evaluation`` - iPFI against batch and interval PFI (``ipfi compare``, the experiments)
* ``ipfi_cli.api``    - the Python face: raw models in, dicts and Bunches out
* ``ipfi_cli.cli``    - the Typer application ``ipfi``: options, exit codes, and the terminal UI (``cli.ui``)

Importing this package is cheap: nothing heavy is imported until it is used.
"""

from __future__ import annotations

from ipfi_cli.version import __version__

TYPE_CHECKING = False  # typing is not imported: `python -m ipfi_cli` installs its signal handlers sooner
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ChangeDetector", "IncrementalPDP", "IncrementalPFI", "IncrementalSAGE", "IntervalPFI", "batch_pfi",
           "batch_sage", "explain_stream", "load_model", "__version__"]


def __getattr__(name: str) -> Any:
    """The public API, imported on first use (``import ipfi_cli`` stays cheap for the CLI)."""
    if name in ("IncrementalPFI", "IntervalPFI", "batch_pfi", "IncrementalSAGE", "batch_sage", "IncrementalPDP",
                "load_model", "explain_stream"):
        from ipfi_cli import api

        return getattr(api, name)
    if name == "ChangeDetector":
        from ipfi_cli.core.changes import ChangeDetector

        return ChangeDetector
    raise AttributeError(f"module 'ipfi_cli' has no attribute {name!r}")
