"""``python -m ipfi_cli``: the same as the ``ipfi`` command.

A model command that needs a fixed string-hash seed re-executes itself before the
application (Typer, Rich) is imported, so the first process costs only Python's start.

Ctrl-C and SIGTERM stop ``ipfi`` in one line and exit 130 from the first line of :func:`main`
to the process's end (:mod:`ipfi_cli.run.signals`): never a traceback, never a silent death
by the signal. Before :func:`main` runs there is only Python's own start.
"""

import gc
import sys

from ipfi_cli.run import signals

#: the collector's thresholds for a command: start-up (Typer, pandas, scikit-learn, the model)
#: creates hundreds of thousands of long-lived objects, and with the default (700, 10, 10) the
#: collector traverses them again and again while they are made: a third of a second of a
#: 2-row ``explain`` (measured with ``benchmarks/bench_row_cost.py``). Cycles are still
#: collected, after 10,000 allocations instead of 700.
GC_THRESHOLDS = (10_000, 20, 20)

#: what ``ipfi`` says when Ctrl-C or SIGTERM stops it before a command could say more
INTERRUPTED = "ipfi: interrupted\n"


def main() -> None:
    """Console-script entry point (``ipfi``)."""
    signals.install()
    try:
        signals.unblock_after_exec()  # a signal sent while this process was exec-ed is delivered here
        gc.set_threshold(*GC_THRESHOLDS)
        from ipfi_cli.cli.hash_seed import fix_hash_seed

        fix_hash_seed(sys.argv)
        from ipfi_cli.cli.app import main as run_app

        run_app()
    except KeyboardInterrupt:  # before the command could handle it (importing, parsing)
        signals.hold_until_exit()
        signals.write_stderr(INTERRUPTED)
        raise SystemExit(130) from None
    finally:
        signals.hold_until_exit()
        # CPython ends `python -m` by the signal SIGINT (no exit code, as if killed) when a
        # KeyboardInterrupt ever left code it ran from a string (exec/eval of text: dataclasses,
        # namedtuples, setuptools' import hook), even one that ipfi then handled; a successful
        # exec of text clears that flag, so the exit code is the one ipfi chose
        exec("")  # noqa: S102 - constant text


if __name__ == "__main__":
    main()
