"""Per-worker response times: how long each worker's reply took, and who is persistently slow.

Slow is not lying. A worker whose reply comes after a round closed is counted,
never judged: its replies are compared as any other's when they arrive in time,
and being slow is never a detection event, never in the review queue, never a
reason to ban. This module only measures and words it.

A round leaves one :class:`WorkerResponse` per worker it dispatched work to
(:func:`round_responses`, from the round's
:class:`~phalanx.collect.pieces.Collection`): ``kept`` (its reply arrived by the
close), ``late`` (after it: the time is known) or ``missing`` (nothing came: no
time). A worker's time is the arrival of its *last* piece, so a reply sent as one
message per file takes as long as its slowest message, and one a compute budget
cut short as long as what it sent. A reply the checks refused responded when it
arrived: refused is not missing (the refusal is an event of its own).

Over a run, :func:`summarize` (or :func:`summarize_histories`, over each
worker's :class:`History`) gives each worker its rounds given work, the
mean, median and 90th percentile of its known times, its late and missing
counts, and whether it is **persistently slow**:

    A worker is persistently slow when, among its last ``WINDOW`` (5) rounds
    given work, at least ``SLOW_ROUNDS`` (3) were *slow rounds*: rounds whose
    reply never arrived, or took at least ``SLOW_RATIO`` (3) times the run's
    median response (the median of every known time of the run, every worker
    and round).

Why this rule: one or two slow rounds are noise (a round's own variation, a
worker away once); three of the last five is most of its recent work, and
counting only recent rounds lets a worker that got faster lose the mark within
three rounds. The threshold is relative to the run's own median, so it holds
at any scale of model, data or hardware; three times is beyond what a round's
variation gives an ordinary worker at moderate spread, while a persistent
straggler of the systems model (five times slower to compute by default)
crosses it once computing is most of a reply's time. It looks at
times, not at the close: under ``fastest_k`` the workers just beyond the k-th
are late every round without being slow, and under ``all``, which waits for
everyone, nobody is late while a straggler still holds every round up; both
are judged by how long they took. A missing reply counts as slower than any.

Simulated rounds (``systems.enabled``) are timed by the systems model; deployed
rounds by real arrival times. A deployed round stops listening once its policy
closes it, so a worker still computing is ``missing`` when the round is recorded; a
reply that then comes during one of the next rounds (the transport recognises
replies to its last eight exchanges, :data:`phalanx.flower.transport.LATE_WINDOW`)
is a :class:`LateResponse`, recorded onto that round's response, which becomes
``late`` with its time (with one message per file, a worker whose first files came
by the close and the rest after it becomes ``late`` with its last file's time). A
reply that never comes, or comes after the run ended, stays ``missing``. The time of
a late reply is counted from when its task went out (for a worker that lost the
model and was sent it again mid-round, from that second sending) to when the
transport heard it: the transport pulls replies only during an exchange, so a reply
that came between rounds is heard when the next round's exchange begins, and its
time is overstated by at most that gap (the detection, aggregation, evaluation and
recording of the round in between). The link gives no trustworthy time of arrival (a
reply's own timestamp is the worker's clock); the gap is small beside a straggler's
delay, but a worker just beyond the close can look up to one round's overhead slower
than it was.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from phalanx.collect.pieces import Collection

ResponseStatus = Literal["kept", "late", "missing"]
"""A response arrived by the round's close, after it, or never."""

STATUSES: tuple[str, ...] = get_args(ResponseStatus)

WINDOW = 5
"""Rounds given work, the latest, that decide whether a worker is persistently slow."""
SLOW_ROUNDS = 3
"""Slow rounds in the window that make a worker persistently slow."""
SLOW_RATIO = 3.0
"""A reply this many times the run's median response, or longer, makes a slow round."""


