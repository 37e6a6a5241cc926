"""The "Checkpoints and resume" panel of ``ipfi explain``: ``--state`` and the options that go with it
(checked by :func:`~ipfi_cli.cli.explain_checks.check_state_options`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ipfi_cli.cli.explain_checks import check_state_options
from ipfi_cli.cli.signature import option
from ipfi_cli.run.settings import CHECKPOINT_EVERY, StateSpec

PANEL_STATE = "Checkpoints and resume"

StateOpt = Annotated[Optional[str], typer.Option(
        "--state", help="Keep the run's whole state in this file (the explainer, the counters, where the traces "
        "end and, with --learn, the model), saved atomically every --checkpoint-every rows and at exit. If the "
        "file exists the run continues from it: run the same command again. The file is plain data (JSON and NumPy "
        "arrays, checksummed): loading it runs no code. With --learn the learned model is saved beside it as a "
        "pickle (STATE.model-*), which the state vouches for by its SHA-256.", rich_help_panel=PANEL_STATE,
        show_default=False, metavar="PATH")]
CheckpointEveryOpt = Annotated[int, typer.Option(
        "--checkpoint-every", min=1, help="With --state: save the state after this many more input rows (at the "
        "end of the micro-batch that reaches them: --batch-size rows at most, also with --learn).",
        rich_help_panel=PANEL_STATE)]
SkipSeenOpt = Annotated[bool, typer.Option(
        "--skip-seen/--no-skip-seen", help="When continuing from --state: the input is the whole stream again and "
        "the rows the state has read are skipped (the last one is checked), or, with --no-skip-seen, the input "
        "holds only the rows after them (row numbers continue).", rich_help_panel=PANEL_STATE)]


STATE_OPTIONS = [option("state", StateOpt, None), option("checkpoint_every", CheckpointEveryOpt, CHECKPOINT_EVERY),
                 option("skip_seen", SkipSeenOpt, True)]


def state_spec(state: str | None, checkpoint_every: int, skip_seen: bool) -> StateSpec | None:
    """The panel as one value (``None``: no ``--state``); its options without ``--state`` are usage errors."""
    check_state_options(state=state, checkpoint_every=checkpoint_every, skip_seen=skip_seen)
    return StateSpec(state, checkpoint_every=checkpoint_every, skip_seen=skip_seen) if state else None
