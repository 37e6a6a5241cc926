"""``ipfi explain --time-column/--half-life/--running-mean`` and ``ipfi merge`` through the command."""

from __future__ import annotations

import pytest

from .conftest import SAMPLE, parse_csv

TIMED = ("-t", "class", "--time-column", "ts", "--half-life", "1h", "-M", "2", "--sampling", "uniform",
         "--no-live", "-q")


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    """1,200 rows of the sample data with an event time every 10 s; shards by row parity (as by a
    hashed key: the same distribution), and 200 later rows."""
    import pandas as pd

    base = tmp_path_factory.mktemp("timed")
    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", nrows=1400)
    frame.insert(0, "ts", pd.date_range("2024-05-01", periods=len(frame), freq="10s").strftime("%Y-%m-%d %H:%M:%S"))
    head, later = frame.iloc[:1200], frame.iloc[1200:]
    paths = {"whole": base / "whole.csv", "a": base / "a.csv", "b": base / "b.csv", "later": base / "later.csv"}
    head.to_csv(paths["whole"], index=False)
    head.iloc[::2].to_csv(paths["a"], index=False)
    head.iloc[1::2].to_csv(paths["b"], index=False)
    later.to_csv(paths["later"], index=False)
    return paths


def shard_states(run, timed, hgb, folder, *options, seeds=("1", "1"), prefix=""):
    """Explain shards a and b of ``timed`` with ``options`` (default TIMED), each into its own state;
    returns the two state paths."""
    states = []
    for name, seed in zip("ab", seeds):
        state = folder / f"{prefix}{name}.state"
        result = run("explain", timed[name], "-m", hgb, *(options or TIMED), "--seed", seed, "--state", state,
                     "-o", folder / f"{prefix}{name}.traces.csv")
        assert result.exit_code == 0, result.stderr
        states.append(state)
    return states


def last_record(path):
    row = parse_csv(path.read_text())[-1]
    return {k: float(v) for k, v in row.items() if k != "row"}


def test_shards_merge_and_the_merged_state_continues(run, timed, hgb, tmp_path):
    whole = tmp_path / "whole.csv"
    assert run("explain", timed["whole"], "-m", hgb, *TIMED, "--seed", "1", "-o", whole).exit_code == 0
    states = shard_states(run, timed, hgb, tmp_path, seeds=("1", "2"))
    merged = tmp_path / "merged.state"
    result = run("merge", *states, "-o", merged)
    assert result.exit_code == 0, result.stderr
    assert "merged 2 states" in result.stderr and result.stdout == ""
    # 600 rows per shard, each shard's first row stored without being explained: 2 x 599
    assert "(1,198 rows explained, 1,200 input rows)" in result.stderr
    # continue with the later rows in one run, and in two runs: the same bytes
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    copy = tmp_path / "copy.state"
    copy.write_bytes(merged.read_bytes())
    assert run("explain", timed["later"], "-m", hgb, *TIMED, "--state", merged, "--no-skip-seen", "-o", one,
               "--checkpoint-every", "50").exit_code == 0
    first_half = tmp_path / "first.csv"
    lines = timed["later"].read_text().splitlines(keepends=True)
    first_half.write_text("".join(lines[:101]))
    second_half = tmp_path / "second.csv"
    second_half.write_text("".join([lines[0], *lines[101:]]))
    for part in (first_half, second_half):
        result = run("explain", part, "-m", hgb, *TIMED, "--state", copy, "--no-skip-seen", "-o", two)
        assert result.exit_code == 0, result.stderr
    assert one.read_bytes() == two.read_bytes()
    records = parse_csv(one.read_text())
    assert records[0]["row"] == "1201" and records[-1]["row"] == "1400"  # the rows go on after both shards'
    # the merged estimate is close to the whole stream's: 1,200 rows, uniform reservoirs from the same
    # distribution; standard errors of ~0.015 per estimate (the run's own bounds are ~0.05 at delta 0.05),
    # so 0.08 is over 3.5 standard errors of the difference
    merged_estimate, whole_estimate = last_record(one), last_record(whole)
    assert max(abs(merged_estimate[k] - whole_estimate[k]) for k in whole_estimate) < 0.08
    assert sorted(whole_estimate, key=lambda k: -whole_estimate[k])[:2] == \
        sorted(merged_estimate, key=lambda k: -merged_estimate[k])[:2]


