"""``python -m ipfi_cli``: the same as the ``ipfi`` command.

A model command that needs a fixed string-hash seed re-executes itself before the
application (Typer, Rich) is imported, so the first process costs only Python's start.
"""

import gc
import sys

from ipfi_cli.cli.hash_seed import fix_hash_seed

#: the collector's thresholds for a command: start-up (Typer, pandas, scikit-learn, the model)
#: creates hundreds of thousands of long-lived objects, and with the default (700, 10, 10) the
#: collector traverses them again and again while they are made: a third of a second of a
#: 2-row ``explain`` (measured with ``benchmarks/bench_row_cost.py``). Cycles are still
#: collected, after 10,000 allocations instead of 700.
GC_THRESHOLDS = (10_000, 20, 20)


def main() -> None:
    """Console-script entry point (``ipfi``)."""
    gc.set_threshold(*GC_THRESHOLDS)
    fix_hash_seed(sys.argv)
    from ipfi_cli.cli.app import main as run_app

    run_app()


if __name__ == "__main__":
    main()
