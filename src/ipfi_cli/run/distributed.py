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

A model whose last digits depend on Python's string hashing (:mod:`ipfi_cli.models.hashing`, river's
sets of feature names) gives one process's bytes only on workers that hash strings as this process
does: ipfi pins ``PYTHONHASHSEED=6640``, the seed Dask's nanny gives its workers, and the local cluster
is told this process's seed. Before the first row, :func:`check_hashing` asks every worker for the hash
of a fixed string and refuses, in one line, a worker that hashes otherwise (a ``dask worker --no-nanny``
started without the seed, ipfi run under another one); a worker that joins later is checked by each
task it runs (:func:`_hashing_as`), which stops the run with the same line. A process under a random
seed (ipfi's functions called from Python) has no bytes to match and checks nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from ipfi_cli.errors import RunError, UsageError
from ipfi_cli.models.hashing import PINNED_SEED, PROBE
from ipfi_cli.run.signals import BatchGuard, defer_signals

_INSTALL_HINT = "needs Dask: pip install 'ipfi-cli[dask]'"
#: seconds to wait for a scheduler to answer
CONNECT_TIMEOUT = 10
#: seconds to close the client, and to stop a local cluster
CLOSE_TIMEOUT = 20
#: seconds a running cluster may have no worker (at the start or mid-run) before the run stops
WORKER_WAIT = 30
#: seconds between looks at the tasks while they run (Ctrl-C is heard between two looks)
POLL = 0.1


def check_dask_options(workers: int | None, scheduler: str | None) -> None:
    """Refuse, before any work, ``--workers`` with ``--scheduler``, a count below 1, Dask missing, or a
    scheduler address Dask cannot connect to (see :func:`_check_address`)."""
    if workers is None and scheduler is None:
        return
    if workers is not None and scheduler is not None:
        raise UsageError("give --workers (a local cluster) or --scheduler (a running one), not both", "--workers")
    if workers is not None and workers < 1:
        raise UsageError(f"must be at least 1, got {workers}", "--workers")
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UsageError(_INSTALL_HINT, "--scheduler" if scheduler else "--workers") from None
    if scheduler is not None:
        _check_address(scheduler)


@contextlib.contextmanager
def dask_client(workers: int | None = None, scheduler: str | None = None, *,
                hashing: bool = False) -> Iterator[Any]:
    """A ``dask.distributed.Client`` for the options, closed (and a local cluster stopped) at the end,
    Ctrl-C included; ``None`` when neither is given (one process). A running cluster's scheduler must
    have a worker within :data:`WORKER_WAIT` seconds. With ``hashing``
    (:func:`~ipfi_cli.models.hashing.workers_must_hash_alike`), every worker must hash strings as this
    process does (:func:`check_hashing`)."""
    if workers is None and scheduler is None:
        yield None
        return
    check_dask_options(workers, scheduler)
    import logging

    import dask
    from dask.distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.ERROR)  # its INFO lines would fill stderr
    own_seed = os.environ.get("PYTHONHASHSEED")
    cluster = client = None
    try:
        try:
            with _starting():
                if scheduler is not None:
                    client = Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
                else:
                    with dask.config.set(_nanny_hash_seed(own_seed)):
                        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                               host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                               silence_logs=logging.ERROR)
                    client = Client(cluster, set_as_default=False)
        except Exception as error:  # noqa: BLE001 - Dask's own failures to connect are one line
            why = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no answer'}"
            raise RunError(f"cannot reach the Dask scheduler at {scheduler} ({why})" if scheduler is not None
                           else f"cannot start a local Dask cluster ({why})") from None
        finally:
            _restore_hash_seed(own_seed)  # the local cluster's nanny sets its workers' seed in this process too
        if scheduler is not None:
            _wait_for_a_worker(client)
        if hashing:
            check_hashing(client)
        yield client
    finally:
        _shut(client, cluster)
        _restore_hash_seed(own_seed)