def test_shards_with_the_normal_bound_merge(run, timed, hgb, tmp_path):
    # the merging smoothings take the chebyshev or the normal bound (not realisations: refused)
    bounds = ("--bounds", "--bounds-method", "normal")
    states = shard_states(run, timed, hgb, tmp_path, *TIMED, *bounds)
    merged = tmp_path / "merged.state"
    assert run("merge", *states, "-o", merged).exit_code == 0
    out = tmp_path / "later.csv"
    result = run("explain", timed["later"], "-m", hgb, *TIMED, *bounds, "--state", merged, "--no-skip-seen",
                 "-o", out)
    assert result.exit_code == 0, result.stderr
    last = parse_csv(out.read_text())[-1]
    assert all(float(v) > 0 for k, v in last.items() if k.endswith("_bound") and k.startswith(("salary", "age")))
    refused = run("explain", timed["a"], "-m", hgb, *TIMED, "--bounds", "--bounds-method", "realisations")
    assert refused.exit_code == 2 and "chebyshev or normal" in " ".join(refused.stderr.split())


def test_merge_refusals_are_one_line(run, timed, hgb, hoeffding, tmp_path):
    def state(name, *options, data=timed["a"], model=hgb):
        path = tmp_path / f"{name}.state"
        result = run("explain", data, "-m", model, "-t", "class", "-M", "2", "--no-live", "-q", "--state", path,
                     "-o", tmp_path / f"{name}.csv", *options)
        assert result.exit_code == 0, result.stderr
        return path

    timed_a = state("timed", "--time-column", "ts", "--half-life", "1h")
    other = state("other", "--time-column", "ts", "--half-life", "2h")
    counting = state("counting")
    learning = state("learning", "--learn", "--running-mean", model=hoeffding)
    sage = state("sage", "--method", "sage", "--smoothing", "mean")
    keyed = state("keyed", "--running-mean", "--by", "elevel")
    copy = tmp_path / "copy.state"
    copy.write_bytes(timed_a.read_bytes())
    cases = [((timed_a, sage), "the state of a run with --method sage, which does not merge"),
             ((timed_a, timed_a), "the same file as", "would count its rows twice"),
             ((timed_a, copy), "a copy of", "would count its rows twice"),
             ((keyed, timed_a), "the state of a keyed run (--by), which does not merge"),
             ((timed_a, other), "other settings than", "--half-life: 7200.0"),
             ((timed_a, counting), "smoothed by row count (--alpha), which does not merge"),
             ((learning, timed_a), "the state of a learning model"),
             ((timed_a,), "at least two state files")]
    for states, *parts in cases:
        result = run("merge", *states, "-o", tmp_path / "out.state")
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 1 and len(lines) == 1, result.stderr
        assert all(p in lines[0] for p in parts), lines[0]
        assert not (tmp_path / "out.state").exists()
    result = run("merge", timed_a, timed_a, "-o", other)
    assert result.exit_code == 1 and "exists" in result.stderr


def test_time_options_and_bad_times(run, timed, hgb, tmp_path):
    result = run("explain", timed["a"], "-m", hgb, "-t", "class", "--half-life", "1h", "--no-live")
    assert result.exit_code == 2 and "--time-column and --half-life go together" in result.stderr
    result = run("explain", timed["a"], "-m", hgb, "-t", "class", "--time-column", "ts", "--half-life", "soon")
    assert result.exit_code == 2 and "not a duration" in result.stderr
    result = run("explain", timed["a"], "-m", hgb, "-t", "class", "--time-column", "when", "--half-life", "1h")
    assert result.exit_code == 2 and "no such input column: when" in result.stderr
    lines = timed["a"].read_text().splitlines()
    lines[3] = "yesterday" + lines[3][lines[3].index(","):]
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n")
    result = run("explain", bad, "-m", hgb, *TIMED)
    assert result.exit_code == 1
    assert "row 3 (line 4), column 'ts': not a time: 'yesterday'" in result.stderr, result.stderr


@pytest.mark.parametrize("smoothing", [("--running-mean",), ("--time-column", "ts", "--half-life", "1h"),
                                       ("--smoothing", "mean")],
                         ids=["running-mean", "half-life", "smoothing-mean"])
