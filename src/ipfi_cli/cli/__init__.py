"""The ``ipfi`` command line: a Typer app (``app.py``), one module per command, shared helpers
(``common.py``) and the Rich display (``live.py``)."""
