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

#: The reasons worded for a round whose largest agreeing group was unique: its suspects
#: are the workers outside it, which no tie explains (`judge`'s ``outsiders="suspect"``).
UNTIED_REASONS = {
    **REASONS,
    "disputed": "its replicas disagreed",
    "suspects_only": "only suspects sent it (possibly the colluders' own file)",
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
    tied: bool = False


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
    tied = record.num_max_cliques > 1
    reasons = REASONS if tied else UNTIED_REASONS
    rows = tuple(
        DroppedRow(
            file=d.file,
            reason=reasons.get(d.reason, d.reason.replace("_", " ")),
            holders=name_numbers("worker", "workers", d.holders) if d.holders else "nobody",
            digests=tuple((w, digest[:12]) for w, digest in d.digests),
        )
        for d in record.dropped
    )
    suspects = name_numbers("worker", "workers", record.suspects) if record.suspects else ""
    return DroppedFiles(
        round=number, rows=rows, total=record.num_dropped, suspects=suspects, tied=tied
    )
