"""One explainer per key: each key's numbers are those of an explainer on its rows alone, and
evicting keys (saved as plain data) and bringing them back changes no number."""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core import IPFIEstimator, plain_state
from ipfi_cli.core.keyed import KeyedExplainers
from ipfi_cli.core.mergeable import MergeablePFI
from ipfi_cli.models import FunctionPredictor


@pytest.fixture(scope="module")
def keyed_stream(agrawal_stream):
    X, y = agrawal_stream(3000, 3)
    keys = np.random.default_rng(4).choice(["eu", "us", "apac", "latam", "mea"], size=len(y), p=[.4, .3, .15, .1, .05])
    return X, y, keys


def factory(agrawal_rule, agrawal_columns, cls=IPFIEstimator, **extra):
    model = FunctionPredictor(agrawal_rule)
    return lambda key: cls(model, agrawal_columns, loss="zero-one", n_repeats=2, reservoir_size=50, seed=7, **extra)


def run_keyed(keyed, X, y, keys, chunk=37):
    """Feed the stream in micro-batches; each batch's rows go to their key's explainer, in order."""
    out = {}
    for start in range(0, len(y), chunk):
        part = slice(start, start + chunk)
        for key in dict.fromkeys(keys[part]):
            mask = keys[part] == key
            estimates = keyed.get(key).explain_many(X[part][mask], y[part][mask])
            out.setdefault(key, []).append(estimates)
    return {k: np.vstack(v) for k, v in out.items()}


@pytest.mark.parametrize("cls", [IPFIEstimator, MergeablePFI])
def test_per_key_numbers_equal_separate_explainers_and_eviction_changes_nothing(keyed_stream, agrawal_rule,
                                                                               agrawal_columns, cls):
    X, y, keys = keyed_stream
    make = factory(agrawal_rule, agrawal_columns, cls)
    unbounded = KeyedExplainers(make)
    bounded = KeyedExplainers(make, max_keys=2)
    everything = run_keyed(unbounded, X, y, keys)
    evicting = run_keyed(bounded, X, y, keys)
    assert bounded.evictions > 50 and bounded.n_live == 2 and unbounded.evictions == 0
    assert bounded.keys() == unbounded.keys() == list(dict.fromkeys(keys.tolist()))  # in order of first sight
    for key in unbounded.keys():
        alone = make(key).explain_many(X[keys == key], y[keys == key])  # the key's rows only, in one call
        assert np.array_equal(everything[key], alone, equal_nan=True), key
        assert np.array_equal(evicting[key], alone, equal_nan=True), key


def test_state_of_every_key_round_trips(keyed_stream, agrawal_rule, agrawal_columns):
    X, y, keys = keyed_stream
    make = factory(agrawal_rule, agrawal_columns)
    first = KeyedExplainers(make, max_keys=3)
    run_keyed(first, X[:2000], y[:2000], keys[:2000])
    state = plain_state.loads(plain_state.dumps(first.state_dict()))
    resumed = KeyedExplainers(make, max_keys=3)
    resumed.load_state_dict(state)
    assert resumed.keys() == first.keys()
    rest = run_keyed(resumed, X[2000:], y[2000:], keys[2000:])
    uninterrupted = run_keyed(KeyedExplainers(make), X, y, keys)
    for key, estimates in rest.items():
        assert np.array_equal(estimates, uninterrupted[key][-len(estimates):], equal_nan=True), key
    with pytest.raises(ValueError, match="max_keys must be at least 1"):
        KeyedExplainers(make, max_keys=0)


class _Counter:
    """A stand-in explainer: its state is a count; it says when its state changed (``state_version``)
    and counts how often it was serialised."""

    serialised = 0

    def __init__(self, versioned: bool = True) -> None:
        self.count = 0
        if not versioned:
            self.state_version = None

    def state_version(self):
        return self.count

    def state_dict(self):
        _Counter.serialised += 1
        return {"count": self.count}

    def load_state_dict(self, state):
        self.count = int(state["count"])


class _CountedStore(dict):
    writes = 0

    def __setitem__(self, key, value):
        _CountedStore.writes += 1
        super().__setitem__(key, value)


@pytest.mark.parametrize("versioned", [True, False])
def test_a_key_restored_and_evicted_unchanged_is_not_serialised_again(versioned):
    """max_keys 1, keys a and b taking turns: a key brought back and evicted without a row in between keeps
    the bytes it came from (no state_dict, no write); one fed in between is saved anew, and restored with
    what it was fed (the bytes kept are never stale). Without a state_version it is saved every time."""
    _Counter.serialised = _CountedStore.writes = 0
    store = _CountedStore()
    keyed = KeyedExplainers(lambda key: _Counter(versioned), max_keys=1, saved=store)
    keyed.get("a").count += 1
    keyed.get("b").count += 5  # a evicted: saved
    assert (_Counter.serialised, store.writes) == (1, 1)
    keyed.get("a")  # b evicted (saved); a restored, not fed
    keyed.get("b")  # a evicted unchanged
    assert (_Counter.serialised, store.writes) == ((2, 2) if versioned else (3, 3))
    keyed.get("b").count += 1
    keyed.get("a").count += 10  # b evicted, changed: saved anew
    keyed.get("b")  # a evicted, changed
    assert keyed.get("a").count == 11 and keyed.state("b") == {"count": 6}
    assert keyed.state_dict()["keys"] == [["a", {"count": 11}], ["b", {"count": 6}]]


def test_forget_drops_a_new_key_only():
    keyed = KeyedExplainers(lambda key: _Counter(), max_keys=1)
    keyed.get("a").count += 1
    keyed.get("b")
    keyed.forget("b")
    assert keyed.keys() == ["a"] and not keyed.seen("b") and keyed.n_live == 0
    keyed.get("a")  # restored: it has saved bytes
    with pytest.raises(ValueError, match="saved state"):
        keyed.forget("a")
