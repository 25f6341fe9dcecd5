"""The evidence of one flag holds what concerns its worker, whatever the federation's size."""

from __future__ import annotations

import json
import math

import pytest

from phalanx.agreeing_group import membership_digest
from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import Assignment
from phalanx.detection import Verdict, detect
from phalanx.detection.evidence import (
    DIGEST_PREFIX_LENGTH,
    FileDispute,
    ReplicaDistance,
)
from phalanx.store.engine import compact_json
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
    assert sizes[1] < 2_048
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


def test_an_r_3_dispute_s_evidence_is_below_2_kb_and_the_same_at_15_and_1000_workers() -> None:
    texts = {}
    for k in (15, 1_000):
        evidence = ring_round(k).evidence[LIAR]
        assert evidence.kind == "outside_max_clique" and len(evidence.files) == 3
        texts[k] = json.dumps(evidence.to_dict())
    sizes = {k: len(text) for k, text in texts.items()}
    # Only the group's count grows (14 -> 999, in the data and in the summary).
    assert abs(sizes[1_000] - sizes[15]) <= 4, sizes
    assert max(sizes.values()) < 2_048, sizes
    # As the store writes it (no spaces after separators), smaller still.
    assert len(compact_json(json.loads(texts[1_000]))) < 1_500


def test_a_dispute_stores_digest_prefixes_and_only_the_distances_to_its_worker() -> None:
    verdict = ring_round(50)
    evidence = verdict.evidence[LIAR]
    stored = evidence.to_dict()
    assert "score" not in stored and "rounds" not in stored  # no field of other kinds
    record = AgreementRecord.from_verdict(verdict)
    for disputed, shown in zip(evidence.files, stored["files"], strict=True):
        assert "distances" not in shown
        for replica in shown["replicas"]:
            worker, prefix = replica["worker"], replica["digest"]
            assert len(prefix) == DIGEST_PREFIX_LENGTH
            assert record.full_digest(prefix) == disputed.digests[worker]
            if worker == LIAR:
                assert "distance" not in replica
            else:
                assert replica["distance"] == pytest.approx(disputed.distance_from(worker))
                assert replica["agree"] is False


def test_a_distance_is_stored_to_nine_significant_digits() -> None:
    dispute = FileDispute(
        file=0,
        digests={0: "a" * 64, 1: "b" * 64},
        distances=(ReplicaDistance(0, 1, 1.0099999999840024, False),),
        accepted_from=None,
    )
    assert dispute.to_dict(0)["replicas"][1] == {
        "worker": 1,
        "digest": "b" * DIGEST_PREFIX_LENGTH,
        "distance": 1.01,
        "agree": False,
    }
    nan = FileDispute(0, {0: "a", 1: "b"}, (ReplicaDistance(0, 1, math.nan, False),), None)
    assert nan.to_dict(1)["replicas"][0]["distance"] is None
