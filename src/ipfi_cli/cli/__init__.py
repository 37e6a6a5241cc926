"""The ``ipfi`` command line: the Typer app (``app.py``) with one module per command (``explain.py``,
``batch.py``, ``compare.py``, ``pdp.py``, ``plot.py``, ``merge.py``), one module per help panel with its
options and the builder of its value (``*_options.py``; ``signature.py`` makes a command's signature
of them), ``--config`` files (``config.py``), exit codes and one-line errors (``errors.py``), and the
terminal UI: the live table and the summary tables (``ui.py``). Only this package imports Typer and
Rich, and none of its modules imports a heavy library at its head (ruff TID253)."""