def _nanny_hash_seed(seed: str | None) -> dict[str, Any]:
    """Dask's setting that starts the local cluster's workers under ``seed``, this process's hash seed.

    A nanny reads the variables named in ``distributed.nanny.pre-spawn-environ`` from its own environment
    (this process's) and sets them before it starts a worker; one that names no PYTHONHASHSEED, or 0, starts
    its workers under 6640 (:data:`~ipfi_cli.models.hashing.PINNED_SEED`, so a pinned run needs nothing;
    under 0 the workers cannot hash as this process does, which :func:`check_hashing` says)."""
    if seed is None or seed == "random":
        return {}
    return {"distributed.nanny.pre-spawn-environ.PYTHONHASHSEED": seed}


def _restore_hash_seed(seed: str | None) -> None:
    """Put this process's ``PYTHONHASHSEED`` back as it started (its own hashing does not change; a process
    it starts or a state it records reads the variable)."""
    if seed is None:
        os.environ.pop("PYTHONHASHSEED", None)
    else:
        os.environ["PYTHONHASHSEED"] = seed


class HashingDiffers(Exception):  # noqa: N818 - raised on a worker, told to the user as a UsageError
    """A worker hashes strings otherwise than the process that sent its task: ``(worker address, its
    PYTHONHASHSEED)``."""


def _hashing_as(expected: int, function: Any, *args: Any) -> Any:
    """``function(*args)`` on a worker, once it is known to hash strings as the client does (a worker that
    joined after :func:`check_hashing`)."""
    if hash(PROBE) != expected:
        from distributed import get_worker

        raise HashingDiffers(get_worker().address, os.environ.get("PYTHONHASHSEED", "random"))
    return function(*args)


def check_hashing(client: Any) -> None:
    """Refuse, in one line, a worker that hashes strings otherwise than this process (its sets of strings
    iterate in another order: a model's last digits would differ from one process's)."""
    expected = hash(PROBE)
    try:
        found: dict[str, int] = client.run(hash, PROBE)
    except Exception:  # noqa: BLE001, S110 - a worker gone meanwhile: each task checks its worker too
        return
    for address in sorted(found):
        if found[address] != expected:
            try:
                seed = client.run(os.getenv, "PYTHONHASHSEED", workers=[address]).get(address) or "random"
            except Exception:  # noqa: BLE001 - gone meanwhile: the line does without its seed
                seed = "?"
            raise hashing_differs(client, address, seed)


def hashing_differs(client: Any, worker: str, seed: str) -> UsageError:
    """The line that refuses ``worker``, whose ``PYTHONHASHSEED`` is ``seed``, and says how to start workers
    that hash strings as this process."""
    own = os.environ.get("PYTHONHASHSEED", "random")
    option = "--workers" if client.cluster is not None else "--scheduler"
    what = (f"the Dask worker {worker} hashes strings under PYTHONHASHSEED={seed}, this process under {own}, "
            "and the model's last digits depend on it")
    if own == "0" or client.cluster is not None:  # Dask's nanny starts its workers under 6640 when given 0
        fix = (f"run ipfi under PYTHONHASHSEED={PINNED_SEED} (its own when none is set), the seed Dask's nanny "
               "starts its workers under")
    elif own == PINNED_SEED:
        fix = f"start the workers with `PYTHONHASHSEED={own} dask worker {client.scheduler.address}`"
    else:  # a nanny would start its workers under 6640 whatever its environment says
        fix = (f"start the workers with `PYTHONHASHSEED={own} dask worker --no-nanny {client.scheduler.address}`, "
               f"or run ipfi under PYTHONHASHSEED={PINNED_SEED}")
    return UsageError(f"{what}: {fix}", option)


@contextlib.contextmanager
def _starting() -> Iterator[None]:
    """Ctrl-C or SIGTERM while Dask starts the local cluster or connects waits until it has (a cluster
    stopped half-started fails at exit with a traceback), then stops the run; a second one stops at once."""
    guard = BatchGuard(force_on_second=True)
    guard.busy = True
    signals = defer_signals(guard)
    try:
        yield
    except Exception:
        if guard.stop_requested:  # the signal reached Dask's processes too (Ctrl-C, a service's stop)
            raise KeyboardInterrupt from None
        raise
    finally:
        if signals is not None:
            signals.restore()
    guard.batch_done()  # a stop asked for while starting happens now


