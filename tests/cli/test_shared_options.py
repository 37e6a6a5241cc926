"""The options explain, batch, compare and pdp share are one option: the same parameter name,
spellings, default and help in every command (Typer needs each in each signature)."""

from __future__ import annotations

import typer.main

from ipfi_cli.cli.app import app

COMMANDS = ("explain", "batch", "compare", "pdp")
#: options that differ on purpose: what they mean differs by command
OWN = {
    "alpha": "compare takes several rates (a list); explain one",
    "sampling": "compare runs several strategies (a list); explain one",
    "repeats": "batch permutes whole columns M times; iPFI averages M realisations per row",
    "reservoir_size": "compare's help says 'iPFI reservoir' (it runs batch PFI beside it); the spellings agree",
    "learn": "explain learns as it explains; compare compares with interval PFI",
    "input": "explain streams INPUT (optional, stdin); batch and compare read DATA whole",
    "data": "explain streams INPUT (optional, stdin); batch and compare read DATA whole",
    "method": "explain runs an incremental method (iPFI, iSAGE); batch the batch estimator it approximates",
    "workers": "batch spreads its permutations over Dask workers; explain --by its keys",
    "scheduler": "batch spreads its permutations over Dask workers; explain --by its keys",
    "inner": "batch's default averages every background row (Covert's SAGE); explain's depends on the loss",
}
#: pdp's options that mean something else there (the others must match explain's, batch's, compare's)
PDP_OWN = {
    "target": "pdp needs no label: its --target only names a column to leave out of the model's inputs",
    "drop": "pdp explains no columns: its --drop names inputs the model does not take",
    "every": "pdp writes curves, explain trace records",
}


def _params() -> dict[str, dict[str, object]]:
    group = typer.main.get_command(app)
    found: dict[str, dict[str, object]] = {}
    for command in COMMANDS:
        click_command = group.commands[command]  # type: ignore[attr-defined]
        for param in click_command.params:
            if command == "pdp" and param.name in PDP_OWN:
                continue
            found.setdefault(param.name, {})[command] = (
                tuple(param.opts), tuple(param.secondary_opts), param.default, getattr(param, "help", None),
                param.required)
    return found


def test_shared_options_are_one_option_in_every_command():
    shared = {name: by_command for name, by_command in _params().items()
              if len(by_command) > 1 and name not in OWN}
    assert {"input_format", "model", "target", "seed", "features", "group", "loss", "task", "output",
            "timeout", "retries", "threads", "on_bad_row"} <= set(shared)
    different = {name: by_command for name, by_command in shared.items() if len(set(by_command.values())) > 1}
    assert different == {}


def test_the_input_format_has_one_parameter_name():
    params = _params()
    assert "format" not in params
    assert set(params["input_format"]) == set(COMMANDS)


def test_pdp_reads_its_input_with_the_same_options():
    group = typer.main.get_command(app)

    def reading(command: str) -> dict[str, object]:
        params = group.commands[command].params  # type: ignore[attr-defined]
        return {p.name: (tuple(p.opts), p.default, getattr(p, "help", None)) for p in params
                if p.name in ("na_values", "no_default_na", "delimiter", "decimal", "text", "skip_initial_space")}

    assert len(reading("explain")) == 6
    assert reading("pdp") == reading("explain")


def test_explain_and_compare_spell_sampling_and_the_reservoir_alike():
    """compare spelled --sampling -s and --reservoir-size -L, explain had neither."""
    params = _params()
    for name, spellings in (("sampling", ("--sampling", "-s")), ("reservoir_size", ("--reservoir-size", "-L"))):
        assert {params[name][c][0] for c in ("explain", "compare")} == {spellings}, name
