"""A round's agreeing group as an event refers to it: how many workers, and a digest of who.

A flag from comparing replicas is measured against the round's largest group of
mutually agreeing workers (the unique maximum clique, or the union of the tied ones),
which holds about K workers. Each event used to list them all, so a round of 5,000
workers stored them once per flagged worker. Now the round's stored agreement record
(:class:`phalanx.agreement_record.AgreementRecord`, ``agreeing``) holds the membership
once, and an event holds an :class:`AgreeingGroup`: the count and a SHA-256 digest of
the membership, a fixed size at any K. A reader looks the members up in the round's
record and checks them against the digest, so a record that does not belong to the
event is noticed rather than shown.

The digest is over the members' canonical text: the distinct worker numbers in
increasing order, in decimal, joined by commas (``"0,1,2,5"``), encoded as ASCII.
This module imports no torch: the dashboard reads events without it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_DIGEST = re.compile(r"[0-9a-f]{64}")


def membership_digest(workers: Iterable[int]) -> str:
    """SHA-256, in hex, of the members' canonical text (see the module's docstring)."""
    text = ",".join(str(w) for w in sorted(set(workers)))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class AgreeingGroup:
    """The round's agreeing group as an event stores it.

    Attributes
    ----------
    count : int
        How many workers it has.
    digest : str
        :func:`membership_digest` of its members.
    """

    count: int
    digest: str

    @classmethod
    def of(cls, workers: Iterable[int]) -> AgreeingGroup:
        """Build the group of these workers (repeats count once)."""
        members = frozenset(workers)
        return cls(count=len(members), digest=membership_digest(members))

    def matches(self, workers: Iterable[int]) -> bool:
        """Whether ``workers`` are exactly this group's members."""
        members = frozenset(workers)
        return len(members) == self.count and membership_digest(members) == self.digest

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"count": ..., "digest": ...}``."""
        return {"count": self.count, "digest": self.digest}

    @classmethod
    def from_dict(cls, data: object) -> AgreeingGroup | None:
        """Read a stored group back; ``None`` when ``data`` is not one (stored rows are input)."""
        if not isinstance(data, Mapping):
            return None
        count, digest = data.get("count"), data.get("digest")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            return None
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            return None
        return cls(count=count, digest=digest)
