"""Host paths taken out of text that viewers read: a run's error, an event's reason.

A run's ``error`` and its detection events are shown to every viewer of the
API and the dashboard, while the paths in an exception's message tell where
files are (or are not) on the coordinator's host. Every absolute POSIX path in
such text is replaced by ``.../`` and its last component, which still tells
the operator which file was meant (``.../mnist.npz[x_train]``) without telling
where it lives. The full message stays in the coordinator's own log.
"""

from __future__ import annotations

import re

REDACTED_PREFIX = ".../"
"""What stands for the directories of a redacted path."""

# An absolute path: "/" then characters that are not blanks, quotes, brackets or
# separators, and not preceded by a word character, ".", ":", "/" or "~" (so
# "1/2", "N/A", URLs and relative paths are left alone). A blank continues the
# path when the next word holds a "/" ("/srv/my data/x.npz").
_PATH_CHARS = r"[^\s'\"`()\[\]{}<>,;:|]"
_ABSOLUTE_PATH = re.compile(
    rf"(?<![\w.:/~])/{_PATH_CHARS}+(?: (?:(?!/){_PATH_CHARS})+/{_PATH_CHARS}*)*"
)


def redact_host_paths(text: str) -> str:
    """Replace every absolute path in ``text`` by ``.../`` and its last component.

    Parameters
    ----------
    text : str
        A message, e.g. ``"DataError: /srv/data/mnist.npz[x_train]: ..."``.

    Returns
    -------
    str
        The message without host paths, e.g.
        ``"DataError: .../mnist.npz[x_train]: ..."``; text without absolute
        paths comes back unchanged.
    """
    return _ABSOLUTE_PATH.sub(_shorten, text)


def _shorten(match: re.Match[str]) -> str:
    path = match.group()
    stripped = path.rstrip(".")  # a sentence's full stop is not part of the path
    trailing = path[len(stripped) :]
    last = stripped.rstrip("/").rsplit("/", 1)[-1]
    return f"{REDACTED_PREFIX}{last}{trailing}"
