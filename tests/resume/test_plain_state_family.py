"""--state with SAGE, conditional removal (the gaussian sampler) and the realisations' bounds: plain
data too, and a run stopped halfway and continued writes the bytes of one uninterrupted run."""

from __future__ import annotations

import pytest

from .conftest import head
from .test_plain_state import no_unpickling, parts  # noqa: F401 - a fixture
from .test_resume import LEARN, STATIC, one_error, reference

FAMILY = {
    "sage": ("--method", "sage"),
    "sage-conditional": ("--method", "sage", "--removal", "conditional", "--inner", "2"),
    "conditional": ("--removal", "conditional"),
    "both": ("--removal", "both", "--bounds"),
    "realisations": ("--bounds", "--bounds-method", "realisations"),
}


@pytest.mark.usefixtures("no_unpickling")
@pytest.mark.parametrize("extra", FAMILY.values(), ids=list(FAMILY))
def test_static_stop_then_continue_equals_one_run(ipfi, rows_csv, tree_model, tmp_path, extra):
    options = (*STATIC, *extra, "--every", "3", "--batch-size", "32")
    expected = reference(ipfi, rows_csv, tree_model, options, tmp_path)
    first = tmp_path / "first.csv"
    first.write_text(head(170))
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    result = ipfi(first, "-m", tree_model, *options, "-o", out, "--state", state, "--checkpoint-every", "50")
    assert result.exit_code == 0, result.stderr
    data = state.read_bytes()
    _, document, arrays = parts(data)
    assert all(a.dtype.kind in "biuf" for a in arrays.values())  # numbers only: nothing to unpickle
    assert b"\x80\x04\x95" not in data and b"\x80\x05\x95" not in data  # no pickle frame
    assert document["settings"]["--method"] == ("sage" if "sage" in extra else "pfi")
    result = ipfi(rows_csv, "-m", tree_model, *options, "-o", out, "--state", state)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == expected


def test_sage_learning_stop_then_continue_equals_one_run(ipfi, rows_csv, river_model, tmp_path):
    """Row by row (a river model that learns), the records path of SAGE's evaluations."""
    options = (*LEARN, "--method", "sage", "--every", "5")
    expected = reference(ipfi, rows_csv, river_model, options, tmp_path)
    first = tmp_path / "first.csv"
    first.write_text(head(130))
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    assert ipfi(first, "-m", river_model, *options, "-o", out, "--state", state).exit_code == 0
    result = ipfi(rows_csv, "-m", river_model, *options, "-o", out, "--state", state)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == expected


def test_the_tree_sampler_is_still_refused_in_one_line(ipfi, rows_csv, tree_model, tmp_path):
    state = tmp_path / "run.state"
    result = ipfi(rows_csv, "-m", tree_model, *STATIC, "--removal", "conditional", "--conditional-sampler", "tree",
                  "--state", state)
    assert result.exit_code == 2 and not state.exists()
    assert "only by pickle" in " ".join(result.stderr.split())


def test_a_sage_state_does_not_continue_a_pfi_run(ipfi, rows_csv, tree_model, tmp_path):
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    assert ipfi(rows_csv, "-m", tree_model, *STATIC, "--method", "sage", "-o", out, "--state", state).exit_code == 0
    one_error(ipfi(rows_csv, "-m", tree_model, *STATIC, "-o", out, "--state", state), "--method: state 'sage'")


@pytest.mark.parametrize("saved, now", [("realisations", "chebyshev"), ("chebyshev", "realisations")])
def test_another_bounds_method_is_named_when_refused(ipfi, rows_csv, tree_model, tmp_path, saved, now):
    # the default (chebyshev) is left out of a state; the refusal names it all the same, on both sides
    def method(name: str) -> tuple[str, ...]:
        return ("--bounds",) + (("--bounds-method", name) if name != "chebyshev" else ())

    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    assert ipfi(rows_csv, "-m", tree_model, *STATIC, *method(saved), "-o", out, "--state", state).exit_code == 0
    before = out.read_bytes()
    one_error(ipfi(rows_csv, "-m", tree_model, *STATIC, *method(now), "-o", out, "--state", state),
              f"--bounds-method: state {saved!r}, now {now!r}")
    assert out.read_bytes() == before


def test_a_sage_state_of_an_earlier_ipfi_is_refused_in_one_line(ipfi, rows_csv, tree_model, tmp_path):
    """An iSAGE state without its orderings' stream (saved before they had one) cannot be continued
    with the same numbers: refused, naming the file, and the state file is left as it was."""
    from ipfi_cli.io.run_state import load_state, save_state

    first = tmp_path / "first.csv"
    first.write_text(head(120))
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    assert ipfi(first, "-m", tree_model, *STATIC, "--method", "sage", "-o", out, "--state", state).exit_code == 0
    payload = load_state(state)
    del payload["explainer"]["order_rng"]
    save_state(state, payload)
    saved = state.read_bytes()
    line = one_error(ipfi(rows_csv, "-m", tree_model, *STATIC, "--method", "sage", "-o", out, "--state", state),
                     str(state), "earlier ipfi")
    assert "start a new run" in line
    assert state.read_bytes() == saved


def test_a_keyed_sage_state_of_an_earlier_ipfi_is_refused_before_any_row(ipfi, tree_model, tmp_path):
    """With --by a key's state loads when the key comes back; the first key's is tried at the start."""
    from ipfi_cli.io.run_state import load_state, save_state

    def keyed(n_rows):
        header, *lines = head(n_rows).splitlines()
        return "\n".join([f"shop,{header}", *(f"s{i % 3},{line}" for i, line in enumerate(lines))]) + "\n"

    first, whole = tmp_path / "first.csv", tmp_path / "whole.csv"
    first.write_text(keyed(90))
    whole.write_text(keyed(150))
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    options = (*STATIC, "--method", "sage", "--by", "shop", "--max-keys", "1", "-o", out, "--state", state)
    assert ipfi(first, "-m", tree_model, *options).exit_code == 0
    payload = load_state(state)
    for _, key_state in payload["explainer"]["keyed"]["keys"]:
        del key_state["explainer"]["order_rng"]
    save_state(state, payload)
    written = out.read_bytes()
    one_error(ipfi(whole, "-m", tree_model, *options), str(state), "earlier ipfi")
    assert out.read_bytes() == written
