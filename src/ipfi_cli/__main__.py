"""``python -m ipfi_cli``: the same as the ``ipfi`` command."""

from ipfi_cli.cli.app import main

if __name__ == "__main__":
    main()
