"""Is iPFI biased against batch PFI on adult (Experiment A)? Measurements, part by part.

Experiment A's iPFI estimate of adult's ``relationship`` looked ~10 % low against batch PFI
(0.0388 from 5 uniform orderings, 0.0389 from 10 geometric ones, against 0.0425). This script
takes the machinery apart on the same model (experiment_a.py's ``load`` and ``make_model``,
seed 0) and the same rows. ``s(x)``, a row's expected contribution (its loss increase averaged
over every other row as donor), is computed exactly by hand; its mean over the rows is batch
PFI's expectation, free of permutation noise. A run's final estimate is the EMA of its rows'
contributions, so it splits into a *row term*, the EMA of ``s`` over the ordering (which rows
weigh at the end: no donor, no iPFI code), and a *donor term*, the rest.

* ``replicate``: Experiment A's very runs (its orderings and explainer seeds, checked against
  its runs file), contributions kept: final estimate = row term + donor term; the EMA at
  9 other end points; the plain mean of all contributions.
* ``focused``: iPFI of relationship and age alone (1/7 of the model rows) over 40 fresh
  orderings per sampling: final estimate, row term and donor term against the exact value.
* ``agrawal``: the same row term for age over Experiment A's agrawal orderings (no iPFI call
  but one re-run to check the model and seeds).
* ``stream``: iPFI with ``smoothing="mean"`` (every row weighs alike) on 4,000, 15,000 and
  45,222 rows against batch PFI (M = 20) of the same predictor on the same rows, and the
  unperturbed loss both paths compute.
* ``rows``: for rows at t ~ 3,000, the donors iPFI drew and the losses it folded, recomputed
  by hand with the pipeline on a DataFrame of the data's own dtypes.
* ``donors``: where donors come from: a stream whose cells hold their row's position, through
  the object path (adult's: strings) and the float micro-batch path, same seed.
* ``batch``: batch PFI by hand (pandas, the same permutations) against ``batch_pfi``.

    python experiments/bias_check.py --data DIR [--parts replicate,focused,agrawal,stream,rows,donors,batch]

Figures go to stdout, progress to stderr. CPU on one core: replicate ~5 min, focused ~7 min,
stream ~3 min, agrawal ~1.5 min, the others under a minute each.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_DATA, log, need_files  # noqa: E402
from experiment_a import load, make_model  # noqa: E402

ALPHA, REPEATS, RESERVOIR, SEED = 0.001, 10, 1000, 0
FOCUS = ["relationship", "age", "education-num", "capital-gain"]


class Setup:
    """Experiment A's adult model and rows (seed 0), and batch PFI references computed once."""

    def __init__(self, data: Path) -> None:
        from sklearn.model_selection import train_test_split

        from ipfi_cli.core.batch import as_block
        from ipfi_cli.models import as_predictor

        self.X, self.y, _ = load("adult", data, SEED)
        X_train, _, y_train, _ = train_test_split(self.X, self.y, test_size=0.33, random_state=SEED)
        self.model = make_model("adult", self.X, SEED).fit(X_train, y_train)
        self.predictor = as_predictor(self.model)
        self.columns = [str(c) for c in self.X.columns]
        self.block = as_block(self.X, self.columns)  # what compare_static streams (object: strings)
        self.targets = np.empty(len(self.y), dtype=object)
        self.targets[:] = list(self.y)
        self._batch: dict[tuple[int, int], object] = {}

    def batch(self, rows: np.ndarray, repeats: int, seed: int):
        from ipfi_cli.core import batch_pfi

        key = (len(rows), seed)
        if key not in self._batch:
            t0 = time.process_time()
            self._batch[key] = batch_pfi(self.predictor, self.block[rows], self.targets[rows], self.columns,
                                         n_repeats=repeats, seed=seed)
            log(f"batch PFI on {len(rows)} rows, M = {repeats}: {time.process_time() - t0:.0f} s CPU")
        return self._batch[key]


def ema_weights(n: int, alpha: float = ALPHA) -> np.ndarray:
    """Weights of the bias-corrected EMA's final value on n values (oldest first), summing to 1."""
    w = (1 - alpha) ** np.arange(n)[::-1]
    return w / w.sum()