@dataclass(frozen=True)
class WorkerResponse:
    """One dispatched worker's response in one round.

    Parameters
    ----------
    worker : int
        The worker's index in the run.
    seconds : float or None
        When its last piece arrived, in seconds since the round started; ``None``
        exactly when ``status`` is ``"missing"``.
    status : {"kept", "late", "missing"}
        Arrived by the round's close, after it, or never (whole).
    client_id : str, optional
        The client behind the worker, when known.
    """

    worker: int
    seconds: float | None
    status: ResponseStatus
    client_id: str | None = None

    def __post_init__(self) -> None:
        # Times come from the coordinator's clock or the systems model, never from a
        # worker: a bad one is the host's bug, so it raises rather than being stored.
        if isinstance(self.worker, bool) or not isinstance(self.worker, int) or self.worker < 0:
            raise ValueError(f"a response's worker must be an int >= 0, got {self.worker!r}")
        if self.status not in STATUSES:
            raise ValueError(f"a response's status must be one of {STATUSES}, got {self.status!r}")
        if (self.seconds is None) != (self.status == "missing"):
            raise ValueError(
                f"a missing response has no time and any other has one; got status "
                f"{self.status!r} with seconds {self.seconds!r}"
            )
        if self.seconds is not None and not (
            isinstance(self.seconds, int | float)
            and not isinstance(self.seconds, bool)
            and math.isfinite(self.seconds)
            and self.seconds >= 0
        ):
            raise ValueError(f"a response's time must be finite and >= 0, got {self.seconds!r}")


@dataclass(frozen=True)
class LateResponse:
    """A reply to an earlier round that came after that round had closed (deployed rounds).

    Parameters
    ----------
    round : int
        The round whose task it answered.
    worker : int
        The worker.
    seconds : float
        How long after its task went out it came.
    """

    round: int
    worker: int
    seconds: float

    def __post_init__(self) -> None:
        # The transport's clock, never the worker's: a bad value is the host's bug.
        for name in ("round", "worker"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"a late response's {name} must be an int >= 0, got {value!r}")
        if isinstance(self.seconds, bool) or not (
            isinstance(self.seconds, int | float)
            and math.isfinite(self.seconds)
            and self.seconds >= 0
        ):
            raise ValueError(
                f"a late response's time must be finite and >= 0, got {self.seconds!r}"
            )


def round_responses(
    collection: Collection,
    dispatched: Iterable[int],
    *,
    clients: Mapping[int, str] | None = None,
    answered: Mapping[int, float] | None = None,
) -> tuple[WorkerResponse, ...]:
    """Return the response of every dispatched worker of a round, by worker.

    Parameters
    ----------
    collection : Collection
        The round's pieces as its policy split them.
    dispatched : iterable of int
        The workers given work this round. Pieces of other workers (replies
        nobody asked for, which the checks refuse) are no response.
    clients : mapping of int to str, optional
        Worker -> client id, to name the client of each response.
    answered : mapping of int to float, optional
        Worker -> when its reply arrived, for every reply that arrived: one the
        checks refused leaves no piece, yet it did respond then (its refusal is an
        event of its own).

    Returns
    -------
    tuple of WorkerResponse
        ``missing`` for a worker with no piece and no reply; otherwise its last
        piece's time (a worker whose compute budget cut some files answered with the
        others), or its refused reply's, ``late`` if it came after the close, else
        ``kept``.
    """
    late = {p.worker for p in collection.late}
    last: dict[int, float] = {}
    for piece in (*collection.kept, *collection.late):
        if piece.time >= last.get(piece.worker, 0.0):
            last[piece.worker] = piece.time
    found = clients or {}
    replied = answered or {}
    responses = []
    for worker in sorted(set(dispatched)):
        client = found.get(worker)
        seconds = last.get(worker, replied.get(worker))
        if seconds is None:
            responses.append(WorkerResponse(worker, None, "missing", client))
        else:
            after = worker in late or seconds > collection.closed_at
            status: ResponseStatus = "late" if after else "kept"
            responses.append(WorkerResponse(worker, seconds, status, client))
    return tuple(responses)


def settle_late(
    responses: Iterable[tuple[int, WorkerResponse]], late: Iterable[LateResponse]
) -> list[tuple[int, WorkerResponse]]:
    """Return a run's responses with each late reply recorded onto its round, as the store does.

    Parameters
    ----------
    responses : iterable of (int, WorkerResponse)
        Responses with their round numbers.
    late : iterable of LateResponse
        Replies that came after their rounds closed. Each turns its round's
        ``missing`` response of that worker ``late``, with its time, and a response
        that has a time (a worker whose first files came by the close and the rest
        after it, one message per file) ``late`` with the later time; one that
        matches no response, or comes no later than the time it has, changes nothing.

    Returns
    -------
    list of (int, WorkerResponse)
        In the order given.
    """
    came: dict[tuple[int, int], float] = {}
    for r in late:  # the latest of several for one response counts, as in the store
        key = (r.round, r.worker)
        came[key] = max(came.get(key, r.seconds), r.seconds)
    settled = []
    for t, response in responses:
        seconds = came.get((t, response.worker))
        if seconds is not None and (response.seconds is None or seconds > response.seconds):
            response = WorkerResponse(response.worker, seconds, "late", response.client_id)
        settled.append((t, response))
    return settled


