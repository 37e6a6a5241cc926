"""What a change detector reports: a change in a feature's importance or in the model's loss
(:class:`ChangeEvent`), or a ranking that departed from a reference (:class:`RankingEvent`).
Each has ``to_dict()`` for one JSONL line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LOSS = "loss"


@dataclass(frozen=True)
class ChangeEvent:
    """A change in the mean of one feature's per-row contributions, or of the model's loss.

    Attributes
    ----------
    row : int
        The row at which the change was detected (the caller's row number).
    feature : str
        The feature or group whose importance changed, or ``"loss"``.
    kind : str
        ``"importance"`` (a feature's contributions) or ``"loss"`` (the model's own loss).
    direction : str
        ``"up"`` (more important / higher loss after) or ``"down"``.
    before, after : float
        Mean contribution (importance units; for ``"loss"``: mean loss) over the two windows
        compared: the detector's window (at most its last ``history`` rows) split where ADWIN's
        statistic is largest, into the rows before the change and the rows from it on.
    before_bound, after_bound : float
        Half-widths of the confidence intervals of ``before`` and ``after`` (empirical
        Bernstein, at the level of the detector's test; see the module docstring).
    change : float
        ``after - before``; its size is at least ``min_change``.
    n_before, n_after : int
        Rows in the two windows.
    start_row : int
        The first row of the ``after`` window: where the change is placed (the most likely
        change point; the detection at ``row`` comes later, after enough rows to be sure).
    rank_before, rank_after : int or None
        The feature's rank (1 = most important) among all features' mean contributions over
        the ``before`` and over the ``after`` window (ties share the better rank); ``None`` for
        ``"loss"``.
    features : tuple of str
        For ``"loss"``: the features whose importance changed with it: whose mean contribution
        over the same two windows moved by at least ``min_change`` and by more than the sum of
        the two bounds, biggest change first, then those with an importance event in the
        preceding ``link_rows`` rows. Empty for ``"importance"``.
    loss_row : int or None
        For ``"importance"``: the row of a loss event in the preceding ``link_rows`` rows, if
        any (the importance change came with that change of performance).
    """

    row: int
    feature: str
    kind: str
    direction: str
    before: float
    after: float
    before_bound: float
    after_bound: float
    n_before: int
    n_after: int
    start_row: int
    rank_before: int | None = None
    rank_after: int | None = None
    features: tuple[str, ...] = ()
    loss_row: int | None = None

    @property
    def change(self) -> float:
        return self.after - self.before

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values, fields in a fixed order (``kind`` first after ``row``)."""
        return {"row": self.row, "kind": self.kind, "feature": self.feature, "direction": self.direction,
                "before": self.before, "before_bound": self.before_bound, "after": self.after,
                "after_bound": self.after_bound, "change": self.change, "n_before": self.n_before,
                "n_after": self.n_after, "start_row": self.start_row, "rank_before": self.rank_before,
                "rank_after": self.rank_after, "features": list(self.features), "loss_row": self.loss_row}


@dataclass(frozen=True)
class RankingEvent:
    """The current top-k ranking departed from the reference: nDCG@k fell below the threshold.

    Attributes
    ----------
    row : int
        The row at which it was seen (checked every ``clock`` rows).
    ndcg : float
        nDCG@k of the current estimates against the reference (1 = same top-k order).
    threshold : float
        The threshold it fell below.
    k : int
        How many top features are scored.
    top_current, top_reference : tuple of str
        The current and the reference top-k features, most important first.
    error : float
        The paper's error between the two vectors (normalised to shares, L1 distance, in
        [0, 2]; :func:`ipfi_cli.evaluation.metrics.importance_error`).
    kind, feature : str
        Always ``"ranking"`` (so every event has a ``kind`` and a ``feature``).
    """

    row: int
    ndcg: float
    threshold: float
    k: int
    top_current: tuple[str, ...]
    top_reference: tuple[str, ...]
    error: float
    kind: str = field(default="ranking", init=False)
    feature: str = field(default="ranking", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"row": self.row, "kind": self.kind, "feature": self.feature, "ndcg": self.ndcg,
                "threshold": self.threshold, "k": self.k, "top_current": list(self.top_current),
                "top_reference": list(self.top_reference), "error": self.error}



def event_key(event: Any) -> tuple[str, str, str]:
    """``(kind, feature, direction)`` of a change event (a ranking departure: ``("ranking", "", "down")``)."""
    if event.kind == "ranking":
        return ("ranking", "", "down")
    return (event.kind, event.feature if event.kind != "loss" else "", event.direction)
