"""What ``ipfi batch`` is asked to do (:class:`BatchSettings`, one value per help panel) and the run
itself (:func:`run_batch`): the whole file read, batch PFI or batch SAGE, the records written.

The command line builds the settings from its panels (:mod:`ipfi_cli.cli.batch`) and shows the
table of the :class:`BatchOutcome`; this module has no terminal in it.

>>> settings = BatchSettings(ModelSpec("model.joblib"), InputSpec("data.csv"), Selection(target="class"),
...                          method=BatchMethod(repeats=5), seed=0)
>>> settings.method.name, settings.method.repeats, settings.rows.max_rows
('pfi', 5, 1000000)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ipfi_cli.core import batch_pfi
from ipfi_cli.core.batch import as_block
from ipfi_cli.core.params import DEFAULT_REPEATS
from ipfi_cli.core.sage import batch_sage
from ipfi_cli.core.sage_game import default_inner
from ipfi_cli.errors import UsageError
from ipfi_cli.io.writers import write_records
from ipfi_cli.models.hashing import depends_on_hashing, workers_must_hash_alike
from ipfi_cli.models.loading import load_predictor
from ipfi_cli.run.checks import all_zero_warning
from ipfi_cli.run.dataset import load_dataset
from ipfi_cli.run.distributed import check_dask_options, dask_client, dask_runner
from ipfi_cli.run.metrics import batch_families, served_families
from ipfi_cli.run.monitor import MonitorSettings, publish
from ipfi_cli.run.plan import InputSpec, Selection
from ipfi_cli.run.report import Reporter
from ipfi_cli.run.settings import Display, ModelSpec
from ipfi_cli.run.setup import served_model
from ipfi_cli.run.signals import hold_until_exit

#: the most rows ``batch`` keeps of its input (--max-rows): a uniform sample of them all beyond it
DEFAULT_MAX_ROWS = 1_000_000

BATCH_FIELDS = ["feature", "importance", "std", "n_repeats", "n_rows", "loss", "baseline_loss"]
SAGE_FIELDS = ["feature", "importance", "std_error", "n_permutations", "n_rows", "loss", "explained_loss"]


@dataclass(frozen=True)
class BatchMethod:
    """The Estimator panel: batch PFI's repeats, or batch SAGE's permutations and game."""
    name: str = "pfi"  # --method: "pfi" or "sage"
    repeats: int = DEFAULT_REPEATS  # --repeats: permutations of the whole data per feature (pfi)
    permutations: int = 2000  # --permutations (sage)
    background: int = 64  # --background: rows that stand in for absent features (sage)
    inner: int | str | None = None  # --inner: background rows per coalition, "all", or None (explain's default)
    empty_coalition: str = "imputed"  # --empty-coalition (sage)


@dataclass(frozen=True)
class Spread:
    """Where batch PFI's work runs: threads of this process (--n-jobs) or a Dask cluster."""
    n_jobs: int | None = None
    workers: int | None = None  # a local Dask cluster of this many workers
    scheduler: str | None = None  # a running Dask cluster


@dataclass(frozen=True)
class BatchRows:
    """How much of the file is kept, and what a bad row does."""
    max_rows: int = DEFAULT_MAX_ROWS  # --max-rows: a uniform sample (with --seed) of them all beyond it
    on_bad_row: str = "fail"  # or "skip"


@dataclass(frozen=True)
class BatchSettings:
    """Everything ``ipfi batch`` is asked, one value per help panel."""
    model: ModelSpec
    inputs: InputSpec
    selection: Selection
    method: BatchMethod = field(default_factory=BatchMethod)
    spread: Spread = field(default_factory=Spread)
    rows: BatchRows = field(default_factory=BatchRows)
    output: str | None = None  # --output (None or "-": standard output)
    output_format: str | None = None  # --output-format (None: by the file's extension)
    monitor: MonitorSettings | None = None
    display: Display = field(default_factory=Display)
    seed: int | None = None


@dataclass
class BatchOutcome:
    """What a batch run found, for the command's table: ``result`` is a
    :class:`~ipfi_cli.core.batch.BatchPFIResult` (``method == "pfi"``) or a SAGE result."""

    method: str
    result: Any
    loss_name: str
    n_rows: int
    seconds: float
    game: str | None = None  # sage: the game estimated, as the table says it
    requests_note: str | None = None  # a served model: its requests in one line


def run_batch(settings: BatchSettings, reporter: Reporter) -> BatchOutcome:
    """Read the whole input, compute batch PFI (or SAGE) and write its records; messages go to ``reporter``."""
    method = settings.method
    if method.name != "sage":

        check_dask_options(settings.spread.workers, settings.spread.scheduler)  # before the data is read
    elif settings.spread.workers is not None or settings.spread.scheduler is not None:
        raise UsageError("batch SAGE runs in this process; --workers and --scheduler spread batch PFI", "--method")
    started = time.time()
    spec = settings.model
    dataset = load_dataset(load_predictor(spec.path, trust=spec.trust, http=spec.http), settings.inputs,
                           settings.selection, reporter, on_bad_row=settings.rows.on_bad_row,
                           verbose=settings.display.verbose, max_rows=settings.rows.max_rows, seed=settings.seed)
    if settings.display.verbose:
        reporter.message(f"model {dataset.loaded.description}; {len(dataset.frame)} rows; columns "
                         f"{', '.join(dataset.columns)}; loss {dataset.loss.name}; repeats {method.repeats}; "
                         f"seed {settings.seed}")
    if method.name == "sage":
        outcome = _batch_sage(dataset, settings, reporter)
    else:
        outcome = _batch_pfi(dataset, settings, reporter, started)
    outcome.requests_note = _requests_note(dataset)
    return outcome


