"""Hypothesis profiles for the property tests: reproducible and time-bounded by default.

Setting meanings as hypothesis 6.170 documents them (hypothesis/_settings.py): `derandomize`
seeds the generator from a hash of the test function, so every run tests the same cases until
hypothesis, Python or the test changes; `database=None` stores no failing examples between
runs; `deadline` bounds one test case's duration.

`ci` (the default, used by `make test`): derandomized, so every run tries the same examples
in the same order, and no example database, so nothing from an earlier run changes what
runs; a failure prints the example and the `@reproduce_failure` blob. `explore`: random
examples and many more of them, for looking for new failures by hand:

    HYPOTHESIS_PROFILE=explore .venv/bin/python -m pytest -n 0 tests/property

Each test sets its own `max_examples` (scaled by the profile's `scale`, see :func:`examples`),
because a synthesizing example costs seconds and a validating one milliseconds.
"""

from __future__ import annotations

import os

from hypothesis import settings

SCALE = {"ci": 1, "explore": 10}
"""How many times each test's own example budget a profile runs."""

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    print_blob=True,
    # The suite's time is bounded by each test's `max_examples`; single examples are timed
    # by `deadline` where they are cheap (see the tests), not here.
    deadline=None,
)
settings.register_profile("explore", derandomize=False, database=None, print_blob=True, deadline=None)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """`n` examples under the `ci` profile, more under `explore`."""
    return n * SCALE.get(PROFILE, 1)