def median(values: Iterable[float]) -> float | None:
    """Return the median (the mean of the middle two of an even count); ``None`` for none."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return None
    middle = n // 2
    return ordered[middle] if n % 2 else ordered[middle - 1] / 2 + ordered[middle] / 2


def p90(values: Iterable[float]) -> float | None:
    """Return the 90th percentile by nearest rank: a value that occurred; ``None`` for none.

    The smallest value that at least 90 % of the values are at most, so one slow
    reply in ten or fewer never moves it above the rest.
    """
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[math.ceil(0.9 * len(ordered)) - 1]


def mean(values: Sequence[float]) -> float | None:
    """Return the mean without overflowing on huge values; ``None`` for none."""
    if not values:
        return None
    return math.fsum(v / len(values) for v in values)


def seconds_text(seconds: float | None) -> str:
    """Return a time as a person reads it: ``"41.2 s"``, ``"0.031 s"``, ``"1,204 s"``."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    if seconds >= 100:
        return f"{seconds:,.0f} s"
    if seconds >= 1:
        return f"{seconds:.1f} s"
    return f"{seconds:.2g} s"


@dataclass(frozen=True)
class ResponseSummary:
    """One worker's responses over a run.

    Attributes
    ----------
    worker : int
        The worker.
    client_id : str or None
        Its client, as its latest response names it.
    rounds : int
        Rounds it was given work (one response each).
    kept, late, missing : int
        Of them: replies that arrived by the close, after it, never.
    mean_s, median_s, p90_s : float or None
        Of its known times (kept and late); ``None`` when it never replied.
    recent : int
        Rounds in its window: its last ``WINDOW`` rounds given work, or fewer.
    slow_rounds : int
        Of them, rounds whose reply never arrived or took at least ``SLOW_RATIO``
        times the run's median response.
    recent_late, recent_missing : int
        Of them, rounds whose reply was late, missing.
    run_median_s : float or None
        The run's median response, which ``slow_rounds`` was counted against.
    """

    worker: int
    client_id: str | None
    rounds: int
    kept: int
    late: int
    missing: int
    mean_s: float | None
    median_s: float | None
    p90_s: float | None
    recent: int
    slow_rounds: int
    recent_late: int
    recent_missing: int
    run_median_s: float | None

    @property
    def slow(self) -> bool:
        """Whether the worker is persistently slow: ``slow_rounds >= SLOW_ROUNDS``."""
        return self.slow_rounds >= SLOW_ROUNDS

    @property
    def reason(self) -> str | None:
        """Why it is slow, in words that follow "Worker N" (``None`` when it is not)."""
        return _slow_words(self) if self.slow else None

    @property
    def slow_reason(self) -> str | None:
        """Why the worker is slow, as a sentence (``None`` when it is not)."""
        return f"Worker {self.worker} {self.reason}" if self.reason else None


@dataclass(frozen=True)
class RunResponseTimes:
    """Every worker's responses over a run, and the run's median response.

    Attributes
    ----------
    median_s : float or None
        Median of every known time of the run; ``None`` when nothing arrived.
    workers : tuple of ResponseSummary
        One per worker with a response, by worker.
    """

    median_s: float | None
    workers: tuple[ResponseSummary, ...]

    @property
    def slow(self) -> tuple[ResponseSummary, ...]:
        """The persistently slow workers, by worker."""
        return tuple(w for w in self.workers if w.slow)


def is_slow_round(seconds: float | None, run_median: float | None) -> bool:
    """Return whether a reply makes a slow round: missing, or ``SLOW_RATIO`` x the median or more.

    With no known time in the run (``run_median`` ``None``) only a missing reply
    is slow; a time above a run median of 0 is slow.
    """
    if seconds is None:
        return True
    if run_median is None:
        return False
    return seconds > 0 and seconds >= SLOW_RATIO * run_median


