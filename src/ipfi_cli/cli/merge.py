"""``ipfi merge``: combine the --state files of a stream's shards (see :mod:`ipfi_cli.run.merge`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ipfi_cli.cli.errors import reporting, say
from ipfi_cli.cli.options import DebugOpt, QuietOpt, check_outputs
from ipfi_cli.run.signals import hold_until_exit


def merge(
    states: Annotated[list[str], typer.Argument(
        help="The --state files of the shards (two or more).", show_default=False, metavar="STATE...")],
    output: Annotated[str, typer.Option(
        "--output", "-o", help="The merged state file to write (a new file).", show_default=False,
        metavar="STATE")],
    seed: Annotated[Optional[int], typer.Option(
        "--seed", min=0, help="Seed of the merged explainer and of the reservoir merge. Default: the first state's.",
        show_default=False)] = None,
    quiet: QuietOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Merge the --state files of shards of one stream into the state of the whole.

The shards ran ipfi explain with the same settings (the seed may differ) and a smoothing that merges: --time-column with --half-life (forward decay by event time) or --running-mean. The smoothed sums merge exactly; the reservoirs of earlier rows are merged by sampling each shard in proportion to its rows (geometric sampling by event time: its decayed weight). States of other settings, of a learning model, with change detection, or smoothed by row count are refused in one line, and so are shards split by event time (a later shard never drew the earlier shards' rows: go on from the earlier state with the later rows instead); --running-mean shards have no event times to check, which the merge says in a note. Continue from the merged state with new rows: ipfi explain NEW --state MERGED --no-skip-seen.
"""
    from ipfi_cli.run.merge import merge_state_files

    check_outputs({"--output": output}, {"STATE": states}, streams=())
    with reporting(debug):
        run = merge_state_files(states, output, seed=seed)
        hold_until_exit()  # the merged state is written
        for note in run["notes"]:
            say(note, "warning")
        if not quiet:
            say(f"merged {len(states)} states ({run['explained']:,} rows explained, {run['input_rows']:,} input rows) "
                f"into {output}")
