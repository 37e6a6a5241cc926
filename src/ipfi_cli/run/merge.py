"""``ipfi merge``: the state of a whole stream from the ``--state`` files of its shards.

Each shard ran ``ipfi explain ... --state SHARD.state`` with the same settings (the seed may
differ) and a smoothing that merges: ``--time-column``/``--half-life`` (forward decay by event
time) or ``--running-mean``. The merged state holds the merged explainer
(:func:`~ipfi_cli.core.mergeable.merge_states`: smoothed sums exactly, reservoirs by the
documented rule) and the shards' counters added up; it has written no traces yet. Continuing
from it explains new rows: ``ipfi explain NEW --state MERGED --no-skip-seen -o traces.csv``.

States of other settings, of a learning model (``--learn``: two learned models do not
merge), with change detection (ADWIN windows do not merge), of a keyed run (``--by``) or smoothed
by row count are refused in one line naming the state and the setting, shards split by event time
(:func:`~ipfi_cli.core.mergeable.check_not_split_by_time`) in one line naming the later shard (a usage
error, exit 2), and so is a state given
twice (the same file, or a copy of it) or with a merged state made from it, whose rows would count
twice.

Geometric sampling (the default) draws a shard's *recent* rows: with the stream split across
shards, a shard's recent rows reach further back in time than the whole stream's, so a feature that
trends over time is measured against older values, and its importance is larger than one run over
the whole stream gives. The merge says so (:data:`GEOMETRIC_NOTE`); uniform sampling has no such bias.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from typing import Any

from ipfi_cli.core.state_fields import StateFieldError, within
from ipfi_cli.errors import StateError, UsageError
from ipfi_cli.version import __version__

#: settings that may differ between the shards of one stream
PER_SHARD = ("--seed",)

#: said when the shards have no event times (--running-mean): a split by time cannot be told from one at random
#: (:func:`~ipfi_cli.core.mergeable.check_not_split_by_time` needs the times)
UNCHECKED_SPLIT_NOTE = ("the shards carry no event times (--running-mean), so ipfi cannot check how they split the "
                        "stream: shards split at random (by a hashed key, interleaved) merge into one run's estimate, "
                        "shards split by time (rows 1-500, 501-1,000) do not, since each drew replacement values from "
                        "its own rows only (--time-column with --half-life has such a merge refused)")

#: said when the shards used geometric sampling
GEOMETRIC_NOTE = ("the shards used geometric sampling, which draws each shard's recent rows: a shard's recent rows "
                  "reach further back in time than the whole stream's, so a feature that trends over time comes "
                  "out more important than in one run over the stream (for a merge that estimates the whole "
                  "stream's importance, run the shards with --sampling uniform)")


def merge_state_files(paths: Sequence[str], output: str, *, seed: int | None = None) -> dict[str, Any]:
    """Merge the state files ``paths`` into a new state file ``output``; returns its ``run`` counters and
    ``explained``, the rows the merged estimate averages."""
    from ipfi_cli.core.mergeable import SplitByTime, merge_states
    from ipfi_cli.io.run_state import StateLock, load_state, save_state

    if len(paths) < 2:
        raise StateError("give at least two state files to merge")
    if os.path.exists(output):
        raise StateError(f"{output}: exists; merge into a new file (nothing was changed)")
    contents = _distinct_files(paths)
    states = [load_state(p, data, advice="") for p, data in zip(paths, contents)]
    parts, lineages = _parts_once(paths, contents, states)
    first = states[0]
    for path, state in zip(paths, states):
        _check_fields(path, state)
    for path, state in zip(paths, states):
        if "keyed" in state["explainer"]:
            raise StateError(f"{path}: the state of a keyed run (--by), which does not merge; run the shards "
                             "without --by to merge them")
        if state.get("ipfi") != __version__:
            raise StateError(f"{path}: written by ipfi {state.get('ipfi')}; states merge with the version that "
                             f"wrote them (this is ipfi {__version__})")
        if state["settings"].get("--learn"):
            raise StateError(f"{path}: the state of a learning model (--learn); two learned models do not merge")
        if state.get("watch") is not None:
            raise StateError(f"{path}: the state has change detection (--detect); ADWIN windows do not merge: "
                             "run the shards without it")
        what = _unmergeable(state["explainer"])
        if what:
            raise StateError(f"{path}: the state of a run with {what}, which does not merge (only iPFI's with "
                             "marginal removal and the chebyshev or normal bounds does)")
        if state["explainer"].get("explainer") != "mergeable-ipfi":
            raise StateError(f"{path}: smoothed by row count (--alpha), which does not merge; run the shards "
                             "with --time-column and --half-life, or with --running-mean")
        differing = [k for k in first["settings"] if k not in PER_SHARD
                     and state["settings"].get(k) != first["settings"][k]]
        if differing:
            key = differing[0]
            what = "the model file differs" if key == "--model" else \
                f"{state['settings'].get(key)!r}, {paths[0]}: {first['settings'][key]!r}"
            raise StateError(f"{path}: other settings than {paths[0]} ({key}: {what}); only states of the same "
                             "settings merge")
    merged_seed = first["run"]["seed"] if seed is None else seed
    try:
        explainer = merge_states([s["explainer"] for s in states], seed=merged_seed)
    except SplitByTime as error:
        raise UsageError(f"{paths[error.index]}: {error.detail}") from None
    except (KeyError, ValueError) as error:
        raise StateError(f"the states cannot be merged ({error})") from None
    kinds: dict[str, str] = {}
    for state in states:
        kinds.update(state["run"]["kinds"])
    runs = [s["run"] for s in states]
    run = {
        "seed": merged_seed, "input_rows": sum(r["input_rows"] for r in runs), "rows": sum(r["rows"] for r in runs),
        "skipped": sum(r["skipped"] for r in runs),
        "first_skip": next((r["first_skip"] for r in runs if r["first_skip"]), None),
        "last_written": None, "last": None, "records": 0, "kinds": kinds, "last_print": None,
        "output": {"size": 0, "crc": 0, "path": None}, "input": " + ".join(r["input"] for r in runs),
        "saved": time.time(), "merged": list(paths), "parts": parts,
        "lineages": lineages,
    }
    settings = {**first["settings"], "--seed": merged_seed}
    # under the state's lock, as every save of a state (an explain run starting on it meanwhile removes the
    # temporary files of saves no process holds the lock for)
    lock = StateLock(output)
    lock.acquire()
    try:
        if os.path.exists(output):
            raise StateError(f"{output}: exists; merge into a new file (nothing was changed)")
        save_state(output, {"ipfi": __version__, "settings": settings, "explainer": explainer, "model": None,
                            "run": run, "watch": None})
    finally:
        lock.release()
    notes = [GEOMETRIC_NOTE] if settings.get("--sampling") == "geometric" else []
    if any(not math.isfinite(float(shard["explainer"]["tracker"].get("first_time", -math.inf))) and
           int(shard["explainer"]["tracker"]["count"]) > 0 for shard in states):
        notes.append(UNCHECKED_SPLIT_NOTE)
    # each shard stored its first row without explaining it: the rows explained are the smoothing's count
    return {**run, "explained": int(explainer["tracker"]["count"]), "notes": notes}


def _check_fields(path: str, state: dict[str, Any]) -> None:
    """The fields of a shard's state that the merge reads, checked (one line naming the file and the field)."""
    from ipfi_cli.core.mergeable import check_shard
    from ipfi_cli.io.run_state import StateFileError
    from ipfi_cli.run.state_checks import check_state

    check_state(path, state)  # its parts, and the run's counters
    explainer = state["explainer"]
    if "keyed" in explainer or explainer.get("explainer") != "mergeable-ipfi" or _unmergeable(explainer):
        return  # refused below, naming the setting
    try:
        with within("explainer"):
            check_shard(explainer)
    except StateFieldError as error:
        raise StateFileError(path, str(error)) from None