def test_the_normal_bound_is_the_normal_one_with_mergeable_smoothing(run, timed, hgb, tmp_path, smoothing):
    """--bounds-method normal with --running-mean or --half-life: z(1 - delta/2) standard errors, i.e.
    the Chebyshev half-width times z * sqrt(delta) (before, the Chebyshev one was written)."""
    from statistics import NormalDist

    import numpy as np

    widths = {}
    for method in ("chebyshev", "normal"):
        out = tmp_path / f"{method}.csv"
        result = run("explain", timed["whole"], "-m", hgb, "-t", "class", "-M", "2", "--seed", "1", "-q", *smoothing,
                     "--bounds", "--bounds-method", method, "-o", out)
        assert result.exit_code == 0, result.stderr
        records = parse_csv(out.read_text())
        widths[method] = np.array([[float(v) if v else np.nan for k, v in r.items() if k.endswith("_bound")]
                                   for r in records[10:]])
    ratio = NormalDist().inv_cdf(1 - 0.05 / 2) * np.sqrt(0.05)
    finite = np.isfinite(widths["chebyshev"]) & (widths["chebyshev"] > 0)
    assert finite.sum() > 1000
    np.testing.assert_allclose(widths["normal"][finite], widths["chebyshev"][finite] * ratio, rtol=1e-9)


def test_a_merged_state_and_one_of_its_shards_are_refused_together(run, timed, hgb, tmp_path):
    """Merged with a state made from it, a shard's rows would count twice (a merge of AB and A exited 0)."""
    states = shard_states(run, timed, hgb, tmp_path)
    merged = tmp_path / "ab.state"
    assert run("merge", *states, "-o", merged).exit_code == 0
    for given in ((merged, states[0]), (states[1], merged)):
        result = run("merge", *given, "-o", tmp_path / "again.state")
        assert result.exit_code == 1 and "both hold the same shard's state" in result.stderr, result.stderr
    # continued with new rows, the merged state is still made of its shards
    result = run("explain", timed["later"], "-m", hgb, *TIMED, "--state", merged, "--no-skip-seen",
                 "-o", tmp_path / "later.csv")
    assert result.exit_code == 0, result.stderr
    result = run("merge", merged, states[0], "-o", tmp_path / "again.state")
    assert result.exit_code == 1 and "both hold the same shard's state" in result.stderr
    assert not (tmp_path / "again.state").exists()


def test_a_shard_continued_after_its_merge_is_refused_with_the_merge(run, timed, hgb, tmp_path):
    """A shard's state continued with new rows after a merge made from it is another file, but its
    rows up to the merge are in the merge too: merged again, they would count twice (exit 0 before).
    Its latest state merges with the other shards' as it should."""
    states = shard_states(run, timed, hgb, tmp_path)
    merged = tmp_path / "ab.state"
    assert run("merge", *states, "-o", merged).exit_code == 0
    early = tmp_path / "a-early.state"
    early.write_bytes(states[0].read_bytes())
    result = run("explain", timed["later"], "-m", hgb, *TIMED, "--state", states[0], "--no-skip-seen",
                 "-o", tmp_path / "a.traces.csv")  # shard a goes on after the merge
    assert result.exit_code == 0, result.stderr
    for given in ((merged, states[0]), (states[0], merged), (early, states[0])):  # also two checkpoints of a
        result = run("merge", *given, "-o", tmp_path / "again.state")
        assert result.exit_code == 1, result.stderr
        assert "hold the same shard's run" in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "again.state").exists()
    result = run("merge", states[0], states[1], "-o", tmp_path / "latest.state")
    assert result.exit_code == 0, result.stderr


def test_merging_shards_of_geometric_sampling_says_what_it_measures(run, timed, hgb, tmp_path):
    """Geometric sampling draws each shard's recent rows, which reach further back in time than the whole
    stream's: a feature that trends over time comes out more important (measured on elec2: date 0.042
    merged against 0.024 whole), so the merge warns; uniform sampling does not."""
    for sampling in ("geometric", "uniform"):
        options = [o if o != "uniform" else sampling for o in TIMED]
        states = shard_states(run, timed, hgb, tmp_path, *options, prefix=f"{sampling}-")
        result = run("merge", *states, "-o", tmp_path / f"{sampling}.state")
        assert result.exit_code == 0, result.stderr
        warned = "the shards used geometric sampling" in " ".join(result.stderr.split())
        assert warned == (sampling == "geometric"), result.stderr


