"""Client names as operators read them: visible characters only, one way to write each.

A client picks its own name when it registers, and operators tell clients apart
by it on the dashboard, in the audit log and in the CLI. So a name may not hide
text or reorder it: control, format (which include the bidirectional overrides
and isolates, and the zero-width characters), line and paragraph separators,
private-use, unassigned and surrogate code points are refused, as are blank
characters that look like a space but are not one. A name is trimmed, its
inner runs of spaces become one space, and it is stored in Unicode NFC, so the
same text typed two ways is the same name.
"""

from __future__ import annotations

import re
import unicodedata

#: Longest client name, in characters, after trimming.
MAX_CLIENT_NAME = 100
#: Unicode general categories refused anywhere in a name.
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
#: Bidirectional controls (all in category Cf; named here because they are the attack).
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
#: Letters and marks that render as nothing or as blank space.
INVISIBLE = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")

_SPACES = re.compile(" {2,}")


def describe(char: str) -> str:
    """Return ``U+XXXX (NAME)`` for a character."""
    return f"U+{ord(char):04X} ({unicodedata.name(char, 'unnamed')})"


def refused(char: str) -> bool:
    """Whether ``char`` may not appear in a client name."""
    category = unicodedata.category(char)
    return (
        char in BIDI_CONTROLS
        or char in INVISIBLE
        or category in REFUSED_CATEGORIES
        or (category == "Zs" and char != " ")
    )


def client_name(value: str) -> str:
    """Return the name as stored: trimmed, inner spaces collapsed, NFC.

    Parameters
    ----------
    value : str
        The name a client sent.

    Returns
    -------
    str
        The name to store and compare.

    Raises
    ------
    ValueError
        When it is empty, longer than :data:`MAX_CLIENT_NAME` characters, or
        holds a character :func:`refused` refuses (named in the message).
    """
    for char in value:
        if refused(char) and not char.isspace():
            raise ValueError(
                f"must not contain {describe(char)}: control, format, bidirectional and "
                "invisible characters are not allowed in a client name"
            )
    name = _SPACES.sub(" ", unicodedata.normalize("NFC", value.strip()))
    for char in name:
        if refused(char):
            raise ValueError(
                f"must not contain {describe(char)}: only the plain space (U+0020) may "
                "separate words in a client name"
            )
    if not name:
        raise ValueError("must not be empty")
    if len(name) > MAX_CLIENT_NAME:
        raise ValueError(f"must be at most {MAX_CLIENT_NAME} characters, got {len(name)}")
    return name
