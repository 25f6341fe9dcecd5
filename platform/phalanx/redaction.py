"""Host paths and addresses taken out of text that viewers read: a run's error, an event's reason.

A run's ``error`` and its detection events are shown to every viewer of the
API and the dashboard, while the paths in an exception's message tell where
files are (or are not) on the coordinator's host. Every absolute POSIX path in
such text is replaced by ``.../`` and its last component, which still tells
the operator which file was meant (``.../mnist.npz[x_train]``) without telling
where it lives. Network addresses (what a worker says of its own host, or of
the coordinator's) are replaced by ``<address>``. The full message stays in the
coordinator's own log.
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


_IPV4 = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b")
_IPV6 = re.compile(
    r"(?<![\w:])\[?(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}\]?(?::\d{1,5})?(?![\w:])"
)


def redact(text: str) -> str:
    """Take host paths (:func:`redact_host_paths`) and network addresses out of ``text``.

    Parameters
    ----------
    text : str
        Anything a worker, Flower or an exception said.

    Returns
    -------
    str
        The text with each absolute path shortened to ``.../`` and its last
        component, and each IPv4 or IPv6 address (with its port) as ``<address>``.
    """
    text = _IPV4.sub("<address>", redact_host_paths(text))
    return _IPV6.sub(_ipv6_or_not, text)


def _ipv6_or_not(match: re.Match[str]) -> str:
    # Clock times (12:30:45) look alike; an IPv6 address has "::" or seven colons.
    word = match.group(0)
    return "<address>" if "::" in word or word.count(":") >= 7 else word


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