def test_the_time_column_is_no_input_of_a_model_that_does_not_name_its_inputs(run, timed, hoeffding, tmp_path):
    """A river model got the --time-column as one more feature (text, a new value every row): a worse
    model, ten times slower, with no note. It is left out as --by and --id columns are."""
    options = ["-t", "class", "--time-column", "ts", "--half-life", "1h", "-M", "2", "--seed", "4", "--learn",
               "--no-live", "-q"]
    timed_run = run("explain", timed["a"], "-m", hoeffding, *options)
    dropped = run("explain", timed["a"], "-m", hoeffding, *options, "--drop", "ts")
    assert timed_run.exit_code == 0 and dropped.exit_code == 0, timed_run.stderr + dropped.stderr
    assert timed_run.stdout.splitlines()[0] == "row,salary,commission,age,elevel,car,zipcode,hvalue,hyears,loan"
    assert timed_run.stdout == dropped.stdout
    refused = run("explain", timed["a"], "-m", hoeffding, "-t", "class", "--time-column", "class",
                  "--half-life", "1h", "-q")
    said = " ".join(refused.stderr.replace("│", "").split())
    assert refused.exit_code == 2 and "cannot be the event time too" in said


def test_a_merge_into_a_state_a_run_holds_is_refused(run, timed, hgb, tmp_path):
    """ipfi merge saves a state as a run does, under the state's lock: a run starting on that state
    meanwhile would take the merge's temporary file for one a killed save left, and remove it."""
    from ipfi_cli.io.run_state import StateLock

    states = shard_states(run, timed, hgb, tmp_path)
    merged = tmp_path / "merged.state"
    lock = StateLock(merged)
    lock.acquire()
    try:
        result = run("merge", *states, "-o", merged)
    finally:
        lock.release()
    assert result.exit_code == 1 and "another ipfi run is using this state" in result.stderr
    assert not merged.exists()


@pytest.fixture(scope="module")
def approval(tmp_path_factory):
    """river's TrumpApproval (daily polls, a time-ordered stream whose features trend): rows 1-1,000 with
    an ISO date column, split by time (rows 1-500 and 501-1,000) and by row parity, and a gradient
    boosting regressor of the approval on the five polls."""
    import datetime

    import joblib
    import pandas as pd
    from river import datasets
    from sklearn.ensemble import HistGradientBoostingRegressor

    base = tmp_path_factory.mktemp("approval")
    pairs = list(datasets.TrumpApproval())[:1000]
    frame = pd.DataFrame([dict(x) for x, _ in pairs])
    frame.insert(0, "ts", [datetime.date.fromordinal(int(d)).isoformat() for d in frame.pop("ordinal_date")])
    frame["approve"] = [y for _, y in pairs]
    model = HistGradientBoostingRegressor(random_state=0).fit(frame.drop(columns=["ts", "approve"]), frame["approve"])
    paths = {name: base / f"{name}.csv" for name in ("whole", "early", "late", "odd", "even")}
    for name, part in [("whole", frame), ("early", frame.iloc[:500]), ("late", frame.iloc[500:]),
                       ("odd", frame.iloc[::2]), ("even", frame.iloc[1::2])]:
        part.to_csv(paths[name], index=False)
    paths["model"] = base / "model.joblib"
    joblib.dump(model, paths["model"])
    return paths


APPROVAL = ("-t", "approve", "--time-column", "ts", "--half-life", "90d", "--sampling", "uniform", "--no-live", "-q")


def test_shards_split_by_time_are_refused_and_the_earlier_state_goes_on_instead(run, approval, tmp_path):
    """Issue 40: rows 1-500 and 501-1,000 of a time-ordered stream, merged, then continued, gave the
    features 0.54 to 0.83 of one run's importances, far outside its bounds, with exit 0: shard 2 drew
    its replacement values from rows 501 on only (the polls trend: they vary less within it). The merge
    is refused in one line naming the later shard (exit 2); going on from the earlier shard's state with
    the later rows is one run, byte for byte (expected: one run over rows 1-1,000). Shards by row
    parity (the same distribution) still merge."""
    def explain(name, seed, *extra):
        state = tmp_path / f"{name}.state"
        result = run("explain", approval[name], "-m", approval["model"], *APPROVAL, "--seed", seed, "--state", state,
                     "-o", tmp_path / f"{name}.traces.csv", *extra)
        assert result.exit_code == 0, result.stderr
        return state

    early, late = explain("early", "1"), explain("late", "2")
    merged = tmp_path / "merged.state"
    result = run("merge", early, late, "-o", merged)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and result.stdout == "", result.stderr
    assert lines[0].startswith(f"ipfi: usage error: {late}: its first explained row is of 2018-07-15 00:00:00 UTC, "
                               "after about 499 rows of the other shards"), lines[0]
    assert "split by time do not merge" in lines[0] and "--state EARLIER --no-skip-seen" in lines[0]
    assert not merged.exists()
    # the way on that the message gives: the later rows continue the earlier shard's state
    whole = tmp_path / "whole.csv"
    assert run("explain", approval["whole"], "-m", approval["model"], *APPROVAL, "--seed", "1",
               "-o", whole).exit_code == 0
    result = run("explain", approval["late"], "-m", approval["model"], *APPROVAL, "--state", early, "--no-skip-seen",
                 "-o", tmp_path / "early.traces.csv")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "early.traces.csv").read_bytes() == whole.read_bytes()
    result = run("merge", explain("odd", "1"), explain("even", "2"), "-o", tmp_path / "parity.state")
    assert result.exit_code == 0 and "merged 2 states (998 rows explained" in result.stderr, result.stderr


