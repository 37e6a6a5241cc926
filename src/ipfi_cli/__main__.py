"""``python -m ipfi_cli``: the same as the ``ipfi`` command.

A model command that needs a fixed string-hash seed re-executes itself before the
application (Typer, Rich) is imported, so the first process costs only Python's start.
"""

import sys

from ipfi_cli.cli.hash_seed import fix_hash_seed


def main() -> None:
    """Console-script entry point (``ipfi``)."""
    fix_hash_seed(sys.argv)
    from ipfi_cli.cli.app import main as run_app

    run_app()


if __name__ == "__main__":
    main()
