"""Work spread over a Dask cluster: ``--workers N`` (a local cluster ipfi starts) or ``--scheduler ADDRESS``.

``ipfi batch`` runs its permutations (one task per feature or group, each with its own random
stream, :func:`~ipfi_cli.core.batch.batch_pfi`) on the cluster's workers, :func:`dask_runner`:
the numbers do not depend on where a task runs, so the same seed gives the same bytes as one
process. The tasks are pure functions of their inputs, so Dask runs a lost worker's tasks again
on another (tested by killing a worker mid-run); a scheduler that cannot be reached is one line.

The local cluster binds to 127.0.0.1 (its HTTP server on a free port: never 8787, which another
cluster may hold), one process per worker with one thread each.
Workers of a remote cluster need ipfi (and the model's libraries) installed: they unpickle the
model and run ipfi's functions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ipfi_cli.errors import RunError, UsageError

_INSTALL_HINT = "needs Dask: pip install 'ipfi-cli[dask]'"
#: seconds to wait for a scheduler to answer
CONNECT_TIMEOUT = 10


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None) -> Iterator[Any]:
    """A ``dask.distributed.Client`` for the options, closed (and a local cluster stopped) at the end;
    ``None`` when neither is given (one process)."""
    if workers is None and scheduler is None:
        yield None
        return
    if workers is not None and scheduler is not None:
        raise UsageError("give --workers (a local cluster) or --scheduler (a running one), not both", "--workers")
    if workers is not None and workers < 1:
        raise UsageError(f"must be at least 1, got {workers}", "--workers")
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise UsageError(_INSTALL_HINT, "--scheduler" if scheduler else "--workers") from None
    import logging

    if scheduler is not None:
        _check_address(scheduler)
    logging.getLogger("distributed").setLevel(logging.ERROR)  # its INFO lines would fill stderr
    cluster = None
    try:
        if scheduler is not None:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
            client = Client(cluster, set_as_default=False)
    except (OSError, TimeoutError) as error:
        where = scheduler or "a local cluster"
        raise RunError(f"cannot reach the Dask scheduler at {where} ({type(error).__name__}: "
                       f"{str(error).splitlines()[0] if str(error) else 'no answer'})") from None
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _check_address(address: str) -> None:
    """Refuse, before connecting, an address Dask cannot parse (it would raise, then hang on exit)."""
    from distributed.comm import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address, strict=False)
        if scheme in ("tcp", "tls"):
            parse_host_port(location)
    except ValueError as error:
        raise UsageError(f"not a scheduler address ({error}): give tcp://HOST:PORT", "--scheduler") from None


def dask_runner(client: Any) -> Any:
    """A :data:`~ipfi_cli.core.batch.TaskRunner` on ``client``'s workers.

    The shared inputs (model, rows, labels) are sent once to every worker; each task carries
    only its columns and random stream. A worker lost mid-run (killed, out of memory) has its
    tasks run again by Dask on the others, so the result is the same; a task that kills
    workers again and again ends the run in one line.
    """

    def run(function: Any, shared: Any, tasks: Any) -> list[Any]:
        everywhere = client.scatter(list(shared), broadcast=True, hash=False)
        try:
            return gather_tasks(client, function, [(*task, *everywhere) for task in tasks])
        finally:
            client.cancel(everywhere)

    return run


def gather_tasks(client: Any, function: Any, tasks: Any) -> list[Any]:
    """``[function(*task) for task in tasks]`` on ``client``'s workers, in order; a lost worker's tasks
    run again on the others, a task that keeps killing workers is one line."""
    from distributed import KilledWorker

    futures = [client.submit(function, *task, pure=False) for task in tasks]
    try:
        return list(client.gather(futures))
    except KilledWorker as error:
        raise RunError(f"Dask workers died running one task, {error.args[0]!r}, again and again: is the "
                       "model too big for a worker's memory? (their logs say why)") from None
    except (OSError, TimeoutError) as error:
        raise RunError(f"the Dask cluster failed ({type(error).__name__}: {error})") from None
    finally:
        client.cancel(futures)