def ema_path(values: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """The bias-corrected EMA after every row of ``values`` (T, G)."""
    from scipy.signal import lfilter

    raw = lfilter([alpha], [1, -(1 - alpha)], values, axis=0)
    return raw / (1 - (1 - alpha) ** np.arange(1, len(values) + 1))[:, None]


def experiment_runs(seed: int, orderings: int, n: int, sampling: str) -> list[tuple[np.ndarray, int]]:
    """compare_static's (ordering, explainer seed) for each ordering: the same SeedSequence tree."""
    from ipfi_cli.evaluation.records import sampling_slot

    _, order_seeds, run_seeds = np.random.SeedSequence(seed).spawn(3)
    orders = order_seeds.spawn(orderings)
    runs = [s.spawn(2) for s in run_seeds.spawn(orderings)]
    slot = sampling_slot(sampling)
    return [(np.random.default_rng(orders[k]).permutation(n), int(runs[k][slot].generate_state(1)[0]))
            for k in range(orderings)]


def stream(setup: Setup, rows: np.ndarray, order: np.ndarray, sampling: str, seed: int, smoothing: str):
    """Stream block[rows][order] through an explainer as compare_static does; returns it and the contributions."""
    from ipfi_cli.core.incremental import IPFIEstimator
    from ipfi_cli.evaluation.static import CHUNK_MODEL_ROWS

    explainer = IPFIEstimator(setup.predictor, setup.columns, loss="zero-one", alpha=ALPHA, n_repeats=REPEATS,
                              sampling=sampling, reservoir_size=RESERVOIR, seed=seed, smoothing=smoothing)
    block, targets = setup.block[rows][order], setup.targets[rows][order]
    chunk = CHUNK_MODEL_ROWS // explainer.block_rows
    contributions = np.full((len(order), len(setup.columns)), np.nan)
    for begin in range(0, len(order), chunk):
        _, c, _ = explainer.explain_many(block[begin:begin + chunk], targets[begin:begin + chunk].tolist(),
                                         return_contributions=True)
        contributions[begin:begin + chunk] = c
    return explainer, contributions


def row_sensitivity(X, model, y: np.ndarray, features: list[str]) -> np.ndarray:
    """s(x) per row and feature, exactly: the loss increase averaged over every other row as donor.

    A donor acts only through its value of the feature, and a donor sharing the row's value adds
    0, so ``s(x) = sum_v count(v) * increase(x, v) / (N - 1)`` over the feature's distinct values
    ``v``. By hand: a pandas DataFrame of the data's dtypes, ``model.predict``. The mean of s over
    the rows is batch PFI's expectation (with the N/(N-1) factor) without permutation noise.
    """
    n = len(X)
    base_wrong = (model.predict(X) != y).astype(float)
    out = np.zeros((n, len(features)))
    for j, name in enumerate(features):
        counts = X[name].value_counts()
        for value, count in counts.items():
            frame = X.copy()
            frame[name] = value
            out[:, j] += count * ((model.predict(frame) != y) - base_wrong)
        out[:, j] /= n - 1
    return out


def part_replicate(setup: Setup, args) -> None:
    print("\n## replicate: Experiment A's own runs (seed 0), contributions kept")
    n = len(setup.block)
    everything = np.arange(n)
    ref = setup.batch(everything, args.batch_repeats, 1)
    names, ref_mean = setup.columns, np.array(ref.mean)
    ref_se = np.array(ref.std) / np.sqrt(ref.n_repeats)
    focus = [names.index(f) for f in FOCUS]
    print(f"batch PFI (M = {ref.n_repeats}): " + ", ".join(f"{names[j]} {ref_mean[j]:.5f} ± {ref_se[j]:.5f}"
                                                          for j in focus))
    t0 = time.process_time()
    sens = row_sensitivity(setup.X, setup.model, setup.y, FOCUS)
    exact = sens.mean(axis=0)
    log(f"row sensitivities: {time.process_time() - t0:.0f} s CPU")
    print("exact batch PFI expectation, the mean over rows of s(x) (every other row as donor, by hand): "
          + ", ".join(f"{f} {m:.5f}" for f, m in zip(FOCUS, exact)))
    saved = {}
    if args.runs_csv.is_file():
        import csv
        import json

        with args.runs_csv.open() as f:
            saved = {(r["sampling"], int(r["ordering"])): np.array(json.loads(r["estimates"]))
                     for r in csv.DictReader(f) if r["dataset"] == "adult" and r["max_rows"] == ""}
    weights = ema_weights(n - 1)
    ends = np.arange(5000, n - 1, 5000)  # 5,000 rows apart: the EMA's weights overlap by e^-5
    keep = {}
    for sampling in ("uniform", "geometric"):
        finals, row_terms, at_ends, donor_at_ends, means = [], [], [], [], []
        for k, (order, run_seed) in enumerate(experiment_runs(SEED, args.orderings, n, sampling)):
            t0 = time.process_time()
            explainer, contributions = stream(setup, everything, order, sampling, run_seed, "exponential")
            final = explainer.importance_array()
            check = np.abs(final - (weights[:, None] * contributions[1:]).sum(axis=0)).max()
            known = saved.get((sampling, k))
            same = "not in the runs file" if known is None else f"max |diff| {np.abs(final - known).max():.1e}"
            log(f"{sampling} ordering {k}: {time.process_time() - t0:.0f} s CPU; EMA recomputed from the "
                f"contributions within {check:.1e}; against Experiment A's run: {same}")
            finals.append(final[focus])
            row_terms.append(weights @ sens[order[1:]])
            path = ema_path(contributions[1:, focus])
            at_ends.append(path[ends - 1])
            donor_at_ends.append(path[ends - 1] - ema_path(sens[order[1:]])[ends - 1])
            means.append(contributions[1:, focus].mean(axis=0))
            keep[f"{sampling}_{k}"] = contributions[:, focus]
        F, R, E = np.array(finals), np.array(row_terms), np.concatenate(at_ends)
        D, P = np.concatenate(donor_at_ends), np.array(means)
        sd = lambda v: v.std(ddof=1)  # noqa: E731
        se = lambda v: v.std(ddof=1) / np.sqrt(len(v))  # noqa: E731
        print(f"\n### {sampling}, {args.orderings} orderings (exact expectation in brackets)")
        print("feature: final EMA mean ± s.e. (sd over the orderings) = row term mean (sd) + donor term mean (sd) | "
              f"EMA at {len(ends)} end points x {args.orderings} orderings: mean ± s.e. (sd); its donor term "
              "mean ± s.e. (sd) | plain mean of all contributions ± s.e.")
        for i, f in enumerate(FOCUS):
            print(f"{f} [{exact[i]:.5f}]: {F[:, i].mean():.5f} ± {se(F[:, i]):.5f} ({sd(F[:, i]):.5f}) = "
                  f"{R[:, i].mean():.5f} ({sd(R[:, i]):.5f}) + {(F - R)[:, i].mean():+.5f} ({sd((F - R)[:, i]):.5f}) | "
                  f"{E[:, i].mean():.5f} ± {se(E[:, i]):.5f} ({sd(E[:, i]):.5f}); "
                  f"{D[:, i].mean():+.5f} ± {se(D[:, i]):.5f} ({sd(D[:, i]):.5f}) | "
                  f"{P[:, i].mean():.5f} ± {se(P[:, i]):.5f}")
    # the row term needs no model call: over more of Experiment A's orderings, and over random ones
    print("\nrow term of Experiment A's orderings 0-9 (the same for both samplings; no model call), and the "
          "runs' final estimates from the runs file:")
    for i, f in enumerate(FOCUS[:2]):
        terms = [weights @ sens[order[1:], i] for order, _ in experiment_runs(SEED, 10, n, "uniform")]
        print(f"  {f}: row term " + " ".join(f"{v:.4f}" for v in terms) + f"; mean {np.mean(terms):.5f} "
              f"[{exact[i]:.5f}]")
        for sampling in ("uniform", "geometric"):
            runs = [saved[(sampling, k)][names.index(f)] for k in range(10) if (sampling, k) in saved]
            print(f"    {sampling} finals: " + " ".join(f"{v:.4f}" for v in runs) + f"; mean {np.mean(runs):.5f}")
    rng = np.random.default_rng(11)
    spread = np.array([weights @ sens[rng.permutation(n)[1:]] for _ in range(2000)])
    print("row term over 2,000 random orderings: " + ", ".join(
        f"{f} mean {m:.5f} sd {v:.5f}" for f, m, v in zip(FOCUS, spread.mean(0), spread.std(0)))
        + "; sd(s) * sqrt(alpha / (2 - alpha)): "
        + ", ".join(f"{f} {v:.5f}" for f, v in zip(FOCUS, sens.std(0) * np.sqrt(ALPHA / (2 - ALPHA)))))
    if args.save:
        np.savez_compressed(args.save, sens=sens, **keep)


def part_focused(setup: Setup, args) -> None:
    print(f"\n## focused: iPFI of relationship and age alone (the same draws' law, 1/7 of the model rows), "
          f"{args.focused_orderings} fresh orderings per sampling")
    n = len(setup.block)
    features = FOCUS[:2]
    t0 = time.process_time()
    sens = row_sensitivity(setup.X, setup.model, setup.y, features)
    exact = sens.mean(axis=0)
    log(f"row sensitivities: {time.process_time() - t0:.0f} s CPU")
    weights = ema_weights(n - 1)
    for sampling in ("uniform", "geometric"):
        t0 = time.process_time()
        finals, rows, pooled = [], [], []
        for k in range(args.focused_orderings):
            from ipfi_cli.core.incremental import IPFIEstimator
            from ipfi_cli.evaluation.static import CHUNK_MODEL_ROWS

            order = np.random.default_rng([77, k]).permutation(n)
            explainer = IPFIEstimator(setup.predictor, setup.columns, loss="zero-one", alpha=ALPHA,
                                      n_repeats=REPEATS, sampling=sampling, reservoir_size=RESERVOIR,
                                      features=features, seed=1000 + k)
            block, targets = setup.block[order], setup.targets[order].tolist()
            chunk = CHUNK_MODEL_ROWS // explainer.block_rows
            parts = [explainer.explain_many(block[b:b + chunk], targets[b:b + chunk], return_contributions=True)[1]
                     for b in range(0, n, chunk)]
            mine = [explainer.names.index(f) for f in features]  # the explainer's names follow the columns
            contributions = np.concatenate(parts)[1:, mine]
            finals.append(explainer.importance_array()[mine])
            rows.append(weights @ sens[order[1:]])
            pooled.append((contributions - sens[order[1:]]).mean(axis=0))
        log(f"focused, {sampling}: {time.process_time() - t0:.0f} s CPU")
        F, R, P = np.array(finals), np.array(rows), np.array(pooled)
        for i, f in enumerate(features):
            line = lambda v: f"{v.mean():+.5f} ± {v.std(ddof=1) / np.sqrt(len(v)):.5f} (sd {v.std(ddof=1):.5f})"  # noqa: E731
            print(f"{sampling} {f} [exact {exact[i]:.5f}]: final EMA - exact {line(F[:, i] - exact[i])}; "
                  f"row term - exact {line(R[:, i] - exact[i])}; donor term {line(F[:, i] - R[:, i])}; "
                  f"mean over all rows of (contribution - s) {line(P[:, i])}")


def part_agrawal(setup: Setup | None, args) -> None:
    """Experiment A's agrawal runs (seed 0): the row term of age over its orderings, no iPFI call
    but one run reproduced to check the model and seeds."""
    import csv
    import json

    from sklearn.model_selection import train_test_split

    from ipfi_cli.core.batch import as_block
    from ipfi_cli.core.incremental import IPFIEstimator
    from ipfi_cli.models import as_predictor

    print("\n## agrawal: age's row term over Experiment A's orderings (HistGradientBoostingClassifier, seed 0)")
    X, y, _ = load("agrawal", args.data, SEED)
    X_train, _, y_train, _ = train_test_split(X, y, test_size=0.33, random_state=SEED)
    model = make_model("agrawal", X, SEED).fit(X_train, y_train)
    n, columns = len(X), [str(c) for c in X.columns]
    sens = row_sensitivity(X, model, y, ["age"])[:, 0]
    runs = {}
    if args.runs_csv.is_file():
        with args.runs_csv.open() as f:
            runs = {(r["sampling"], int(r["ordering"])): json.loads(r["estimates"])
                    for r in csv.DictReader(f) if r["dataset"] == "agrawal" and r["max_rows"] == ""}
    count = max([k for _, k in runs] + [args.orderings - 1]) + 1
    weights = ema_weights(n - 1)
    age = columns.index("age")
    order, run_seed = experiment_runs(SEED, 1, n, "uniform")[0]
    explainer = IPFIEstimator(as_predictor(model), columns, loss="zero-one", alpha=ALPHA, n_repeats=REPEATS,
                              sampling="uniform", reservoir_size=RESERVOIR, seed=run_seed)
    block = as_block(X, columns)
    explainer.explain_many(block[order], y[order].tolist())
    known = runs.get(("uniform", 0))
    print(f"uniform ordering 0 re-run: age {explainer.importance_array()[age]:.5f}"
          + ("" if known is None else f", Experiment A's run {known[age]:.5f}"))
    terms = np.array([weights @ sens[o[1:]] for o, _ in experiment_runs(SEED, count, n, "uniform")])
    print(f"exact expectation of batch PFI for age: {sens.mean():.5f}; row term over {count} orderings: mean "
          f"{terms.mean():.5f} ± {terms.std(ddof=1) / np.sqrt(count):.5f} (sd {terms.std(ddof=1):.5f})")
    for sampling in ("uniform", "geometric"):
        finals = np.array([runs[(sampling, k)][age] for k in range(count) if (sampling, k) in runs])
        if len(finals):
            print(f"  {sampling} finals ({len(finals)}): mean {finals.mean():.5f} ± "
                  f"{finals.std(ddof=1) / np.sqrt(len(finals)):.5f}; donor term (final - row term) mean "
                  f"{(finals - terms[:len(finals)]).mean():+.5f} ± "
                  f"{(finals - terms[:len(finals)]).std(ddof=1) / np.sqrt(len(finals)):.5f}")
    rng = np.random.default_rng(12)
    spread = np.array([weights @ sens[rng.permutation(n)[1:]] for _ in range(2000)])
    print(f"row term over 2,000 random orderings: mean {spread.mean():.5f} sd {spread.std():.5f}")


def part_stream(setup: Setup, args) -> None:
    print(f"\n## stream: smoothing='mean' against batch PFI (M = {args.batch_repeats}) on the same rows")
    n_all = len(setup.block)
    names = setup.columns
    for n in (4000, 15000, n_all):
        rows = np.arange(n_all) if n == n_all else np.sort(np.random.default_rng(n).choice(n_all, n, replace=False))
        ref = setup.batch(rows, args.batch_repeats, 1)
        ref_mean, ref_se = np.array(ref.mean), np.array(ref.std) / np.sqrt(ref.n_repeats)
        for sampling in ("uniform", "geometric"):
            t0 = time.process_time()
            order = np.random.default_rng(n + 1).permutation(n)
            explainer, contributions = stream(setup, rows, order, sampling, 5, "mean")
            est = explainer.importance_array()
            se = contributions[1:].std(axis=0) / np.sqrt(n - 1)
            log(f"{n} rows, {sampling}: {time.process_time() - t0:.0f} s CPU")
            first = setup.predictor.predict_block(setup.block[rows][order[:1]], names, explainer.loss.output, None)
            wrong_first = float(first[0] != setup.targets[rows][order[0]])
            ipfi_errors = explainer.mean_loss * explainer.n_explained + wrong_first
            z = (est - ref_mean) / np.hypot(se, ref_se)
            print(f"\n{n} rows, {sampling}: model errors on the rows: iPFI path {ipfi_errors:.1f}, batch path "
                  f"{ref.baseline_loss * n:.1f}; |z| max {np.abs(z).max():.1f} ({names[int(np.abs(z).argmax())]}), "
                  f"mean z {z.mean():+.2f}")
            for j in [names.index(f) for f in FOCUS]:
                print(f"  {names[j]:15s} iPFI {est[j]:.5f} ± {se[j]:.5f}  batch {ref_mean[j]:.5f} ± {ref_se[j]:.5f}"
                      f"  diff {est[j] - ref_mean[j]:+.5f}  z {z[j]:+.1f}")


def part_rows(setup: Setup, args) -> None:
    from ipfi_cli.core.incremental import IPFIEstimator

    print("\n## rows: iPFI's losses recomputed by hand (pandas DataFrame of the data's dtypes)")
    names, n_all = setup.columns, len(setup.block)
    from ipfi_cli.core.losses import Output

    unperturbed = setup.predictor.predict_block(setup.block, names, Output.LABEL, None)
    by_hand = setup.model.predict(setup.X)
    print(f"unperturbed predictions, all {n_all} rows: object block through the adapter vs model.predict(DataFrame): "
          f"{int((unperturbed != by_hand).sum())} differ")
    order = np.random.default_rng(3).permutation(n_all)[:3000]
    explainer = IPFIEstimator(setup.predictor, names, loss="zero-one", alpha=ALPHA, n_repeats=REPEATS,
                              sampling="uniform", reservoir_size=RESERVOIR, seed=9)
    drawn: list[np.ndarray] = []
    draw = explainer._draw_replacements

    def recording() -> np.ndarray:
        values = draw()
        drawn.append(values.copy())
        return values

    explainer._draw_replacements = recording  # type: ignore[method-assign]
    _, contributions, losses = explainer.explain_many(setup.block[order], setup.targets[order].tolist(),
                                                      return_contributions=True)
    G, M = len(names), REPEATS
    check = np.arange(2800, 3000)  # past the reservoir's filling: replacements at work
    replaced = np.array([drawn[t - 1] for t in check]).reshape(len(check), M, G)  # row 0 drew nothing
    frame = setup.X.iloc[np.repeat(order[check], 1 + M * G)].reset_index(drop=True)
    for g, name in enumerate(names):
        column = frame[name].to_numpy().copy()
        at = np.arange(len(check))[:, None] * (1 + M * G) + 1 + np.arange(M)[None, :] * G + g
        column[at.reshape(-1)] = replaced[:, :, g].reshape(-1)
        frame[name] = column
    frame = frame.astype(setup.X.dtypes.to_dict())
    wrong = (setup.model.predict(frame) != np.repeat(setup.y[order[check]], 1 + M * G)).astype(float)
    wrong = wrong.reshape(len(check), 1 + M * G)
    mine = (wrong[:, 1:] - wrong[:, :1]).reshape(len(check), M, G).mean(axis=1)
    print(f"rows {check[0]}-{check[-1]} of a uniform stream ({len(check)} rows x {M * G} perturbations): "
          f"max |contribution iPFI - by hand| {np.abs(contributions[check] - mine).max():.1e}, "
          f"unperturbed losses differ in {int((losses[check] != wrong[:, 0]).sum())} rows")
    own = sum(int((replaced[i, :, g] == setup.X[names[g]].to_numpy()[order[t]]).sum())
              for i, t in enumerate(check) for g in range(G))
    print(f"perturbed cells equal to the row's own value: {own / replaced.size:.1%} (a donor sharing it; adds 0)")


def part_donors(setup: Setup, args) -> None:
    from ipfi_cli.core.incremental import IPFIEstimator
    from ipfi_cli.models import FunctionPredictor

    print("\n## donors: a stream whose every cell holds its row's position (adult's shape: 14 columns, M = 10)")
    n, G, M = len(setup.block), len(setup.columns), REPEATS
    rows_at = 1 + np.arange(M)[:, None] * G + np.arange(G)[None, :]  # (M, G): the perturbed rows of a block
    cols_at = np.broadcast_to(np.arange(G), (M, G))

    def run(kind: str, sampling: str, seed: int) -> np.ndarray:
        seen: list[np.ndarray] = []

        def model(block: np.ndarray) -> np.ndarray:
            blocks = block.reshape(-1, 1 + M * G, G)
            positions = blocks[:, rows_at, cols_at].astype(np.int64)  # (T, M, G) donor positions
            seen.append(np.concatenate([blocks[:, 0, :1].astype(np.int64), positions.reshape(len(blocks), -1)], 1))
            return np.zeros(len(block), dtype=np.int64)

        explainer = IPFIEstimator(FunctionPredictor(model), setup.columns, loss="zero-one", alpha=ALPHA,
                                  n_repeats=M, sampling=sampling, reservoir_size=RESERVOIR, seed=seed)
        position = np.repeat(np.arange(n)[:, None], G, axis=1)
        stream_rows = position.astype(str).astype(object) if kind == "object" else position.astype(np.float64)
        for begin in range(0, n, 2836):
            explainer.explain_many(stream_rows[begin:begin + 2836], [0] * len(stream_rows[begin:begin + 2836]))
        out = np.concatenate(seen)
        return out[np.argsort(out[:, 0], kind="stable")]

    for sampling in ("uniform", "geometric"):
        t0 = time.process_time()
        by_object, by_float = run("object", sampling, 4), run("float", sampling, 4)
        log(f"donors, {sampling}: {time.process_time() - t0:.0f} s CPU")
        t = by_object[:, :1]
        donors = by_object[:, 1:]
        print(f"\n{sampling}: {len(donors)} rows x {donors.shape[1]} draws; object path == float micro-batch path: "
              f"{np.array_equal(by_object, by_float)}; donors at or after their row: {int((donors >= t).sum())}")
        late = (t[:, 0] >= 40000) & (t[:, 0] < 41000)
        if sampling == "uniform":
            share = (donors[late] / t[late]).reshape(-1)
            hist = np.histogram(share, bins=10, range=(0, 1))[0] / share.size
            print("rows 40,000-40,999: donor position / row position in tenths: "
                  + " ".join(f"{h:.3f}" for h in hist) + f" (uniform: 0.100 each); mean {share.mean():.4f} (0.5)")
            spread = []
            for seed in range(5, 9):
                d = run("float", sampling, seed)
                late_d = (d[:, 0] >= 40000) & (d[:, 0] < 41000)
                spread.append(np.histogram((d[late_d, 1:] / d[late_d, :1]).reshape(-1), bins=10, range=(0, 1))[0]
                              / d[late_d, 1:].size)
            spread_a = np.array(spread)
            print("the same over 4 more seeds (float path): per tenth mean "
                  + " ".join(f"{v:.3f}" for v in spread_a.mean(0)) + "; sd "
                  + " ".join(f"{v:.3f}" for v in spread_a.std(0)))
        else:
            age = (t[late] - donors[late]).reshape(-1)
            print(f"rows 40,000-40,999: donor age mean {age.mean():.0f} (a full reservoir of {RESERVOIR}: "
                  f"{RESERVOIR}), median {np.median(age):.0f} ({np.log(2) * RESERVOIR:.0f}), "
                  f"share older than 3,000 rows {np.mean(age > 3000):.3f} ({(1 - 1 / RESERVOIR) ** 3000:.3f})")


def part_batch(setup: Setup, args) -> None:
    from ipfi_cli.core import batch_pfi

    print("\n## batch: batch_pfi against batch PFI by hand (pandas, model.predict)")
    X, y, names, n = setup.X, setup.y, setup.columns, len(setup.X)
    repeats = 3
    t0 = time.process_time()
    ref = batch_pfi(setup.predictor, setup.block, setup.targets, names, n_repeats=repeats, seed=21)
    base_wrong = setup.model.predict(X) != y
    seeds = np.random.SeedSequence(21).spawn(len(names))  # batch_pfi's: one stream per feature
    worst, fixed = 0.0, []
    for g, name in enumerate(names):
        rng = np.random.default_rng(seeds[g])
        for m in range(repeats):
            order = rng.permutation(n)
            fixed.append(int((order == np.arange(n)).sum()))
            frame = X.copy()
            frame[name] = X[name].to_numpy()[order]
            value = n / (n - 1) * ((setup.model.predict(frame) != y).mean() - base_wrong.mean())
            worst = max(worst, abs(value - ref.values[g, m]))
    log(f"batch by hand: {time.process_time() - t0:.0f} s CPU")
    print(f"{len(names)} features x {repeats} permutations: max |batch_pfi - by hand| {worst:.1e}; baseline loss "
          f"{ref.baseline_loss:.6f} vs by hand {base_wrong.mean():.6f}; fixed points per permutation: mean "
          f"{np.mean(fixed):.2f} (expected 1); the N/(N-1) factor is {n / (n - 1):.6f}")


def part_reference(setup: Setup | None, args) -> None:
    """How much of Experiment A's error is the batch reference's own noise: every finished run
    of agrawal and adult scored again against batch PFI with ``--reference-repeats`` permutations
    (another seed), beside its score against Experiment A's M = 10 reference."""
    import csv
    import json

    from sklearn.model_selection import train_test_split

    from ipfi_cli.core import batch_pfi
    from ipfi_cli.core.batch import as_block
    from ipfi_cli.core.ranking import importance_error
    from ipfi_cli.evaluation.metrics import summarise
    from ipfi_cli.models import as_predictor

    repeats = args.reference_repeats
    print(f"\n## reference: Experiment A's runs scored against batch PFI at M = 10 (the paper's) and M = {repeats}")
    with args.runs_csv.open() as f:
        runs = [r for r in csv.DictReader(f) if r["max_rows"] == ""]
    for name in ("agrawal", "adult"):
        X, y, _ = load(name, args.data, SEED)
        X_train, _, y_train, _ = train_test_split(X, y, test_size=0.33, random_state=SEED)
        predictor = as_predictor(make_model(name, X, SEED).fit(X_train, y_train))
        columns = [str(c) for c in X.columns]
        targets = np.empty(len(y), dtype=object)
        targets[:] = list(y)
        block = as_block(X, columns)
        t0 = time.process_time()
        paper_ref = batch_pfi(predictor, block, targets, columns, n_repeats=REPEATS, seed=SEED)
        precise = batch_pfi(predictor, block, targets, columns, n_repeats=repeats, seed=SEED + 1001)
        log(f"{name}: batch PFI at M = {REPEATS} and {repeats}: {time.process_time() - t0:.0f} s CPU")
        gap = np.asarray(paper_ref.mean) - np.asarray(precise.mean)
        print(f"{name}: the M = {REPEATS} reference minus the M = {repeats} one, per feature: "
              + ", ".join(f"{c} {g:+.4f}" for c, g in zip(columns, gap) if abs(g) >= 0.0005))
        for sampling in ("uniform", "geometric"):
            mine = [np.asarray(json.loads(r["estimates"])) for r in runs
                    if r["dataset"] == name and r["sampling"] == sampling]
            if not mine:
                continue
            old = summarise(importance_error(e, np.asarray(paper_ref.mean)) for e in mine)
            new = summarise(importance_error(e, np.asarray(precise.mean)) for e in mine)
            print(f"  {sampling} ({len(mine)} runs): median error {old.median:.4f} (IQR {old.iqr:.4f}) against M = "
                  f"{REPEATS}; {new.median:.4f} (IQR {new.iqr:.4f}) against M = {repeats}")


PARTS = {"replicate": part_replicate, "focused": part_focused, "agrawal": part_agrawal, "stream": part_stream,
         "rows": part_rows, "donors": part_donors, "batch": part_batch,
         "reference": part_reference}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with adult.csv")
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--orderings", type=int, default=5, help="Experiment A orderings to replicate per sampling")
    parser.add_argument("--focused-orderings", type=int, default=40)
    parser.add_argument("--batch-repeats", type=int, default=20)
    parser.add_argument("--reference-repeats", type=int, default=100, help="the reference part's precise batch PFI")
    parser.add_argument("--save", type=Path, default=None, help="keep the replicated runs' contributions here (.npz)")
    parser.add_argument("--runs-csv", type=Path, default=Path(__file__).resolve().parent / "results"
                        / "experiment_a_runs.csv", help="Experiment A's runs, to check the replication against")
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s): {', '.join(unknown)} (choose from {', '.join(PARTS)})")
    if any(p not in ("agrawal", "reference") for p in parts):
        need_files(args.data, ["adult.csv"])
    setup = None
    for part in parts:
        if setup is None and part not in ("agrawal", "reference"):  # those build their own models
            t0 = time.process_time()
            setup = Setup(args.data)
            log(f"adult: {len(setup.X)} rows, model fitted ({time.process_time() - t0:.0f} s CPU)")
        PARTS[part](setup, args)


if __name__ == "__main__":
    main()
