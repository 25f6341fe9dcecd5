"""Start a command as a terminal starts its foreground job, so that Ctrl-C reaches it.

A test run started in the background (``pytest ... &``), and pytest-xdist's workers,
ignore SIGINT, and a child inherits that: Python then installs no KeyboardInterrupt
and the command never hears Ctrl-C. The wrapper puts SIGINT back at its default,
then replaces itself with the command.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

_WRAPPER = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


def as_from_a_terminal(command: Sequence[str]) -> list[str]:
    """Return the argv that runs ``command`` (executable path first) with SIGINT at default."""
    return [sys.executable, "-c", _WRAPPER, *command]
