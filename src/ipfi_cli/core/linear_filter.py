"""The first-order recursion ``y_t = x_t + decay * y_{t-1}`` over a micro-batch, in compiled code.

:func:`scipy.signal.lfilter` runs it, but ``import scipy.signal`` costs ~70 ms of CPU (its
array-API wrappers rewrite hundreds of docstrings at import), a fixed cost that a 20,000-row run
pays as ~3.5 µs a row. The routine lfilter calls, ``_linear_filter`` of scipy's extension module
``scipy.signal._sigtools``, loads in ~0.3 ms from its file without the package's ``__init__``. It
is scipy's private routine: :func:`recursion_filter` uses it only when it loads and answers as
lfilter does (checked once, on values of every kind, against lfilter's own definition of the
operations on finite values), and otherwise imports :func:`scipy.signal.lfilter`. Both give the same bits (the tests
compare them on every scipy version CI installs).

>>> import numpy as np
>>> recursion_filter()(0.5, np.array([[1.0], [1.0], [1.0]]), np.array([2.0])).ravel().tolist()
[2.0, 2.0, 2.0]
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

#: ``(decay, inputs, start) -> y``: the recursion along the first axis of ``inputs`` (1 or 2
#: dimensions) from ``y_{-1} = start``
Recursion = Callable[[float, np.ndarray, "np.ndarray | float"], np.ndarray]


def _initial(decay: float, start: np.ndarray | float, inputs: np.ndarray) -> np.ndarray:
    """lfilter's ``zi`` for ``y_{-1} = start``: ``decay * start``, shaped for the first axis."""
    initial = np.asarray(decay * np.asarray(start, dtype=np.float64), dtype=np.float64)
    return initial.reshape(1) if inputs.ndim == 1 else initial.reshape(1, -1)


def _with_lfilter(decay: float, inputs: np.ndarray, start: np.ndarray | float) -> np.ndarray:
    from scipy.signal import lfilter

    out, _ = lfilter([1.0], [1.0, -decay], inputs, axis=0, zi=_initial(decay, start, inputs))
    return np.asarray(out, dtype=np.float64)


def _load_sigtools() -> Any:
    """scipy's ``scipy.signal._sigtools`` found by the import system's own finder in scipy's
    ``signal`` folder and loaded without running ``scipy/signal/__init__.py``; None when it is
    not there (it is from scipy 1.8 on)."""
    try:
        import scipy

        for base in scipy.__path__:
            finder = importlib.machinery.FileFinder(
                f"{base}/signal", (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES))
            spec = finder.find_spec("scipy.signal._sigtools")
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module
    except (ImportError, OSError, AttributeError):
        return None
    return None


def _with_sigtools(linear_filter: Any) -> Recursion:
    numerator = np.array([1.0, 0.0])  # lfilter pads b to the length of a

    def run(decay: float, inputs: np.ndarray, start: np.ndarray | float) -> np.ndarray:
        x = np.asarray(inputs, dtype=np.float64)
        out, _ = linear_filter(numerator, np.array([1.0, -decay]), x, 0, _initial(decay, start, x))
        return np.asarray(out, dtype=np.float64)

    return run


def _answers_as_defined(run: Recursion) -> bool:
    """Whether ``run`` gives ``y_t = decay * y_{t-1} + x_t`` to the bit, step by step in numpy
    (what lfilter gives on finite values), on values of every magnitude down to subnormals and
    zeros of both signs, in one and two dimensions: the check that scipy's private routine still
    means what lfilter means. (The recursion sees finite values only: a run stops at a
    non-finite loss.)"""
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(40, 3))  # column 0: values whose sums round (operand order shows)
    inputs[:, 1] *= 10.0 ** rng.integers(-320, 300, size=40)
    inputs[::7, 0], inputs[3::9, 2] = -0.0, 0.0
    start = rng.normal(size=3)
    decay = 0.999
    expected = np.empty_like(inputs)
    previous = start
    for t in range(len(inputs)):
        previous = decay * previous + inputs[t]
        expected[t] = previous
    try:
        got_2d = run(decay, inputs, start)
        got_1d = run(decay, inputs[:, 1].copy(), float(start[1]))
    except (TypeError, ValueError):
        return False
    return _same_bits(got_2d, expected) and _same_bits(got_1d, expected[:, 1])


def _same_bits(got: Any, expected: np.ndarray) -> bool:
    got = np.asarray(got)
    return bool(got.shape == expected.shape and got.dtype == expected.dtype and got.tobytes() == expected.tobytes())


@cache
def recursion_filter() -> Recursion:
    """The recursion ``(decay, inputs, start) -> y``: scipy's compiled routine loaded on its own
    when it answers as defined, else :func:`scipy.signal.lfilter` (imported on first use)."""
    sigtools = _load_sigtools()
    linear_filter = getattr(sigtools, "_linear_filter", None)
    if linear_filter is not None:
        run = _with_sigtools(linear_filter)
        if _answers_as_defined(run):
            return run
    return _with_lfilter
