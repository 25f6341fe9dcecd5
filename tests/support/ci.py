"""Whether the suite runs under CI, where a missing PostgreSQL or browser fails, not skips."""

from __future__ import annotations

import os


def in_ci() -> bool:
    """Return whether ``CI`` is set to a true value."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
