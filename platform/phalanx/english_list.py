"""Lists in plain English: "worker 3", "workers 0 and 5", "files 1, 2 and 4".

Detection's evidence text and the dashboard name workers and files the same
way, so a reviewer reads one style everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Numbers named before a list ends in "and N more".
SHOWN = 10


def join_words(words: Sequence[str]) -> str:
    """Join words as in English: ``"a"``, ``"a and b"``, ``"a, b and c"`` (``""`` for none)."""
    return " and ".join([", ".join(words[:-1]), words[-1]]) if len(words) > 1 else "".join(words)


def name_numbers(singular: str, plural: str, numbers: Sequence[int], *, shown: int = SHOWN) -> str:
    """Name numbered things in English, the noun agreeing with their count.

    Parameters
    ----------
    singular, plural : str
        The noun, e.g. ``"worker"`` and ``"workers"``.
    numbers : Sequence[int]
        What to name, in the order given.
    shown : int
        How many to name before ending in "and N more".

    Returns
    -------
    str
        ``"worker 3"``, ``"workers 0 and 5"``, ``"workers 0, 1, 2 and 9 more"``.

    Examples
    --------
    >>> name_numbers("file", "files", [4, 7, 9])
    'files 4, 7 and 9'
    >>> name_numbers("Worker", "Workers", list(range(12)), shown=3)
    'Workers 0, 1, 2 and 9 more'
    """
    if len(numbers) == 1:
        return f"{singular} {numbers[0]}"
    words = [str(n) for n in numbers[:shown]]
    if len(numbers) > shown:
        return f"{plural} {', '.join(words)} and {len(numbers) - shown} more"
    return f"{plural} {join_words(words)}"