def _shut(client: Any, cluster: Any) -> None:
    """Close the client and stop the local cluster (its worker processes), whatever ended the run, in
    at most :data:`CLOSE_TIMEOUT` seconds each. Ctrl-C or SIGTERM meanwhile (a second one, often) waits
    for the end (a cluster stopped half-closed fails at exit with a traceback), then stops the run;
    a failure to close is not the run's outcome."""
    guard = BatchGuard()
    guard.busy = True
    signals = defer_signals(guard)
    try:
        for thing in (client, cluster):
            if thing is None:
                continue
            try:
                thing.close(timeout=CLOSE_TIMEOUT)
            except Exception:  # noqa: BLE001, S110 - the run's own outcome is what the user hears
                pass
    finally:
        if signals is not None:
            signals.restore()
    guard.batch_done()


def _where(client: Any) -> str:
    """The cluster, as the user named it: the scheduler's address, or the local cluster."""
    return "the local Dask cluster" if client.cluster is not None else \
        f"the scheduler at {client.scheduler.address}"


def _no_workers(client: Any) -> RunError:
    start = "" if client.cluster is not None else f": start one with `dask worker {client.scheduler.address}`"
    return RunError(f"{_where(client)} has no workers (waited {WORKER_WAIT:g} s){start}")


def _workers(client: Any) -> int:
    """How many workers the scheduler has now."""
    return len(client.nthreads())


def _wait_for_a_worker(client: Any) -> None:
    """Return once the scheduler has a worker; :func:`_no_workers` after :data:`WORKER_WAIT` seconds."""
    deadline = time.monotonic() + WORKER_WAIT
    while not _workers(client):
        if time.monotonic() > deadline:
            raise _no_workers(client)
        time.sleep(0.5)


def _check_address(address: str) -> None:
    """Refuse, before connecting, an address Dask cannot connect to from here (Dask would raise, then
    hang on exit): an unknown scheme (the dashboard's http://), no host, a port out of range, a
    scheme this installation cannot use (tls:// without Dask's TLS settings, ucx:// without UCX)."""
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address, parse_host_port

    def refuse(why: str) -> UsageError:
        return UsageError(f"not a scheduler address ({why}): give tcp://HOST:PORT as `dask scheduler` prints it "
                          "(usually port 8786; 8787 is its dashboard)", "--scheduler")

    try:
        scheme, location = parse_address(address, strict=False)
    except ValueError as error:
        raise refuse(str(error)) from None
    usable = [name for name in sorted(registry.backends) if name != "inproc" and _connects(name)]
    if scheme not in usable:  # inproc: a cluster inside another process; ucx: without UCX installed
        why = "not usable from here" if scheme in registry.backends else "unknown scheme"
        raise refuse(f"{scheme}://: {why}; Dask connects over {', '.join(f'{u}://' for u in usable)}")
    if scheme not in ("tcp", "tls", "ws", "wss"):
        return
    try:
        host, port = parse_host_port(location)
    except ValueError as error:
        raise refuse(str(error)) from None
    if not host:
        raise refuse("no host")
    if not 1 <= int(port) <= 65535:
        raise refuse(f"port {port} is not between 1 and 65535")
    if scheme in ("tls", "wss"):
        from distributed.security import Security

        if Security().get_connection_args("client")["ssl_context"] is None:
            raise refuse(f"{scheme}:// needs Dask's TLS settings (distributed.comm.tls.ca-file and the client's "
                         "certificate in the Dask configuration)")


def _connects(scheme: str) -> bool:
    """Whether Dask here can connect over ``scheme`` (ucx:// needs UCX, which may not be installed)."""
    from distributed.comm import registry

    try:
        registry.get_backend(scheme).get_connector()
    except Exception:  # noqa: BLE001 - a backend this installation lacks
        return False
    return True


