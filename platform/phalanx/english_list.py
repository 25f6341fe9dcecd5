"""Lists in plain English: "worker 3", "workers 0 and 5", "files 1, 2 and 4".

Detection's evidence text and the dashboard name workers and files the same
way, so a reviewer reads one style everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Numbers (or runs of numbers) named before a list ends in "and N more".
SHOWN = 10
#: A list is cut short only when that leaves out more than this many numbers:
#: "and 2 more" would hide what fits on the line.
MIN_LEFT_OUT = 5
#: Consecutive numbers from this many on are named as a run, "3 to 9" (shorter
#: runs read as well listed).
MIN_RUN = 5


def join_words(words: Sequence[str]) -> str:
    """Join words as in English: ``"a"``, ``"a and b"``, ``"a, b and c"`` (``""`` for none)."""
    return " and ".join([", ".join(words[:-1]), words[-1]]) if len(words) > 1 else "".join(words)


def name_numbers(singular: str, plural: str, numbers: Sequence[int], *, shown: int = SHOWN) -> str:
    """Name numbered things in English, the noun agreeing with their count.

    Runs of at least :data:`MIN_RUN` consecutive numbers (in the order given) are
    named as ranges. A list ends in "and N more" only when N, the numbers left out,
    is above :data:`MIN_LEFT_OUT`; otherwise every number is named.

    Parameters
    ----------
    singular, plural : str
        The noun, e.g. ``"worker"`` and ``"workers"``.
    numbers : Sequence[int]
        What to name, in the order given.
    shown : int
        How many numbers or runs to name before ending in "and N more".

    Returns
    -------
    str
        ``"worker 3"``, ``"workers 0 and 5"``, ``"workers 0, 1, 2, 3 and 5 to 14"``,
        ``"workers 0, 2, 4 and 20 more"``.

    Examples
    --------
    >>> name_numbers("file", "files", [4, 7, 9])
    'files 4, 7 and 9'
    >>> name_numbers("Worker", "Workers", [0, 1, 2, 3, *range(5, 15)])
    'Workers 0, 1, 2, 3 and 5 to 14'
    >>> name_numbers("Worker", "Workers", list(range(0, 24, 2)), shown=3)
    'Workers 0, 2, 4 and 9 more'
    >>> name_numbers("Worker", "Workers", list(range(0, 10, 2)), shown=3)
    'Workers 0, 2, 4, 6 and 8'
    """
    if len(numbers) == 1:
        return f"{singular} {numbers[0]}"
    runs = _runs(numbers)
    kept = runs[:shown]
    left_out = len(numbers) - sum(len(run) for run in kept)
    if left_out <= MIN_LEFT_OUT:
        kept, left_out = runs, 0
    words = [_run_words(run) for run in kept]
    if left_out:
        return f"{plural} {', '.join(words)} and {left_out} more"
    return f"{plural} {join_words(words)}"


def _runs(numbers: Sequence[int]) -> list[list[int]]:
    """Split numbers into runs of consecutive ones (each run kept only if long enough)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    split: list[list[int]] = []
    for run in runs:
        split += [run] if len(run) >= MIN_RUN else [[n] for n in run]
    return split


def _run_words(run: Sequence[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]} to {run[-1]}"
