"""The evidence of one flag holds what concerns its worker, whatever the federation's size."""

from __future__ import annotations

import json

from phalanx.agreeing_group import membership_digest
from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import Assignment
from phalanx.detection import Verdict, detect
from tests.support.replicas import attacked

LIAR = 7


def ring_round(k: int) -> Verdict:
    """K workers, file f on workers f, f + 1, f + 2 (mod K); worker 7 lies on its 3 files."""
    files = tuple(tuple(sorted({f, (f + 1) % k, (f + 2) % k})) for f in range(k))
    assignment = Assignment(num_workers=k, files=files)
    return detect(assignment, attacked(assignment, {LIAR}))


def test_an_event_s_evidence_is_the_same_size_at_50_and_2000_workers() -> None:
    small, large = ring_round(50), ring_round(2_000)
    assert small.flagged == large.flagged == {LIAR}
    sizes = [len(json.dumps(v.evidence[LIAR].to_dict())) for v in (small, large)]
    # Only the group's count grows a digit or two (49 -> 1999, twice: data and summary).
    assert abs(sizes[1] - sizes[0]) <= 6, sizes
    assert sizes[1] < 2_500
    stored = large.evidence[LIAR].to_dict()
    assert "clique" not in stored
    assert stored["agreeing"] == {"count": 1_999, "digest": membership_digest(large.agreeing)}
    assert stored["disagreed_with"] == [5, 6, 8, 9]


def test_the_round_lists_the_agreeing_group_once_and_the_event_s_digest_names_it() -> None:
    verdict = ring_round(2_000)
    record = AgreementRecord.from_dict(
        json.loads(json.dumps(AgreementRecord.from_verdict(verdict).to_dict()))
    )
    everyone_else = tuple(w for w in range(2_000) if w != LIAR)
    assert record.agreeing == everyone_else
    group = verdict.evidence[LIAR].agreeing
    assert group is not None and group.matches(record.agreeing)
    assert not group.matches(everyone_else[1:])
