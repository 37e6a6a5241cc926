"""One explainer per key of a stream (a model per region, per merchant...), memory bounded.

:class:`KeyedExplainers` keeps an explainer for each key, built by a factory when the key first
comes. With ``max_keys`` at most that many are live: when one more is needed, the least recently
seen is saved as plain data (its :meth:`state_dict`, encoded by :mod:`ipfi_cli.core.plain_state`
into bytes) and dropped; when its key comes back it is rebuilt by the factory and continues from
that state. A key restored and evicted again unchanged (its explainer's ``state_version()`` the
same) keeps the bytes it was restored from: it is neither serialised nor written again. The state
round trip is exact, so a run with eviction gives the numbers of a run
without it, and each key's numbers are those of an explainer that saw only that key's rows.

>>> from ipfi_cli.core import IPFIEstimator
>>> from ipfi_cli.models import FunctionPredictor
>>> model = FunctionPredictor(lambda X: (X[:, 0] > 0.5).astype(int))
>>> keyed = KeyedExplainers(lambda key: IPFIEstimator(model, ["a", "b"], alpha=0.1, seed=1), max_keys=1)
>>> for key, a in [("eu", 0.2), ("us", 0.9), ("eu", 0.7), ("us", 0.1)]:
...     _ = keyed.get(key).explain_one({"a": a, "b": 0.0}, int(a > 0.5))
>>> keyed.keys(), keyed.n_live, keyed.evictions
(['eu', 'us'], 1, 3)
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, MutableMapping
from typing import Any, cast


class KeyedExplainers:
    """Explainers by key, at most ``max_keys`` live (``None``: no limit); see the module docstring.

    Parameters
    ----------
    factory
        ``factory(key)`` builds a new explainer for ``key`` (with the run's settings and seed).
    max_keys
        The most explainers kept live; the least recently seen are saved and evicted.
    saved
        Where the evicted keys' bytes are kept (a mapping key -> bytes; for example on disk,
        :class:`ipfi_cli.io.spill.SpillStore`); default: a dict in memory.
    """

    def __init__(self, factory: Callable[[Hashable], Any], max_keys: int | None = None,
                 saved: MutableMapping[Hashable, bytes] | None = None) -> None:
        if max_keys is not None and max_keys < 1:
            raise ValueError(f"max_keys must be at least 1, got {max_keys}")
        self.factory = factory
        self.max_keys = max_keys
        self._live: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()
        # evicted keys: their state as plain-data bytes (in memory, or where ``saved`` keeps them)
        self._saved: MutableMapping[Hashable, bytes] = saved if saved is not None else {}
        # every key seen, in the order it first came (a dict keeps it; no value: one entry per key, which a
        # run with --max-keys holds for every evicted key too)
        self._order: dict[Hashable, None] = {}
        # live keys restored from saved bytes that are still kept: the explainer's state_version then (a key
        # not in it, live, has no saved bytes; one in it is evicted without being serialised if unchanged)
        self._clean: dict[Hashable, Any] = {}
        self.evictions = 0

    def get(self, key: Hashable) -> Any:
        """The explainer of ``key``: live, restored from its saved state, or new."""
        explainer = self._live.get(key)
        if explainer is not None:
            self._live.move_to_end(key)
            return explainer
        explainer = self.factory(key)
        saved = self._saved.get(key)
        if saved is not None:
            from ipfi_cli.core.plain_state import unpack

            explainer.load_state_dict(unpack(saved))
            version = _version(explainer)
            if version is None:
                del self._saved[key]
            else:  # its saved bytes stay: evicted again unchanged, it is not serialised nor written again
                self._clean[key] = version
        self._order.setdefault(key, None)
        self._live[key] = explainer
        if self.max_keys is not None:
            while len(self._live) > self.max_keys:
                self._evict()
        return explainer

    def peek(self, key: Hashable) -> Any:
        """``key``'s explainer to read: the live one, or one restored from its saved state that is
        not kept (nothing is evicted or written for it; the keys' recency is unchanged)."""
        explainer = self._live.get(key)
        if explainer is not None:
            return explainer
        saved = self._saved[key]  # a KeyError for a key never seen
        from ipfi_cli.core.plain_state import unpack

        explainer = self.factory(key)
        explainer.load_state_dict(unpack(saved))
        return explainer

    def adopt(self, key: Hashable, explainer: Any) -> None:
        """Take ``explainer``, fed elsewhere (another process), as ``key``'s; it is the most recent."""
        self._saved.pop(key, None)
        self._clean.pop(key, None)
        self._order.setdefault(key, None)
        self._live[key] = explainer
        self._live.move_to_end(key)
        if self.max_keys is not None:
            while len(self._live) > self.max_keys:
                self._evict()

    def _evict(self) -> None:
        from ipfi_cli.core.plain_state import pack

        key, explainer = self._live.popitem(last=False)
        loaded = self._clean.pop(key, None)
        if loaded is None or loaded != _version(explainer) or key not in self._saved:
            self._saved[key] = pack(explainer.state_dict())
        self.evictions += 1

    def seen(self, key: Hashable) -> bool:
        """Whether ``key`` has come (live or saved)."""
        return key in self._order

    def forget(self, key: Hashable) -> None:
        """Drop ``key``, which :meth:`get` made new and nothing fed: as if it never came."""
        if key in self._saved or key in self._clean:
            raise ValueError(f"key {key!r} has a saved state: it is not new")
        self._live.pop(key, None)
        self._order.pop(key, None)

    @property
    def n_live(self) -> int:
        return len(self._live)

    def keys(self) -> list[Hashable]:
        """Every key seen, in the order they first came."""
        return list(self._order)

    def state(self, key: Hashable) -> dict[str, Any]:
        """The state of ``key``'s explainer (live or saved) as plain data."""
        if key in self._live:
            return cast(dict[str, Any], self._live[key].state_dict())
        from ipfi_cli.core.plain_state import unpack

        return cast(dict[str, Any], unpack(self._saved[key]))  # what _evict saved: a state_dict()

    def state_dict(self) -> dict[str, Any]:
        """Every key's state, in the order the keys first came (plain data)."""
        return {"keys": [[key, self.state(key)] for key in self.keys()], "evictions": self.evictions}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data: every key saved, none live until it comes."""
        from ipfi_cli.core.plain_state import pack

        self._live.clear()
        self._saved.clear()
        self._clean.clear()
        for key, value in state["keys"]:
            self._saved[_key(key)] = pack(value)
        self._order = dict.fromkeys(_key(key) for key, _ in state["keys"])
        self.evictions = int(state.get("evictions", 0))


def _version(explainer: Any) -> Any:
    """What changes whenever ``explainer``'s state does (its ``state_version``), or ``None`` if it does not say."""
    version = getattr(explainer, "state_version", None)
    return version() if callable(version) else None


def _key(key: Any) -> Hashable:
    return tuple(key) if isinstance(key, list) else key
