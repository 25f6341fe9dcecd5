"""The ports Phalanx's Flower processes listen on unless told otherwise.

This module imports nothing, so the command line can show these defaults in its
help without loading the modules that start the processes.
"""

from __future__ import annotations

__all__ = ["DEFAULT_RUNTIME_PORT", "DEFAULT_SUPERLINK_PORT", "MAX_PORT"]

DEFAULT_SUPERLINK_PORT = 8000
"""The SuperLink's one HTTPS port (Fleet, Control and Runtime APIs)."""

DEFAULT_RUNTIME_PORT = 9094
"""A SuperNode's local Runtime API, for its ClientApp processes."""

MAX_PORT = 65535
"""The highest TCP port; the lowest is 1."""
