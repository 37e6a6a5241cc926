"""The compiled recursion of the smoothing (core/linear_filter.py): scipy's own routine, loaded
without ``import scipy.signal``, gives lfilter's bits; a routine that does not is refused."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import lfilter

from ipfi_cli.core import linear_filter
from ipfi_cli.core.linear_filter import recursion_filter


def _lfilter(decay, inputs, start):
    """The public lfilter with ``y_{-1} = start`` (its ``zi`` is ``decay * start``)."""
    zi = (decay * np.asarray(start, dtype=np.float64)).reshape(1, *np.shape(inputs)[1:])
    out, _ = lfilter([1.0], [1.0, -decay], inputs, axis=0, zi=zi)
    return out


def test_the_installed_scipy_gives_its_compiled_routine():
    """On every scipy CI installs (oldest and newest) the fast path loads and passes its check:
    if a scipy changes its private routine, this says so (the run would still be right, by lfilter)."""
    assert recursion_filter() is not linear_filter._with_lfilter


@pytest.mark.parametrize("shape", [(64,), (500,), (64, 1), (700, 9), (1000, 40)])
@pytest.mark.parametrize("decay", [0.99, 0.5, 1 - 1e-9, 0.0])
def test_the_compiled_routine_gives_lfilters_bits(shape, decay):
    """Random values of every magnitude (fixed seed), each shape and decay: the same bytes."""
    rng = np.random.default_rng(sum(shape))
    inputs = rng.normal(size=shape) * 10.0 ** rng.integers(-300, 300, size=shape)
    start = rng.normal(size=shape[1:]) if len(shape) > 1 else float(rng.normal())
    got = recursion_filter()(decay, inputs, start)
    assert got.tobytes() == _lfilter(decay, inputs, start).tobytes()


def test_a_routine_that_answers_otherwise_is_refused():
    """The check catches a routine whose operations differ in the last bit (here one that
    rounds ``decay * y`` through a different order) and one that fails."""
    def reordered(decay, inputs, start):
        out = np.empty_like(np.asarray(inputs, dtype=np.float64))
        previous = np.asarray(start, dtype=np.float64)
        for t in range(len(inputs)):
            previous = (inputs[t] / decay + previous) * decay if decay else inputs[t]
            out[t] = previous
        return out

    def failing(decay, inputs, start):
        raise TypeError("no such signature")

    assert linear_filter._answers_as_defined(_lfilter)  # the check itself holds lfilter
    assert not linear_filter._answers_as_defined(reordered)
    assert not linear_filter._answers_as_defined(failing)


def test_without_the_routine_the_recursion_is_lfilters(monkeypatch):
    """When scipy's extension is not where it is expected, the public lfilter runs: same bits."""
    recursion_filter.cache_clear()
    monkeypatch.setattr(linear_filter, "_load_sigtools", lambda: None)
    try:
        chosen = recursion_filter()
        assert chosen is linear_filter._with_lfilter
        inputs = np.random.default_rng(3).normal(size=(100, 4))
        assert chosen(0.9, inputs, np.ones(4)).tobytes() == _lfilter(0.9, inputs, np.ones(4)).tobytes()
    finally:
        recursion_filter.cache_clear()
