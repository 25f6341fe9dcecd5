"""Failures that are nobody's lie: a worker's own crash, and a run that cannot go on.

A worker's error text is hostile input (a Byzantine worker writes what it likes) and
may be long: a traceback with ANSI colours, host paths and addresses. What a person
reads on the dashboard is one line of it (:func:`one_line`); the whole text goes to
the coordinator's log only.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from phalanx.event_kinds import WORKER_FAULT_KINDS, EventKind
from phalanx.redaction import redact

#: Longest one-line cause kept in an event or a run's error.
MAX_CAUSE_CHARS = 300

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
# "SomeError: message" or "package.module.SomeError: message" at the start of a line.
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception)):?\s*(.*)$")
# Flower wraps a ClientApp's exception as "<class 'X'>:<'message'>".
_FLOWER_WRAPPER = re.compile(r"^<class '([\w.]+)'>:<'(.*)'>$", re.DOTALL)
_FLOWER_PREFIX = re.compile(r"^\s*Exception ClientAppException occurred\. Message:\s*")


class RunFailedError(RuntimeError):
    """The run cannot go on; the message is the one line that names the cause."""


def one_line(text: str, *, limit: int = MAX_CAUSE_CHARS) -> str:
    """Reduce an error text (a message or a whole traceback) to one readable line.

    Takes the last ``SomeError: message`` line of a traceback when there is one (the
    exception that ended it), else the last non-empty line; strips ANSI escapes and
    control, zero-width and bidi characters; redacts paths and addresses
    (:func:`~phalanx.redaction.redact`); collapses white space; and cuts the result to ``limit``
    characters.

    Parameters
    ----------
    text : str
        Anything a worker, Flower or an exception said.
    limit : int
        Longest result, an ellipsis included.

    Returns
    -------
    str
        The cause, or ``"no reason given"`` when nothing printable is left.
    """
    text = _ANSI.sub("", text)
    wrapped = _FLOWER_WRAPPER.match(text.strip())
    if wrapped:
        name, message = wrapped.groups()
        name = name.rsplit(".", 1)[-1]
        text = (
            _FLOWER_PREFIX.sub("", message)
            if name == "ClientAppException"
            else f"{name}: {message}"
        )
    lines = [_CONTROL.sub(" ", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return "no reason given"
    chosen = lines[-1]
    for line in reversed(lines):
        match = _EXCEPTION_LINE.match(line)
        if match and not match.group(1).startswith(("RayTaskError", "ClientAppException")):
            name, message = match.groups()
            chosen = f"{name}: {message}" if message else name
            break
    chosen = " ".join(redact(chosen).split())
    if len(chosen) > limit:
        chosen = chosen[: limit - 1].rstrip() + "…"
    return chosen or "no reason given"


def describe(error: BaseException) -> str:
    """Return one line naming an exception and its message (see :func:`one_line`)."""
    return one_line(f"{type(error).__name__}: {error}")


def is_interrupt(error: BaseException) -> bool:
    """Whether ``error`` stops the process on purpose (Ctrl-C, a generator closed).

    Anything else a worker's code raises is that worker's failure, ``sys.exit`` and a
    native library's panic (a ``BaseException``) included: caught for it alone, it
    cannot take down the other workers its node or process hosts.
    """
    return isinstance(error, KeyboardInterrupt | GeneratorExit)


def fault_kind(error: BaseException) -> str:
    """Return the fault kind of a worker's own failure: ``worker_error`` unless it says more.

    An exception class may name a more precise kind of :data:`WORKER_FAULT_KINDS` in a
    ``fault_kind`` class attribute (e.g. ``data_mismatch`` for a model that does not fit
    a client's data); anything else is ``worker_error``.
    """
    return fault_kind_named(getattr(type(error), "fault_kind", None))


def fault_kind_named(name: object) -> str:
    """Return ``name`` when it is a kind a worker may give its own failure, else ``worker_error``.

    What a worker names is hostile input: it can only pick among its own faults.
    """
    return str(name) if name in WORKER_FAULT_KINDS else EventKind.WORKER_ERROR.value


def failure_cause(error: BaseException) -> str:
    """Return the one line a failed run stores as its error.

    A :class:`RunFailedError` already says what happened; anything else is named by
    its type and message. Viewers read it, so paths and addresses are redacted (the
    traceback, with them, goes to the log).
    """
    if isinstance(error, RunFailedError):
        return one_line(str(error))
    return describe(error)


def common_failure(causes: Sequence[str], tasked: int) -> str | None:
    """Say why the round cannot go on when most of its tasked workers failed.

    Parameters
    ----------
    causes : sequence of str
        One line per worker that failed this round (see :func:`one_line`).
    tasked : int
        Workers given a task this round.

    Returns
    -------
    str or None
        ``None`` while at most half of the tasked workers failed: the round goes on
        without them. Otherwise one line with the count and the most common cause:
        when most workers fail, the fault is in what they share (the run's data, code
        or config, or the coordinator), not in each of them.
    """
    if tasked <= 0 or 2 * len(causes) <= tasked:
        return None
    cause, count = Counter(causes).most_common(1)[0]
    if count == len(causes):
        return f"{count} of {tasked} workers failed with the same error: {cause}"
    return f"{len(causes)} of {tasked} workers failed ({count} with: {cause})"
