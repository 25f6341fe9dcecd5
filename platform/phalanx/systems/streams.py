"""The seeded random streams of the systems model, one per purpose and key.

Every draw of the model comes from a stream keyed by a purpose (a domain
constant) and the integers it depends on, e.g. ``(seed, worker, round)``. So a
worker's draw never depends on other workers, on how many there are, or on the
order in which draws are asked for.
"""

from __future__ import annotations

import numpy as np

SPEED = 0x5359_5301
"""Each worker's compute speed, keyed by ``(seed, worker)``."""
STRAGGLERS = 0x5359_5302
"""The choice of persistent stragglers, keyed by ``(seed,)``."""
ROUND_FACTOR = 0x5359_5303
"""Each worker's per-round compute factor, keyed by ``(seed, worker, round)``."""
DROPOUT = 0x5359_5304
"""Whether a worker misses a round, keyed by ``(seed, worker, round)``."""
ON_OFF = 0x5359_5305
"""Each worker's periods on and off, keyed by ``(seed, worker)``."""


def stream(domain: int, **key: int) -> np.random.Generator:
    """Return the generator of ``domain`` at ``key``.

    For example ``stream(DROPOUT, seed=1, worker=2, round_=3)``; the order of
    the keywords does not matter.

    Raises
    ------
    ValueError
        When a key is negative, naming it.
    """
    check_key(**key)
    return np.random.default_rng(
        np.random.SeedSequence([domain, *(key[name] for name in sorted(key))])
    )


def check_key(**key: int) -> None:
    """Refuse a negative key of a stream, naming it (``round_`` is called ``round``)."""
    for name, value in key.items():
        if value < 0:
            raise ValueError(f"{name.rstrip('_')} must be >= 0, got {value}")
