"""The windows of :class:`~ipfi_cli.core.changes.ChangeDetector`'s detectors: the statistics of an
event's two windows, and river's ADWIN as plain data (for ``--state`` files).

>>> values = np.array([[0.0], [0.1], [0.0], [0.1], [0.0], [1.0], [1.1], [1.0], [1.1], [1.0]])
>>> change_point(values[:, 0], low=2), window_stats(values[:5])[:2]
(5, (5, array([0.04])))
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ipfi_cli.errors import StateError


def window_stats(values: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """``(n, means, sums of squared deviations)`` of a window's values, per column."""
    means = values.mean(axis=0)
    return len(values), means, ((values - means) ** 2).sum(axis=0)


def bernstein_bound(m2: float, n: int, log_term: float, width: float) -> float:
    """Empirical-Bernstein half-width of a mean of ``n`` values with sum of squared deviations ``m2``."""
    return float(math.sqrt(2.0 * max(float(m2), 0.0) / n * log_term / n) + 2.0 * width * log_term / (3.0 * n))


def change_point(column: np.ndarray, low: int) -> int:
    """The most likely single change point of the mean of ``column`` (Hinkley 1970), at least ``low``
    values from either end: the length of the window before it, the largest between-windows sum of
    squares ``n0 n1 / n (mean0 - mean1)^2``."""
    n = len(column)
    cum = np.cumsum(column)
    k = np.arange(low, n - low + 1)
    s_all, s0 = cum[-1], cum[k - 1]
    statistic = k * (n - k) / n * (s0 / k - (s_all - s0) / (n - k)) ** 2
    return int(k[int(np.argmax(statistic))])


def adwin_state(adwin: Any) -> dict[str, Any]:
    """One river ADWIN as plain data: its settings and its window's bytes (river's own encoding)."""
    helper = adwin._helper
    get_args, get_state = getattr(helper, "__getnewargs__", None), getattr(helper, "__getstate__", None)
    window = get_state() if get_state is not None else None
    if get_args is None or not isinstance(window, bytes):
        raise StateError(f"change detection cannot be saved in a --state file with river {river_version()}: its "
                         "ADWIN does not export its window as data (river 0.26 does); upgrade river, or run "
                         "without --state")
    settings = {k: v for k, v in vars(adwin).items() if k != "_helper"}
    return {"settings": settings, "args": list(get_args()), "window": np.frombuffer(window, dtype=np.uint8).copy()}


def adwin_from_state(state: dict[str, Any]) -> Any:
    """The ADWIN :func:`adwin_state` saved."""
    from river.drift import ADWIN

    adwin = ADWIN(**{k: v for k, v in state["settings"].items() if not k.startswith("_")})
    vars(adwin).update(state["settings"])
    helper = type(adwin._helper).__new__(type(adwin._helper), *state["args"])
    helper.__setstate__(np.asarray(state["window"], dtype=np.uint8).tobytes())
    adwin._helper = helper
    return adwin


def river_version() -> str:
    import river

    return str(getattr(river, "__version__", "?"))


def adwin_saves_as_data() -> bool:
    """True when the installed river's ADWIN can be saved in a plain-data state (``--detect --state``)."""
    from river.drift import ADWIN

    helper = ADWIN()._helper
    return hasattr(helper, "__getnewargs__") and isinstance(getattr(helper, "__getstate__", lambda: None)(), bytes)