def _batch_pfi(dataset: Any, settings: BatchSettings, reporter: Reporter, started: float) -> BatchOutcome:

    model, spread = settings.model, settings.spread
    hashing = workers_must_hash_alike(model.path)
    predictor = dataset.loaded.predictor
    # every process, this one too, predicts with a copy of the same bytes (a served model's numbers
    # are the server's: its requests are counted here)
    if model.http is None and depends_on_hashing(model.path):
        from ipfi_cli.models.snapshot import Snapshot

        predictor = Snapshot(predictor)
    with dask_client(spread.workers, spread.scheduler, hashing=hashing) as client:
        start = time.perf_counter()
        result = batch_pfi(predictor, dataset.frame, dataset.targets, dataset.columns,
                           loss=dataset.loss, n_repeats=settings.method.repeats, features=dataset.features,
                           groups=dataset.groups, seed=settings.seed, n_jobs=spread.n_jobs,
                           runner=None if client is None else dask_runner(client, hashing=hashing))
        seconds = time.perf_counter() - start
    records = [{"feature": name, "importance": mean, "std": std, "n_repeats": result.n_repeats,
                "n_rows": result.n_rows, "loss": dataset.loss.name, "baseline_loss": result.baseline_loss}
               for name, mean, std in zip(result.names, result.mean, result.std)]
    write_records(settings.output, settings.output_format, BATCH_FIELDS, records)
    hold_until_exit()  # the result is written: a Ctrl-C now would only cut the table short
    zero = all_zero_warning(result.mean, result.n_rows)
    if zero:
        reporter.message(zero, "warning")
    if settings.monitor is not None:

        families = batch_families(list(result.names), list(map(float, result.mean)), list(map(float, result.std)),
                                  result.n_rows, result.baseline_loss, dataset.loss.name)
        served = served_model(dataset.loaded)
        if served is not None:  # the served model's requests, as explain exports them
            families += served_families(served.stats(), served.latency(), not served.is_down)
        publish(settings.monitor, families, started)
    return BatchOutcome("pfi", result, dataset.loss.name, result.n_rows, seconds)


def _batch_sage(dataset: Any, settings: BatchSettings, reporter: Reporter) -> BatchOutcome:

    method = settings.method
    if dataset.features is not None and set(dataset.features) != set(dataset.columns) - {
            c for members in (dataset.groups or {}).values() for c in members}:
        raise UsageError("SAGE shares the loss among all the model's inputs: drop --features (--group is fine)",
                         "--features")
    n_inner = sage_inner(method.inner, dataset.loss, method.empty_coalition)
    rows = as_block(dataset.frame, dataset.columns)
    picked = np.random.default_rng(np.random.SeedSequence(settings.seed)).choice(
        len(rows), min(method.background, len(rows)), replace=False)
    start = time.perf_counter()
    result = batch_sage(dataset.loaded.predictor, rows, dataset.targets, dataset.columns, loss=dataset.loss,
                        n_permutations=method.permutations, background=rows[np.sort(picked)], groups=dataset.groups,
                        seed=settings.seed, n_inner=n_inner, empty=method.empty_coalition)
    seconds = time.perf_counter() - start
    records = [{"feature": name, "importance": float(v), "std_error": float(se),
                "n_permutations": method.permutations, "n_rows": len(rows), "loss": dataset.loss.name,
                "explained_loss": result.explained_loss}
               for name, v, se in zip(result.names, result.values, result.std_errors)]
    write_records(settings.output, settings.output_format, SAGE_FIELDS, records)
    hold_until_exit()  # the result is written: a Ctrl-C now would only cut the table short
    zero = all_zero_warning(result.values, len(rows))
    if zero:
        reporter.message(zero, "warning")
    return BatchOutcome("sage", result, dataset.loss.name, len(rows), seconds,
                        game=sage_game(n_inner, len(picked), method.empty_coalition))


def _requests_note(dataset: Any) -> str | None:
    """A served model's requests, in one line (``ipfi explain`` records them in ``--meta``)."""
    served = served_model(dataset.loaded)
    if served is None:
        return None
    stats = served.stats()
    return (f"the served model answered {stats['requests']:,} request(s) ({stats['rows_sent']:,} rows, "
            f"{stats['seconds']:.1f} s); {stats['retried']:,} tried again, "
            f"{stats['waited_seconds']:.1f} s waiting for it")


def sage_inner(inner: int | str | None, loss: Any, empty: str) -> int | None:
    """Background rows drawn per coalition: ``--inner`` as parsed, by default explain's (so that both
    commands estimate one game); ``None`` for ``all``."""

    if inner is None:
        return default_inner(loss, empty)
    return None if inner == "all" else int(inner)


def sage_game(n_inner: int | None, n_background: int, empty: str) -> str:
    """The game a batch SAGE estimated, as its table says it.

    >>> sage_game(2, 64, "imputed")
    "2 background rows of 64 drawn per coalition (explain --method sage --inner 2's game)"
    """
    if n_inner is None:
        return f"every one of {n_background:,} background rows averaged per coalition (Covert et al.'s game)"
    drawn = f"{n_inner} background row{'s' if n_inner > 1 else ''} of {n_background:,} drawn per coalition"
    if empty == "imputed":
        return f"{drawn} (explain --method sage --inner {n_inner}'s game)"
    return (f"{drawn}, no feature scored by the mean prediction "
            f"(explain --inner {n_inner} --empty-coalition mean's game)")
