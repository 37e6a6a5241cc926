"""The "One explainer per key" panel of ``ipfi explain``: ``--by`` and the options that spread or bound
its keys (checked by :func:`~ipfi_cli.cli.explain_checks.key_columns_of`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ipfi_cli.cli.explain_checks import key_columns_of
from ipfi_cli.cli.signature import option
from ipfi_cli.run.settings import KeySpec

PANEL_KEYS = "One explainer per key"

ByOpt = Annotated[Optional[str], typer.Option(
        "--by", help="One explainer (and change detector) per value of these key columns (COL or COL,COL): each "
        "key's traces are those of a run on its rows alone with the key columns dropped and the same --seed. "
        "Records start with the key "
        "columns, then row: the row's place among its key's rows; --every counts each key's rows. Key columns are "
        "not features. A row with no value in one is a bad row (see --on-bad-row). The summary is per key (every "
        "key in --meta). Not with --learn, --labels or the metrics/webhook options.",
        rich_help_panel=PANEL_KEYS, show_default=False, metavar="COL[,COL]")]
MaxKeysOpt = Annotated[Optional[int], typer.Option(
        "--max-keys", min=1, help="With --by: keep at most N keys' explainers live. The least recently seen are "
        "saved as plain data (their state's bytes, in files of a temporary folder: about 75 kB a key for 9 features, "
        "--repeats 10, "
        "a reservoir of 100; more with --detect) and rebuilt when the key comes back (about 3 ms for an eviction "
        "and a return): the same bytes out, the memory of N explainers, more time when keys alternate often.",
        rich_help_panel=PANEL_KEYS, show_default=False, metavar="N")]
KeyWorkersOpt = Annotated[Optional[int], typer.Option(
        "--workers", min=1, help="With --by: spread the keys over a local Dask cluster of N worker processes "
        "(127.0.0.1), one shard of keys each; the same bytes as one process. The input must be a file, folder or "
        "glob (each worker reads it). Not with --state or --stop-on-change yet. Needs ipfi-cli[dask].",
        rich_help_panel=PANEL_KEYS, show_default=False, metavar="N")]
KeySchedulerOpt = Annotated[Optional[str], typer.Option(
        "--scheduler", help="With --by: spread the keys over a running Dask cluster (tcp://HOST:PORT), one shard "
        "per worker; the workers need ipfi and the model's libraries and read the input and model files "
        "themselves.", rich_help_panel=PANEL_KEYS, show_default=False, metavar="ADDRESS")]


KEY_OPTIONS = [option("by", ByOpt, None), option("max_keys", MaxKeysOpt, None), option("workers", KeyWorkersOpt, None),
               option("scheduler", KeySchedulerOpt, None)]


def key_spec(by: str | None, max_keys: int | None, workers: int | None, scheduler: str | None) \
        -> tuple[tuple[str, ...], KeySpec]:
    """The panel as values: the key columns (checked; empty without ``--by``) and how their keys run."""
    return tuple(key_columns_of(by, max_keys) or ()), KeySpec(max_keys=max_keys, workers=workers, scheduler=scheduler)