def dask_runner(client: Any, *, hashing: bool = False) -> Any:
    """A :data:`~ipfi_cli.core.batch.TaskRunner` on ``client``'s workers.

    The shared inputs (model, rows, labels) are sent once to every worker; each task carries
    only its columns and random stream. A worker lost mid-run (killed, out of memory) has its
    tasks run again by Dask on the others, so the result is the same; a task that kills
    workers again and again ends the run in one line. With ``hashing``, see :func:`gather_tasks`.
    """

    def run(function: Any, shared: Any, tasks: Any) -> list[Any]:
        for attempt in range(1, ROUND_ATTEMPTS + 1):
            try:
                everywhere = client.scatter(list(shared), broadcast=True, hash=False)
            except TimeoutError:  # "No valid workers found": every worker left since the start
                raise _no_workers(client) from None
            try:
                return gather_tasks(client, function, [(*task, *everywhere) for task in tasks], hashing=hashing)
            except TaskDropped:
                # a worker lost with data Dask cannot recompute (the shared inputs, mid-scatter): the tasks
                # carry their own random streams, so the round sent again gives the same results
                if attempt == ROUND_ATTEMPTS:
                    raise
            finally:
                client.cancel(everywhere)
        raise AssertionError("unreachable")

    return run


#: times a round of tasks is sent when the cluster drops some (a worker lost with data it held alone)
ROUND_ATTEMPTS = 3


class TaskDropped(RunError):
    """The cluster cancelled or lost a task (its inputs were lost with a worker)."""


def gather_tasks(client: Any, function: Any, tasks: Any, *, hashing: bool = False) -> list[Any]:
    """``[function(*task) for task in tasks]`` on ``client``'s workers, in order; a lost worker's tasks
    run again on the others, a task that keeps killing workers is one line, and so is a cluster left
    without workers for :data:`WORKER_WAIT` seconds. With ``hashing`` (the model's numbers depend on string
    hashing) a task on a worker that hashes strings otherwise than this process stops the run in one line.

    The tasks are watched from this thread (not through a blocking gather), so Ctrl-C stops the wait
    at once and leaves no Dask task behind to print its traceback when the client closes."""
    from distributed import KilledWorker

    if hashing:
        expected = hash(PROBE)
        futures = [client.submit(_hashing_as, expected, function, *task, pure=False) for task in tasks]
    else:
        futures = [client.submit(function, *task, pure=False) for task in tasks]
    try:
        _wait(client, futures)
        return list(client.gather(futures))
    except HashingDiffers as error:
        raise hashing_differs(client, *error.args) from None
    except KilledWorker as error:
        raise RunError(f"Dask workers died running one task, {error.args[0]!r}, again and again: is the "
                       "model too big for a worker's memory? (their logs say why)") from None
    except (OSError, TimeoutError) as error:
        raise RunError(f"the Dask cluster failed ({type(error).__name__}: {error})") from None
    finally:
        with contextlib.suppress(Exception):
            client.cancel(futures)


def _wait(client: Any, futures: list[Any]) -> None:
    """Return once every future is done or one failed (raising its error); :func:`_no_workers` when the
    cluster has had no worker for :data:`WORKER_WAIT` seconds."""
    alone_since: float | None = None
    looked = time.monotonic()
    while True:
        pending = False
        for future in futures:
            if future.status == "error":
                future.result()  # raises the task's error
            if future.status in ("cancelled", "lost"):
                raise TaskDropped(f"the Dask cluster failed ({_where(client)} dropped a task: {future.status})")
            pending = pending or future.status != "finished"
        if not pending:
            return
        if client.status in ("closing", "closed"):
            raise RunError(f"the Dask cluster failed ({_where(client)} no longer answers)")
        now = time.monotonic()
        if now - looked >= 1:
            looked = now
            if _workers(client):
                alone_since = None
            elif alone_since is None:
                alone_since = now
            elif now - alone_since > WORKER_WAIT:
                raise _no_workers(client)
        time.sleep(POLL)