def _parts_once(paths: Sequence[str], contents: Sequence[bytes | None],
                states: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The digests and the lineages of the shard states the merged state is made of (each input's own,
    and the parts of an input that is itself a merge). Refused: a state given with a merge made from
    it, and a shard's state continued after a merge that holds it (same lineage), whose rows up to
    the merge would count twice."""
    import hashlib

    owner: dict[str, str] = {}
    lineage_owner: dict[str, str] = {}
    for path, data, state in zip(paths, contents, states):
        own = hashlib.sha256(data or b"").hexdigest()
        held = state["run"].get("parts") or [own]
        for digest in held:
            if digest in owner:
                raise StateError(f"{path} and {owner[digest]} both hold the same shard's state (one is merged from "
                                 "it); a state merged twice would count its rows twice")
            owner[digest] = path
        lineage = state["run"].get("lineage")
        held_lineages = state["run"].get("lineages") if state["run"].get("parts") else [lineage]
        for line in filter(None, held_lineages or ()):
            if line in lineage_owner:
                raise StateError(f"{path} and {lineage_owner[line]} hold the same shard's run (one continues a "
                                 "state the other is merged from), so the rows they share would count twice; "
                                 "merge the shard's latest state with the other shards' instead")
            lineage_owner[line] = path
    return sorted(owner), sorted(lineage_owner)


def _distinct_files(paths: Sequence[str]) -> list[bytes | None]:
    """The files' bytes (``None`` where one cannot be read: ``load_state`` names the problem), each
    read once; a state given twice, as the same file or as a byte-for-byte copy, is refused: merged,
    its rows would count twice (twice the weight, bounds narrower by sqrt(2), its reservoir rows doubled)."""
    import hashlib

    from ipfi_cli.io.run_state import NotRegularFile, StateFileError, read_regular

    seen: dict[tuple[int, int] | str, str] = {}
    contents: list[bytes | None] = []
    for path in paths:
        try:
            info, data = read_regular(path)
        except OSError:
            contents.append(None)
            continue
        except NotRegularFile as error:  # a FIFO would block the merge
            raise StateFileError(path, f"not a state file: it is {error}") from None
        contents.append(data)
        for key in ((info.st_dev, info.st_ino), hashlib.sha256(data).hexdigest()):
            if key in seen:
                how = "the same file as" if isinstance(key, tuple) else "a copy of"
                raise StateError(f"{path}: {how} {seen[key]}; a state merged twice would count its rows twice")
            seen[key] = path
    return contents


def _unmergeable(explainer: dict[str, Any]) -> str | None:
    """The option whose explainer state does not merge (SAGE, conditional removal, the realisations'
    bounds), or ``None``."""
    if explainer.get("explainer") == "isage":
        return "--method sage"
    if explainer.get("explainer") == "both":
        return "--removal both"
    if "remover" in explainer:
        return "--removal conditional"
    if "spread" in explainer:
        return "--bounds-method realisations"
    return None
