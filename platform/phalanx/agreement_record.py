"""The record of a round's agreement graph, stored with the round so that pages only draw it.

Detection (:func:`phalanx.detection.detect`) compares the replicas of every file
and joins two workers in the agreement graph when they agreed on every file they
shared. The record keeps what a reader needs to see that graph again: the workers
that replied, the rule that decided, the *conflict* edges (pairs of workers that
disagreed, with the files they disagreed on), the degrees of the workers that had
a conflict, and the maximum cliques. Every pair of workers that replied and is not
a conflict edge agreed.

Size is bounded whatever the round, so a record stays small at thousands of
workers:

- edges are the conflicts, never the agreements (which number about K²/2); at
  most :data:`MAX_CONFLICTS` are listed, those of flagged workers first, with at
  most :data:`MAX_FILES_PER_CONFLICT` files each, and the true counts beside them;
- at most :data:`MAX_CLIQUES` maximum cliques are listed, each as the workers that
  replied but are *outside* it (a handful, where the clique itself is nearly
  everyone), with the true number of maximum cliques beside them;
- the workers that replied are stored as ranges (``[[0, 999]]`` when all 1,000
  replied) and degrees only for workers that had a conflict (every other worker
  agreed with all the others);
- the round's *agreeing group* (the workers flags are measured against, the union
  of the maximum cliques among workers not proven liars) is stored as ranges too,
  once per round: each flag's evidence holds only its count and digest
  (:mod:`phalanx.agreeing_group`), and a reader finds the members here;
- the full payload digest of every replica the round's flags name is kept once
  here (at most :data:`MAX_DIGESTS`, distinct, sorted): each flag's evidence
  names a replica by a 32-hex-digit prefix of its digest
  (:data:`phalanx.detection.evidence.DIGEST_PREFIX_LENGTH`), and a reader finds
  the full digest here (:meth:`AgreementRecord.full_digest`).

At K = 1,000 with 100 colluding workers (r = 3, three files each) the record
takes about 76 KB of JSON (36 KB of conflicts and degrees, 40 KB of the 600 distinct
digests their flags name); however the conflicts fall, a record of 1,000 workers
stays under about 200 KB (``tests/phalanx/test_agreement_record.py`` measures both).

The stored form (:meth:`AgreementRecord.to_dict`) is plain JSON with a
``version``; :meth:`AgreementRecord.from_dict` reads it back and refuses anything
malformed or beyond these bounds, since a database row is input like any other.
This module imports no torch: the dashboard reads records without it.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from phalanx.config import MAX_WORKERS

if TYPE_CHECKING:
    from phalanx.detection import Verdict

#: Version of the stored form written by :meth:`AgreementRecord.to_dict`; versions 1
#: (before suspects and dropped files were kept), 2 (before the agreeing group was
#: kept) and 3 (before the flags' digests were kept) are still read.
VERSION = 4
#: Most conflict edges a record lists (more than the 780 pairs of 40 workers, the
#: most the dashboard draws in full, so its full drawings are never cut short).
MAX_CONFLICTS = 1_000
#: Most files listed on one conflict edge.
MAX_FILES_PER_CONFLICT = 8
#: Most maximum cliques a record lists.
MAX_CLIQUES = 8
#: Most dropped files a record lists (the true count beside them).
MAX_DROPPED = 256
#: Most distinct digests of flagged replicas a record lists (the true count beside
#: them): 100 of 1,000 workers flagged at r = 3 name about 600.
MAX_DIGESTS = 1_024
#: Why a file can be dropped (phalanx.detection.DropReason, and a value left out
#: because the aggregate overflowed).
DROP_REASONS = frozenset({"no_replica", "untrusted", "disputed", "suspects_only", "overflow"})
#: Longest rule name read back.
_MAX_RULE_LENGTH = 32
#: Longest payload digest read back (SHA-256 in hex is 64).
_MAX_DIGEST_LENGTH = 128
#: A digest as a record lists it: lowercase hex.
_HEX = re.compile(r"[0-9a-f]+")


class AgreementRecordError(ValueError):
    """A stored agreement record is malformed or larger than a record can be."""


@dataclass(frozen=True)
class ConflictEdge:
    """Two workers whose replicas disagreed on at least one file they shared.

    Attributes
    ----------
    a, b : int
        The workers, ``a < b``.
    files : tuple of int
        Files they disagreed on (at most :data:`MAX_FILES_PER_CONFLICT`).
    num_files : int
        How many files they disagreed on in all.
    """

    a: int
    b: int
    files: tuple[int, ...]
    num_files: int


@dataclass(frozen=True)
class DroppedEntry:
    """A file of the round that kept no value.

    Attributes
    ----------
    file : int
        The file.
    reason : str
        One of :data:`DROP_REASONS`.
    holders : tuple of int
        The workers it was assigned to (for ``"overflow"``: the worker whose
        accepted value was left out).
    digests : tuple of (int, str)
        The digest of each replica that arrived, by worker.
    """

    file: int
    reason: str
    holders: tuple[int, ...]
    digests: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class AgreementRecord:
    """A round's agreement graph, as stored with the round.

    Attributes
    ----------
    rule : str
        How detection decided: ``"unique_clique"``, ``"unanimity"`` or
        ``"majority"`` (maximum cliques tied), ``"outlier"`` or ``"none"`` (no
        file had two replies, so nothing was compared).
    replied : tuple of int
        Workers whose replies reached detection, in increasing order.
    flagged : tuple of int
        Workers detection flagged (a later overflow flag is not among them).
    degrees : Mapping[int, int]
        Degree in the agreement graph of each worker that had a conflict; every
        other worker that replied has degree ``len(replied) - 1``.
    conflicts : tuple of ConflictEdge
        Conflict edges, by ``(a, b)``; at most :data:`MAX_CONFLICTS`.
    num_conflicts : int
        How many conflict edges the round had.
    outside_max_cliques : tuple of tuple of int
        Each listed maximum clique, as the workers that replied but are not in it;
        at most :data:`MAX_CLIQUES`.
    num_max_cliques : int
        How many maximum cliques the round had (0 when nobody replied).
    suspects : tuple of int
        When maximum cliques tied: workers outside one of them but inside another.
    dropped : tuple of DroppedEntry
        Files that kept no value, by file; at most :data:`MAX_DROPPED`.
    num_dropped : int
        How many files kept no value.
    agreeing : tuple of int or None
        The round's agreeing group (:attr:`phalanx.detection.Verdict.agreeing`), in
        increasing order; empty when nothing was compared, ``None`` in records written
        before it was kept (their events list the group themselves).
    digests : tuple of str
        The full payload digests of the replicas the round's flags name, distinct and
        sorted; at most :data:`MAX_DIGESTS` (those of the lowest-numbered flagged
        workers first). Empty in records written before they were kept (their events
        hold full digests).
    num_digests : int
        How many distinct digests the round's flags named.
    """

    rule: str
    replied: tuple[int, ...]
    flagged: tuple[int, ...]
    degrees: Mapping[int, int]
    conflicts: tuple[ConflictEdge, ...]
    num_conflicts: int
    outside_max_cliques: tuple[tuple[int, ...], ...]
    num_max_cliques: int
    suspects: tuple[int, ...] = ()
    dropped: tuple[DroppedEntry, ...] = ()
    num_dropped: int = 0
    agreeing: tuple[int, ...] | None = None
    digests: tuple[str, ...] = ()
    num_digests: int = 0

    def full_digest(self, prefix: str) -> str | None:
        """Return the listed digest that starts with ``prefix`` (see :func:`full_digest`)."""
        return full_digest(prefix, self.digests)

    @property
    def compared(self) -> bool:
        """Whether any file had two replies, so that there is a graph to draw."""
        return self.rule not in ("outlier", "none")

    @property
    def complete(self) -> bool:
        """Whether every conflict edge of the round is listed."""
        return len(self.conflicts) == self.num_conflicts

    def degree(self, worker: int) -> int | None:
        """Return a worker's degree in the agreement graph (``None`` if it did not reply)."""
        if worker in self.degrees:
            return self.degrees[worker]
        at = bisect.bisect_left(self.replied, worker)
        replied = at < len(self.replied) and self.replied[at] == worker
        return len(self.replied) - 1 if replied else None

    @classmethod
    def from_verdict(cls, verdict: Verdict, left_out: Iterable[int] = ()) -> AgreementRecord:
        """Record the agreement graph behind a round's :class:`~phalanx.detection.Verdict`.

        ``left_out`` are accepted files whose values the round then left out because
        the aggregate overflowed; they are listed as dropped with reason ``"overflow"``.
        """
        dropped = [
            DroppedEntry(f, d.reason, d.holders, tuple(sorted(d.digests.items())))
            for f, d in verdict.drops.items()
        ]
        dropped += [
            DroppedEntry(
                f,
                "overflow",
                (verdict.accepted_from[f],),
                ((verdict.accepted_from[f], verdict.accepted_digests[f]),),
            )
            for f in left_out
            if f in verdict.accepted_from
        ]
        dropped.sort(key=lambda d: d.file)
        replied = tuple(sorted(verdict.degrees))
        full = len(replied) - 1
        flagged = frozenset(verdict.flagged)
        pairs = sorted(verdict.conflicts, key=lambda p: (not (flagged & set(p)), p))
        listed = sorted(pairs[:MAX_CONFLICTS])
        everyone = frozenset(replied)
        named = _flag_digests(verdict)
        return cls(
            rule=verdict.rule,
            replied=replied,
            flagged=tuple(sorted(flagged)),
            degrees={w: d for w, d in sorted(verdict.degrees.items()) if d < full},
            conflicts=tuple(
                ConflictEdge(
                    a=a,
                    b=b,
                    files=tuple(verdict.conflicts[a, b][:MAX_FILES_PER_CONFLICT]),
                    num_files=len(verdict.conflicts[a, b]),
                )
                for a, b in listed
            ),
            num_conflicts=len(verdict.conflicts),
            outside_max_cliques=tuple(
                tuple(sorted(everyone - clique)) for clique in verdict.max_cliques[:MAX_CLIQUES]
            ),
            num_max_cliques=verdict.num_max_cliques,
            suspects=tuple(sorted(verdict.suspects)),
            dropped=tuple(dropped[:MAX_DROPPED]),
            num_dropped=len(dropped),
            agreeing=tuple(sorted(verdict.agreeing)),
            digests=tuple(sorted(named[:MAX_DIGESTS])),
            num_digests=len(named),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the stored form: JSON-safe, compact where it grows with the workers."""
        return {
            "version": VERSION,
            "rule": self.rule,
            "replied": [list(span) for span in _ranges(self.replied)],
            "flagged": list(self.flagged),
            "degrees": [[w, d] for w, d in sorted(self.degrees.items())],
            "conflicts": [
                {"a": e.a, "b": e.b, "files": list(e.files), "num_files": e.num_files}
                for e in self.conflicts
            ],
            "num_conflicts": self.num_conflicts,
            "outside_max_cliques": [list(outside) for outside in self.outside_max_cliques],
            "num_max_cliques": self.num_max_cliques,
            "suspects": list(self.suspects),
            "dropped": [
                {
                    "file": d.file,
                    "reason": d.reason,
                    "holders": list(d.holders),
                    "digests": [[w, digest] for w, digest in d.digests],
                }
                for d in self.dropped
            ],
            "num_dropped": self.num_dropped,
            "agreeing": [list(span) for span in _ranges(self.agreeing or ())],
            "digests": list(self.digests),
            "num_digests": self.num_digests,
        }

    @classmethod
    def from_dict(cls, data: object) -> AgreementRecord:
        """Read a stored record back.

        Raises
        ------
        AgreementRecordError
            When ``data`` is not a record of this version, or breaks its bounds.
        """
        fields = _mapping(data, "the record")
        version = fields.get("version")
        if isinstance(version, bool) or version not in (1, 2, 3, VERSION):
            numbered = isinstance(version, int) and not isinstance(version, bool)
            raise AgreementRecordError(
                f"record version {version} is not {VERSION}"
                if numbered
                else "record has no version"
            )
        rule = fields.get("rule")
        if not isinstance(rule, str) or not 0 < len(rule) <= _MAX_RULE_LENGTH:
            raise AgreementRecordError("rule is not a short string")
        replied = _expand(_list(fields.get("replied"), "replied", MAX_WORKERS))
        known = frozenset(replied)
        degrees: dict[int, int] = {}
        for item in _list(fields.get("degrees"), "degrees", MAX_WORKERS):
            pair = _list(item, "a degree", 2)
            if len(pair) != 2:
                raise AgreementRecordError("a degree is not a [worker, degree] pair")
            worker, degree = _worker(pair[0], known), _count(pair[1], "a degree")
            degrees[worker] = degree
        listed = _list(fields.get("conflicts"), "conflicts", MAX_CONFLICTS)
        conflicts = tuple(sorted((_edge(item, known) for item in listed), key=lambda e: (e.a, e.b)))
        if len({(e.a, e.b) for e in conflicts}) < len(conflicts):
            raise AgreementRecordError("a conflict is listed twice")
        cliques = tuple(
            _workers(item, "a clique", known)
            for item in _list(fields.get("outside_max_cliques"), "cliques", MAX_CLIQUES)
        )
        later = version != 1
        dropped = tuple(
            _dropped(item)
            for item in (_list(fields.get("dropped"), "dropped", MAX_DROPPED) if later else [])
        )
        record = cls(
            rule=rule,
            replied=replied,
            flagged=_workers(fields.get("flagged"), "flagged", known),
            degrees=degrees,
            conflicts=conflicts,
            num_conflicts=_count(fields.get("num_conflicts"), "num_conflicts"),
            outside_max_cliques=cliques,
            num_max_cliques=_count(fields.get("num_max_cliques"), "num_max_cliques"),
            suspects=_workers(fields.get("suspects"), "suspects", known) if later else (),
            dropped=dropped,
            num_dropped=_count(fields.get("num_dropped"), "num_dropped") if later else 0,
            agreeing=_members(fields.get("agreeing"), known) if version in (3, VERSION) else None,
            digests=_digests(fields.get("digests")) if version == VERSION else (),
            num_digests=_count(fields.get("num_digests"), "num_digests")
            if version == VERSION
            else 0,
        )
        if record.num_conflicts < len(record.conflicts):
            raise AgreementRecordError("num_conflicts is below the conflicts listed")
        if record.num_dropped < len(record.dropped):
            raise AgreementRecordError("num_dropped is below the dropped files listed")
        if record.num_digests < len(record.digests):
            raise AgreementRecordError("num_digests is below the digests listed")
        return record


def stored_agreeing(version: object, agreeing: object) -> tuple[int, ...] | None:
    """Read the agreeing group from a stored record's ``version`` and ``agreeing`` fields.

    For readers that need only the group (the dashboard explaining events), without
    reading the whole record back. Returns ``None`` for a record written before the
    group was kept, or whose group is malformed.
    """
    if isinstance(version, bool) or version not in (3, VERSION):
        return None
    try:
        return _expand(_list(agreeing, "agreeing", MAX_WORKERS))
    except AgreementRecordError:
        return None


def stored_digests(version: object, digests: object) -> tuple[str, ...]:
    """Read the flags' full digests from a stored record's ``version`` and ``digests`` fields.

    For readers that need only them (the dashboard showing an event's replicas). Empty
    for a record written before they were kept, or whose list is malformed.
    """
    if isinstance(version, bool) or version != VERSION:
        return ()
    try:
        return _digests(digests)
    except AgreementRecordError:
        return ()


def full_digest(prefix: str, digests: Sequence[str]) -> str | None:
    """Return the one digest of ``digests`` (sorted) that starts with ``prefix``.

    An event names each replica by a prefix of its digest
    (:data:`phalanx.detection.evidence.DIGEST_PREFIX_LENGTH` hex digits); the round's
    record lists the full ones. ``None`` when no listed digest starts with it, when
    two do (a prefix too short to name one), or when ``prefix`` is empty.
    """
    if not prefix:
        return None
    at = bisect.bisect_left(digests, prefix)
    found = [d for d in digests[at : at + 2] if d.startswith(prefix)]
    return found[0] if len(found) == 1 else None


def _flag_digests(verdict: Verdict) -> list[str]:
    """Return the distinct full digests the flags name, lowest-numbered worker first."""
    seen: dict[str, None] = {}
    for worker in sorted(verdict.evidence):
        for digest in sorted(verdict.evidence[worker].digests()):
            seen.setdefault(digest, None)
    return list(seen)


def _digests(value: object) -> tuple[str, ...]:
    listed = _list(value, "digests", MAX_DIGESTS)
    for digest in listed:
        if not isinstance(digest, str) or not 0 < len(digest) <= _MAX_DIGEST_LENGTH:
            raise AgreementRecordError("a digest is not a short string")
        if not _HEX.fullmatch(digest):
            raise AgreementRecordError("a digest is not lowercase hex")
    if any(a >= b for a, b in itertools.pairwise(listed)):
        raise AgreementRecordError("digests are not distinct and sorted")
    return tuple(listed)


def _ranges(workers: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted distinct workers as inclusive ranges: ``[0, 1, 2, 5]`` -> ``[(0, 2), (5, 5)]``."""
    spans: list[tuple[int, int]] = []
    for w in workers:
        if spans and spans[-1][1] == w - 1:
            spans[-1] = (spans[-1][0], w)
        else:
            spans.append((w, w))
    return spans


def _expand(spans: Iterable[object]) -> tuple[int, ...]:
    workers: list[int] = []
    for item in spans:
        span = _list(item, "a range of workers", 2)
        if len(span) != 2:
            raise AgreementRecordError("a range of workers is not a [first, last] pair")
        first, last = _count(span[0], "a worker"), _count(span[1], "a worker")
        if last < first or (workers and first <= workers[-1]):
            raise AgreementRecordError("ranges of workers are not increasing")
        if len(workers) + last - first + 1 > MAX_WORKERS:
            raise AgreementRecordError(f"more than {MAX_WORKERS} workers replied")
        workers.extend(range(first, last + 1))
    return tuple(workers)


def _members(value: object, known: frozenset[int]) -> tuple[int, ...]:
    members = _expand(_list(value, "agreeing", MAX_WORKERS))
    if not known.issuperset(members):
        raise AgreementRecordError("a worker of the agreeing group did not reply")
    return members


def _edge(item: object, known: frozenset[int]) -> ConflictEdge:
    fields = _mapping(item, "a conflict")
    a, b = _worker(fields.get("a"), known), _worker(fields.get("b"), known)
    if not a < b:
        raise AgreementRecordError("a conflict does not join two workers in order")
    listed = _list(fields.get("files"), "files", MAX_FILES_PER_CONFLICT)
    files = tuple(_count(f, "a file") for f in listed)
    num_files = _count(fields.get("num_files"), "num_files")
    if num_files < len(files):
        raise AgreementRecordError("num_files is below the files listed")
    return ConflictEdge(a=a, b=b, files=files, num_files=num_files)


def _dropped(item: object) -> DroppedEntry:
    fields = _mapping(item, "a dropped file")
    reason = fields.get("reason")
    if reason not in DROP_REASONS:
        raise AgreementRecordError("a dropped file has no known reason")
    holders = tuple(
        _below(_count(w, "a holder"), MAX_WORKERS, "a holder")
        for w in _list(fields.get("holders"), "holders", MAX_WORKERS)
    )
    digests = []
    for pair in _list(fields.get("digests"), "digests", MAX_WORKERS):
        entry = _list(pair, "a digest", 2)
        if len(entry) != 2:
            raise AgreementRecordError("a digest is not a [worker, digest] pair")
        worker = _below(_count(entry[0], "a worker"), MAX_WORKERS, "a worker")
        digest = entry[1]
        if not isinstance(digest, str) or not 0 < len(digest) <= _MAX_DIGEST_LENGTH:
            raise AgreementRecordError("a digest is not a short string")
        digests.append((worker, digest))
    return DroppedEntry(
        file=_count(fields.get("file"), "a file"),
        reason=str(reason),
        holders=holders,
        digests=tuple(digests),
    )


def _below(value: int, bound: int, what: str) -> int:
    if value >= bound:
        raise AgreementRecordError(f"{what} is not below {bound}")
    return value


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AgreementRecordError(f"{what} is not a JSON object")
    return value


def _list(value: object, what: str, most: int) -> list[Any]:
    if not isinstance(value, list):
        raise AgreementRecordError(f"{what} is not a list")
    if len(value) > most:
        raise AgreementRecordError(f"{what} has more than {most} entries")
    return value


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AgreementRecordError(f"{what} is not a non-negative integer")
    return value


def _workers(value: object, what: str, known: frozenset[int]) -> tuple[int, ...]:
    return tuple(sorted({_worker(w, known) for w in _list(value, what, MAX_WORKERS)}))


def _worker(value: object, known: frozenset[int]) -> int:
    worker = _count(value, "a worker")
    if worker not in known:
        raise AgreementRecordError(f"worker {worker} is named but did not reply")
    return worker
