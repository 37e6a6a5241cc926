"""Shared settings for the property-based fuzz tests.

Every test runs a fixed, derandomized set of examples (``derandomize=True``, no example
database), so CI sees the same inputs on every run. ``IPFI_FUZZ_SCALE=10`` multiplies the
example counts for a deeper local run (then the examples differ from CI's).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SCALE = float(os.environ.get("IPFI_FUZZ_SCALE", "1"))


def fuzz(max_examples: int) -> settings:
    """Settings for one fuzz test: reproducible, no deadline, ``max_examples`` scaled."""
    return settings(max_examples=max(1, int(max_examples * SCALE)), derandomize=SCALE == 1, database=None,
                    deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
