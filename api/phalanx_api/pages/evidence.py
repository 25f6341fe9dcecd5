"""A detection event's evidence in words a reviewer can follow.

The coordinator stores, with each flag, the evidence behind it
(:meth:`phalanx.detection.Evidence.to_dict`): a plain-English ``summary``, the
group of agreeing workers it was measured against (``agreeing``: a count and a
digest; the members are stored once with the round, and the caller passes them
in; events recorded before that list them in ``clique``), those it disagreed
with, and per disputed file every replica's digest (since the round's record keeps
the full digests, a 32-hex-digit prefix, which the caller's list of the round's
digests resolves) and each replica's relative distance to the flagged worker's
(events recorded before list every pair under ``distances``).
A refused reply stores the ``reason`` instead. This module turns both into a
headline, the summary, and one sentence and one table per file: which workers
sent what, whose digests differed, and how far apart the updates were.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phalanx.agreeing_group import AgreeingGroup
from phalanx.agreement_record import full_digest
from phalanx.english_list import name_numbers
from phalanx.event_kinds import FAULT_KINDS, FLAG_KINDS, ROUND_KINDS, EventKind

#: Each known kind in a few words.
KIND_HEADLINES: Mapping[str, str] = {
    EventKind.OUTSIDE_MAX_CLIQUE: "Disagreed with the largest group of agreeing workers",
    EventKind.MAJORITY_MINORITY: "Outside every tied largest group of agreeing workers",
    EventKind.OUTLIER: "Update far from everyone else's (single replica, weak evidence)",
    EventKind.LOW_DEGREE: "Agreed with too few workers over several rounds",
    EventKind.DISPUTES_ACROSS_ROUNDS: "Disagreed with more workers than an honest one can",
    EventKind.MALFORMED_REPLY: "Sent a reply that could not be read",
    EventKind.BAD_SHAPE: "Sent an update of the wrong size",
    EventKind.NON_FINITE: "Sent an update containing NaN or infinity",
    EventKind.BAD_SIGNATURE: "Reply signature did not verify",
    EventKind.STALE_ROUND: "Replied for an earlier round",
    EventKind.WRONG_NONCE: "Replied with the wrong round nonce",
    EventKind.UNASSIGNED_FILE: "Replied for a file it was not given",
    EventKind.NODE_ID_MISMATCH: "Replied from another Flower node than its own",
    EventKind.OVERFLOW: "Sent an update so large that the aggregate overflowed",
    EventKind.WORKER_ERROR: "Failed to compute its update (a fault, not a lie)",
    EventKind.DATA_MISMATCH: "Its own data does not fit the run's model (a fault, not a lie)",
    EventKind.UNCHECKED_REPLY: "Sent a reply the coordinator could not check",
    EventKind.TIED_GROUPS: "Largest agreeing groups tied: suspects named, disputed files left out",
    EventKind.UNPROVEN_OUTSIDERS: (
        "Outside the largest agreeing group, not proven: suspects named, disputed files left out"
    ),
    EventKind.IMPLAUSIBLE_EVALUATION: (
        "Sent an evaluation report that cannot be true (refused; no model changed)"
    ),
}

#: What a reviewer should weigh, per kind.
KIND_ADVICE: Mapping[str, str] = {
    EventKind.OUTSIDE_MAX_CLIQUE: (
        "Honest workers given the same file compute the same update, so they always agree. "
        "A worker outside the largest agreeing group sent something else; repeated rounds "
        "of this are strong evidence of an attack or a broken client."
    ),
    EventKind.MAJORITY_MINORITY: (
        "Several groups of agreeing workers were equally large and this worker belonged to "
        "none of them: it disagreed with members of every one. Disputed files were left "
        "out (or decided by majority, if the run says so); check whether it keeps "
        "happening across rounds."
    ),
    EventKind.OUTLIER: (
        "With one worker per file nothing could be compared; the flag rests on distance "
        "alone. Honest workers with unusual data can look like this: confirm only if it "
        "repeats."
    ),
    EventKind.LOW_DEGREE: (
        "Over a window of rounds this worker agreed with fewer workers than any honest "
        "worker can; it was flagged on its history rather than on one round."
    ),
    EventKind.DISPUTES_ACROSS_ROUNDS: (
        "Two honest workers always agree, so every disagreement has a liar on one side. "
        "Across the run's rounds this worker disagreed with so many different workers that, "
        "were it honest, more workers would be lying than the run assumes at most. Its "
        "later replies are ignored. Colluders who lie only where they can win a file are "
        "caught this way; a tighter detection.max_adversaries catches them sooner."
    ),
    EventKind.TIED_GROUPS: (
        "Colluders can disagree only with chosen honest workers, so that two groups of "
        "agreeing workers are equally large and the round cannot tell which is honest. "
        "Nobody was flagged for it and the disputed files were left out. The suspects "
        "include the honest workers the colluders targeted; the evidence across rounds "
        "(disputes_across_rounds) separates them as the rounds go on. Confirming this "
        "notice bans nobody."
    ),
    EventKind.UNPROVEN_OUTSIDERS: (
        "Two colluders who share a file with one honest worker can outvote it, leaving the "
        "honest worker alone outside the largest agreeing group: one round cannot tell that "
        "from a lone liar. Nobody was flagged for it and the disputed files were left out. "
        "A liar keeps disputing different workers and is proven across rounds "
        "(disputes_across_rounds); an honest worker is not. Confirming this notice bans "
        "nobody."
    ),
    EventKind.IMPLAUSIBLE_EVALUATION: (
        "In a local-data run every client reports the global model's loss, accuracy and "
        "sample count on its own test split. This report held a value no client evaluating "
        "a finite model can measure (an accuracy outside [0, 1], a NaN or negative loss, a "
        "count that is not a whole number from 1), so it counted for nothing. Its training "
        "updates are judged apart. A broken client can send one; repeated reports point at "
        "a client that lies. Confirming this notice bans nobody."
    ),
    EventKind.OVERFLOW: (
        "The update's norm is many orders of magnitude beyond any gradient step: with it, "
        "the aggregate left float32's range. Honest training that diverged fails the whole "
        "run instead, so one or a few such workers point at crafted updates."
    ),
}

#: Advice shown for a fault: the worker delivered nothing usable, and did not lie.
FAULT_ADVICE = (
    "The worker's own computation failed (its code, its data or its machine), or the "
    "coordinator could not check what it sent; nothing of it reached the model. This is "
    "not evidence of an attack: confirming records that you saw it and never bans the "
    "client. Many workers failing alike fails the whole run instead."
)

#: Advice shown for a refused reply of any kind.
REJECTION_ADVICE = (
    "The coordinator refused this reply before comparing it, so it never reached the model. "
    "An honest client can send one by accident (a restart, a clock or network problem); "
    "repeated refusals or a bad signature point at tampering."
)

#: How to read a relative distance, shown beside the tables.
DISTANCE_NOTE = (
    "Relative distance is |a − b| / |b| between two workers' updates for the same file: "
    "0 means identical, 1 means the difference is as large as the update itself. Honest "
    "replicas stay below the tolerance."
)


@dataclass(frozen=True)
class ReplicaRow:
    """One worker's replica of a disputed file.

    Attributes
    ----------
    worker : int
        The worker that sent it.
    digest : str
        SHA-256 of its payload as the event stores it: a prefix, or the whole digest
        in events recorded before the round kept them (empty if not recorded).
    group : int
        Replicas with the same digest share a group: 1 for the value the model used,
        2 for the flagged worker's, 3 and up for any other.
    is_subject : bool
        Whether this is the flagged worker's replica.
    distance : float or None
        Relative distance to the flagged worker's replica (``None`` if not computed).
    agrees_with_subject : bool or None
        Whether it agreed with the flagged worker's replica within the tolerance.
    accepted : bool
        Whether this replica became the file's value.
    full_digest : str
        The whole digest: found in the round's record by ``digest``, else ``digest``.
    """

    worker: int
    digest: str
    group: int
    is_subject: bool
    distance: float | None
    agrees_with_subject: bool | None
    accepted: bool
    full_digest: str = ""


@dataclass(frozen=True)
class FileRecord:
    """A disputed file: its replicas and one sentence saying what happened."""

    file: int
    sentence: str
    replicas: tuple[ReplicaRow, ...]
    accepted_from: int | None


@dataclass(frozen=True)
class Explanation:
    """Everything the review queue shows about one event.

    Attributes
    ----------
    headline : str
        The kind in a few words.
    summary : str
        The stored plain-English paragraph (or one written here for refused replies).
    advice : str
        What a reviewer should weigh.
    files : tuple of FileRecord
        The disputed files (empty for refused replies and degree flags).
    facts : tuple of (str, str)
        Short labelled facts: who it was measured against, the tolerance, ...
    is_rejection : bool
        Whether this is a refused reply rather than a flag from comparing replicas.
    """

    headline: str
    summary: str
    advice: str
    files: tuple[FileRecord, ...]
    facts: tuple[tuple[str, str], ...]
    is_rejection: bool


def headline(kind: str) -> str:
    """Return a kind in a few words (unknown kinds are spelled out from their name)."""
    return KIND_HEADLINES.get(kind, kind.replace("_", " ").capitalize())


def is_rejection(kind: str) -> bool:
    """Whether ``kind`` means a reply refused or never delivered rather than a flag."""
    return kind not in FLAG_KINDS and kind not in ROUND_KINDS


def explain(
    kind: str,
    worker: int | None,
    evidence: Mapping[str, Any],
    agreeing: Sequence[int] | None = None,
    digests: Sequence[str] = (),
) -> Explanation:
    """Explain one detection event.

    Parameters
    ----------
    kind : str
        The event's kind.
    worker : int or None
        The worker it names.
    evidence : Mapping[str, Any]
        The stored evidence; missing or malformed parts are skipped, never fatal.
    agreeing : sequence of int, optional
        The agreeing group stored with the event's round
        (:func:`phalanx.store.rounds.agreeing_groups`); shown when it matches the
        evidence's digest.
    digests : sequence of str, optional
        The full digests stored with the event's round, sorted
        (:func:`phalanx.store.rounds.flag_digests`): each replica's stored prefix is
        shown with the full digest it names.

    Returns
    -------
    Explanation
        Headline, summary, advice, per-file records and facts.
    """
    name = "this worker" if worker is None else f"worker {worker}"
    if is_rejection(kind):
        reason = _text(evidence.get("reason")) or "no reason was recorded"
        fault = kind in FAULT_KINDS
        said = (
            f"{name.capitalize()} failed: {reason}."
            if fault
            else (f"The coordinator refused {name}'s reply: {reason}.")
        )
        return Explanation(
            headline=headline(kind),
            summary=_text(evidence.get("summary")) or said,
            advice=KIND_ADVICE.get(kind) or (FAULT_ADVICE if fault else REJECTION_ADVICE),
            files=(),
            facts=(("Reason", reason),),
            is_rejection=True,
        )
    tolerance = _number(evidence.get("tolerance"))
    files = tuple(
        _file_record(item, worker, tolerance, digests)
        for item in _dicts(evidence.get("files"))
        if _integer(item.get("file")) is not None
    )
    facts: list[tuple[str, str]] = []
    group, group_members = _agreeing_group(evidence, agreeing)
    if group:
        facts.append(("Agreeing group", group))
    disagreed = _integers(evidence.get("disagreed_with"))
    if disagreed and group_members is not None and set(disagreed) == set(group_members):
        facts.append(("Disagreed with", "every worker of the agreeing group"))
    elif disagreed:
        facts.append(("Disagreed with", name_numbers("worker", "workers", disagreed)))
    mode = _text(evidence.get("mode"))
    if mode:
        compared = "exact digests" if mode == "exact" else "relative distance"
        if tolerance is not None and mode != "exact":
            compared += f" under tolerance {tolerance:g}"
        facts.append(("Compared by", compared))
    score, threshold = _number(evidence.get("score")), _number(evidence.get("threshold"))
    if score is not None:
        limit = "" if threshold is None else f" (threshold {threshold:.3g})"
        facts.append(("Score", f"{score:.3g}{limit}"))
    ratio, floor = _number(evidence.get("distance_ratio")), _number(evidence.get("ratio_threshold"))
    if ratio is not None:
        # Flagged only beyond the floor (ratio > floor), as the evidence's summary says.
        over = "" if floor is None else f" (over {floor:.3g})"
        facts.append(("Distance to the median update", f"{ratio:.3g} times the typical one{over}"))
    norm, median = _number(evidence.get("norm")), _number(evidence.get("median_norm"))
    if norm is not None:
        facts.append(("Update norm", f"{norm:.3g}"))
    if median is not None:
        facts.append(("Median accepted norm", f"{median:.3g}"))
    suspects = _integers(evidence.get("suspects"))
    if suspects:
        facts.append(("Suspects", name_numbers("worker", "workers", suspects)))
    left_out = [
        f
        for f in (_integer(item.get("file")) for item in _dicts(evidence.get("left_out")))
        if f is not None
    ]
    if left_out:
        facts.append(("Files left out", name_numbers("file", "files", left_out)))
    partners = [
        w
        for w in (_integer(item.get("worker")) for item in _dicts(evidence.get("partners")))
        if w is not None
    ]
    if partners:
        facts.append(("Disagreed with", name_numbers("worker", "workers", partners)))
    rounds = _integer(evidence.get("rounds"))
    if rounds is not None:
        facts.append(("Window", f"{rounds} round{'' if rounds == 1 else 's'}"))
    return Explanation(
        headline=headline(kind),
        summary=_text(evidence.get("summary")) or f"{name.capitalize()} was flagged ({kind}).",
        advice=KIND_ADVICE.get(kind, ""),
        files=files,
        facts=tuple(facts),
        is_rejection=False,
    )


def _agreeing_group(
    evidence: Mapping[str, Any], members: Sequence[int] | None
) -> tuple[str, list[int] | None]:
    """Name the agreeing group (from the round's record, checked by digest, or as listed).

    Returns the words and the members named (``None`` when they are not known).
    """
    listed = _integers(evidence.get("clique"))  # events recorded before rounds kept it
    if listed:
        return name_numbers("worker", "workers", listed), listed
    group = AgreeingGroup.from_dict(evidence.get("agreeing"))
    if group is None:
        return "", None
    if members is None:
        return f"{group.count} workers (the round's record does not list them)", None
    if not group.matches(members):
        return f"{group.count} workers (the round's record lists another group; not shown)", None
    return name_numbers("worker", "workers", sorted(members)), sorted(members)


def _file_record(
    item: Mapping[str, Any], subject: int | None, tol: float | None, known: Sequence[str]
) -> FileRecord:
    file = _integer(item.get("file")) or 0
    digests: dict[int, str] = {}
    pairs: dict[frozenset[int], tuple[float | None, bool | None]] = {}
    for replica in _dicts(item.get("replicas")):
        worker = _integer(replica.get("worker"))
        if worker is None:
            continue
        digests[worker] = _text(replica.get("digest"))
        agree = replica.get("agree")
        if subject is not None and worker != subject and "distance" in replica:
            # The stored form since the round keeps full digests: each replica carries
            # its distance to the flagged worker's.
            pairs[frozenset((worker, subject))] = (
                _number(replica.get("distance")),
                agree if isinstance(agree, bool) else None,
            )
    for pair in _dicts(item.get("distances")):
        a, b = _integer(pair.get("a")), _integer(pair.get("b"))
        if a is None or b is None:
            continue
        agree = pair.get("agree")
        pairs[frozenset((a, b))] = (
            _number(pair.get("distance")),
            agree if isinstance(agree, bool) else None,
        )
        digests.setdefault(a, "")
        digests.setdefault(b, "")
    accepted_from = _integer(item.get("accepted_from"))
    # Group 1 is the value the model used, group 2 the flagged worker's, then any others.
    groups: dict[str, int] = {}
    for worker in (accepted_from, subject):
        if worker is not None and digests.get(worker):
            groups.setdefault(digests[worker], 1 if worker == accepted_from else 2)
    rows = []
    for worker in sorted(digests):
        digest = digests[worker]
        group = groups.setdefault(digest or f"?{worker}", max([2, *groups.values()]) + 1)
        distance, agrees = (None, None)
        if subject is not None and worker != subject:
            distance, agrees = pairs.get(frozenset((worker, subject)), (None, None))
        rows.append(
            ReplicaRow(
                worker=worker,
                digest=digest,
                group=group,
                is_subject=worker == subject,
                distance=distance,
                agrees_with_subject=agrees,
                accepted=worker == accepted_from,
                full_digest=(full_digest(digest, known) or digest) if digest else "",
            )
        )
    return FileRecord(
        file=file,
        sentence=_file_sentence(file, rows, subject, accepted_from, tol),
        replicas=tuple(rows),
        accepted_from=accepted_from,
    )


def _file_sentence(
    file: int,
    rows: Sequence[ReplicaRow],
    subject: int | None,
    accepted_from: int | None,
    tol: float | None,
) -> str:
    """Say what happened to one file, e.g. who sent matching updates and who did not."""
    others = [r for r in rows if not r.is_subject]
    mine = next((r for r in rows if r.is_subject), None)
    parts = []
    if mine is not None and subject is not None:
        identical = [r.worker for r in others if r.digest and r.digest == mine.digest]
        close = [r.worker for r in others if r.worker not in identical and r.agrees_with_subject]
        differ = [r for r in others if r.worker not in identical and r.worker not in close]
        if identical:
            names = name_numbers("worker", "workers", identical)
            parts.append(f"worker {subject} sent the same update as {names}")
        if close:
            names = name_numbers("worker", "workers", close)
            parts.append(f"its update agreed with {names} within the tolerance")
        if differ:
            names = name_numbers("worker", "workers", [r.worker for r in differ])
            distances = [r.distance for r in differ if r.distance is not None]
            how = ""
            if distances:
                how = f", {_span(distances)}"
                if tol is not None:
                    how += f" where the tolerance is {tol:g}"
            lead = "its update" if identical or close else f"worker {subject}'s update"
            parts.append(f"{lead} differed from that of {names}{how}")
    if accepted_from is None:
        parts.append("no replica was trusted, so the file was left out of this round")
    elif accepted_from == subject:
        parts.append(f"the file's value came from worker {accepted_from}")
    else:
        parts.append(f"the file's value was taken from worker {accepted_from} instead")
    text = "; ".join(parts)
    return f"File {file}: {text}."


def _span(distances: Sequence[float]) -> str:
    low, high = min(distances), max(distances)
    if math.isclose(low, high, rel_tol=1e-3):
        return f"relative distance {high:.3g}"
    return f"relative distance {low:.3g} to {high:.3g}"


def _dicts(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _integers(value: object) -> list[int]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
