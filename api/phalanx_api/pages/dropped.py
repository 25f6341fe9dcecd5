"""The files a round left out, and why, from the record stored with the round."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from phalanx.agreement_record import AgreementRecord, AgreementRecordError
from phalanx.english_list import name_numbers

#: Each reason a file kept no value, in words.
REASONS = {
    "no_replica": "no worker sent it",
    "untrusted": "only flagged or proven workers sent it",
    "disputed": "its replicas disagreed and the largest agreeing groups tied",
    "suspects_only": "only suspects of a tie sent it (possibly the colluders' own file)",
    "overflow": "its value made the aggregate overflow",
}


@dataclass(frozen=True)
class DroppedRow:
    """One file left out: which, why, who held it, what they sent."""

    file: int
    reason: str
    holders: str
    digests: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class DroppedFiles:
    """The files one round left out (at most the record's listed number)."""

    round: int
    rows: tuple[DroppedRow, ...]
    total: int
    suspects: str


def dropped_files(number: int, stored: dict[str, Any] | None) -> DroppedFiles | None:
    """Read the dropped files of round ``number`` from its stored agreement record.

    Returns ``None`` when the round has no record, an unreadable one, or dropped
    nothing: a page never fails on a stored row.
    """
    if stored is None:
        return None
    try:
        record = AgreementRecord.from_dict(stored)
    except AgreementRecordError:
        return None
    if not record.num_dropped:
        return None
    rows = tuple(
        DroppedRow(
            file=d.file,
            reason=REASONS.get(d.reason, d.reason.replace("_", " ")),
            holders=name_numbers("worker", "workers", d.holders) if d.holders else "nobody",
            digests=tuple((w, digest[:12]) for w, digest in d.digests),
        )
        for d in record.dropped
    )
    suspects = name_numbers("worker", "workers", record.suspects) if record.suspects else ""
    return DroppedFiles(round=number, rows=rows, total=record.num_dropped, suspects=suspects)