@dataclass
class History:
    """One worker's responses over a run, in round order, as plain columns.

    What :func:`summary_of` reads; the store fills it from its rows without making
    a :class:`WorkerResponse` of each (its CHECKs already hold what the class checks).

    Attributes
    ----------
    seconds : list of float or None
        Each response's time (``None``: missing), oldest round first.
    statuses : list of str
        Each response's status, in the same order.
    client_id : str or None
        The client its latest response names.
    """

    seconds: list[float | None] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    client_id: str | None = None

    def add(self, seconds: float | None, status: str, client_id: str | None = None) -> None:
        """Append the response of a later round."""
        self.seconds.append(seconds)
        self.statuses.append(status)
        if client_id is not None:
            self.client_id = client_id


def summary_of(worker: int, history: History, run_median: float | None) -> ResponseSummary:
    """Summarise one worker's responses over a run.

    Parameters
    ----------
    worker : int
        The worker.
    history : History
        Its responses, oldest round first.
    run_median : float or None
        The run's median response (:func:`median` of every known time of the run).

    Returns
    -------
    ResponseSummary
    """
    statuses = history.statuses
    times = [s for s in history.seconds if s is not None]
    recent = history.seconds[-WINDOW:]
    recent_statuses = statuses[-WINDOW:]
    return ResponseSummary(
        worker=worker,
        client_id=history.client_id,
        rounds=len(statuses),
        kept=statuses.count("kept"),
        late=statuses.count("late"),
        missing=statuses.count("missing"),
        mean_s=mean(times),
        median_s=median(times),
        p90_s=p90(times),
        recent=len(recent),
        slow_rounds=sum(is_slow_round(s, run_median) for s in recent),
        recent_late=recent_statuses.count("late"),
        recent_missing=recent_statuses.count("missing"),
        run_median_s=run_median,
    )


def summarize_histories(histories: Mapping[int, History]) -> RunResponseTimes:
    """Summarise every worker's history, against the median of every known time of them."""
    run_median = median(s for h in histories.values() for s in h.seconds if s is not None)
    return RunResponseTimes(
        median_s=run_median,
        workers=tuple(summary_of(w, histories[w], run_median) for w in sorted(histories)),
    )


def worker_history(responses: Iterable[tuple[int, WorkerResponse]]) -> History:
    """Return the history of responses given with their round numbers, in any order."""
    history = History()
    for _, response in sorted(responses, key=lambda item: item[0]):
        history.add(response.seconds, response.status, response.client_id)
    return history


def summarize(responses: Iterable[tuple[int, WorkerResponse]]) -> RunResponseTimes:
    """Summarise a run's responses per worker.

    Parameters
    ----------
    responses : iterable of (int, WorkerResponse)
        Every response of the run with its round number (one per worker and
        round), in any order.

    Returns
    -------
    RunResponseTimes
        The run's median response and one summary per worker, by worker.
    """
    by_worker: defaultdict[int, list[tuple[int, WorkerResponse]]] = defaultdict(list)
    for t, response in responses:
        by_worker[response.worker].append((t, response))
    return summarize_histories({w: worker_history(h) for w, h in by_worker.items()})


def _slow_words(summary: ResponseSummary) -> str:
    """Say why a worker is slow, in words that follow "Worker N"."""
    missing, recent = summary.recent_missing, summary.recent
    took = summary.slow_rounds - missing
    ratio = f"{SLOW_RATIO:g} times the run's median response"
    if not missing:
        what = f"took at least {ratio}"
    elif not took:
        what = "sent no reply"
    else:
        what = f"took at least {ratio}, or sent no reply,"
    span = f"its last {recent} rounds" if summary.rounds > recent else f"its {recent} rounds"
    words = f"{what} in {summary.slow_rounds} of {span}"
    notes = []
    if summary.recent_late:
        notes.append(f"late in {summary.recent_late}")
    if missing and took:
        notes.append(f"no reply in {missing}")
    if notes:
        words += f" ({', '.join(notes)})"
    if summary.median_s is not None and summary.run_median_s is not None:
        words += (
            f"; its median response is {seconds_text(summary.median_s)} "
            f"against the run's {seconds_text(summary.run_median_s)}"
        )
    return words + "."