@pytest.mark.parametrize("path, value, message", [
    ("run.input_rows", -600, "run.input_rows must be at least 0, not -600"),
    ("run.rows", "600", "run.rows must be a whole number, not the text '600'"),
    ("run.parts", "abc", "run.parts must be a list of texts"),
    ("explainer.n_seen", -1, "explainer.n_seen must be at least 0"),
    ("explainer.tracker.weight", float("nan"), "explainer.tracker.weight must be a number, not NaN"),
    ("explainer.tracker.count", -3, "explainer.tracker.count must be at least 0"),
    ("explainer.sampler.filled", 10**6, "explainer.sampler.filled must be at most"),
    ("explainer.loss_sum", float("inf"), "explainer.loss_sum must be finite"),
    ("explainer.settings.smoothing", {"half_life": -1.0}, "explainer.settings.smoothing.half_life must be at least 0"),
])
def test_a_crafted_shard_state_is_refused_naming_the_file_and_the_field(run, timed, hgb, tmp_path, path, value,
                                                                        message):
    """`ipfi merge` added a negative row count up (exit 0, "merged 2 states"); each field it reads is checked,
    the state's checksum recomputed as an attacker can."""
    from ipfi_cli.io.run_state import load_state, save_state

    states = shard_states(run, timed, hgb, tmp_path)
    payload = load_state(states[1])
    *parents, last = path.split(".")
    part = payload
    for key in parents:
        part = part[key]
    part[last] = value
    save_state(states[1], {k: v for k, v in payload.items() if k not in ("format", "version")})
    result = run("merge", *states, "-o", tmp_path / "merged.state")
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.stderr
    assert "unexpected" not in lines[0] and f"{states[1]}: the state's {message}" in lines[0], lines[0]
    assert not (tmp_path / "merged.state").exists()


@pytest.mark.timeout(60)
def test_a_fifo_given_to_merge_is_refused_at_once(run, timed, hgb, tmp_path):
    import os

    states = shard_states(run, timed, hgb, tmp_path)
    os.mkfifo(tmp_path / "pipe.state")
    result = run("merge", states[0], tmp_path / "pipe.state", "-o", tmp_path / "merged.state")
    assert result.exit_code == 1 and "pipe.state: not a state file: it is a FIFO (named pipe)" in result.stderr


def test_running_mean_shards_say_their_split_cannot_be_checked(run, approval, tmp_path):
    """The running mean merges as forward decay does, and its shards split by time have the same problem
    (each drew replacement values from its own rows only), but they carry no event times to find it by:
    the merge of rows 1-500 and 501-1,000 says so in a note (before: exit 0, no word). Shards smoothed
    by event time, whose split is checked, merge without it."""
    def state(name, seed, *options):
        path = tmp_path / f"{name}.state"
        result = run("explain", approval[name], "-m", approval["model"], *options, "--seed", seed,
                     "--state", path, "-o", tmp_path / f"{path.name}.csv")
        assert result.exit_code == 0, result.stderr
        return path

    running = ("--running-mean", "-t", "approve", "--sampling", "uniform", "--no-live", "-q")
    result = run("merge", state("early", "1", *running), state("late", "2", *running), "-o", tmp_path / "a.state")
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "the shards carry no event times (--running-mean)" in said and "cannot check how they split" in said
    result = run("merge", state("odd", "1", *APPROVAL), state("even", "2", *APPROVAL), "-o", tmp_path / "b.state")
    assert result.exit_code == 0 and "no event times" not in result.stderr, result.stderr
