"""Detection events explained in words (phalanx_api.pages.evidence).

The evidence comes from :func:`phalanx.detection.detect` on real replicas, stored the
way the coordinator stores it (``Evidence.to_dict``), so these tests break if the
stored shape and the dashboard's reading of it drift apart.
"""

from __future__ import annotations

import torch

from phalanx.agreement_record import AgreementRecord
from phalanx.assignment import bibd_assignment, none_assignment
from phalanx.detection import detect
from phalanx.event_kinds import EventKind
from phalanx_api.pages.evidence import KIND_HEADLINES, explain, headline, is_rejection
from tests.support.replicas import attacked, replica


def test_a_flag_is_explained_file_by_file() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, {4}))
    stored = verdict.evidence[4].to_dict()
    words = explain(EventKind.OUTSIDE_MAX_CLIQUE, 4, stored)

    assert words.summary == stored["summary"]
    assert words.headline == "Disagreed with the largest group of agreeing workers"
    assert not words.is_rejection and words.advice
    assert dict(words.facts)["Disagreed with"] == "workers 0, 1, 2, 3, 5 and 6"
    assert len(words.files) == 3  # worker 4 computes three files in STS(7)
    for record in words.files:
        subject = next(r for r in record.replicas if r.is_subject)
        assert subject.worker == 4 and subject.group == 2  # the flagged worker's value
        used = [r for r in record.replicas if r.accepted]
        assert len(used) == 1 and used[0].group == 1  # the value the model used
        others = [r for r in record.replicas if not r.is_subject]
        assert all(r.agrees_with_subject is False and r.distance for r in others)
        assert record.sentence.startswith(f"File {record.file}: worker 4's update differed")
        assert f"taken from worker {used[0].worker} instead" in record.sentence


def test_colluders_are_said_to_send_the_same_update() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, {2, 5}))
    words = explain(EventKind.OUTSIDE_MAX_CLIQUE, 2, verdict.evidence[2].to_dict())
    shared = [f for f in words.files if {r.worker for r in f.replicas} >= {2, 5}]
    assert len(shared) == 1
    assert "worker 2 sent the same update as worker 5" in shared[0].sentence
    assert {r.group for r in shared[0].replicas if r.worker in (2, 5)} == {2}


def test_an_outlier_shows_its_score_and_how_many_typical_distances_out_it_lies() -> None:
    assignment = none_assignment(8)
    g = torch.Generator().manual_seed(1)
    base = torch.randn(64, generator=g)
    values = [base + 0.1 * torch.randn(64, generator=g) for _ in range(8)]
    values[5] = -100 * base
    replicas = [replica(w, w, v) for w, v in enumerate(values)]
    stored = detect(assignment, replicas).evidence[5].to_dict()
    facts = dict(explain(EventKind.OUTLIER, 5, stored).facts)
    assert facts["Score"].endswith("(threshold 8)")
    ratio = facts["Distance to the median update"]
    # Red team: it said "(at least 2)" where only a ratio over 2 is flagged, and "the
    # typical" with no noun after it.
    assert ratio == f"{stored['distance_ratio']:.3g} times the typical one (over 2)", ratio
    # An outlier stored before the ratio was kept shows its score alone.
    del stored["distance_ratio"]
    assert "Distance to the median update" not in dict(explain("outlier", 5, stored).facts)


def test_a_refused_reply_is_explained_by_its_reason() -> None:
    words = explain(EventKind.BAD_SIGNATURE, 3, {"reason": "signature does not verify", "round": 2})
    assert words.is_rejection and words.files == ()
    assert words.summary == "The coordinator refused worker 3's reply: signature does not verify."
    assert headline(EventKind.BAD_SIGNATURE) == "Reply signature did not verify"
    assert is_rejection(EventKind.STALE_ROUND) and not is_rejection(EventKind.OUTLIER)
    assert headline("brand_new_kind") == "Brand new kind"


def test_every_kind_the_coordinator_writes_has_a_headline() -> None:
    assert set(KIND_HEADLINES) == set(EventKind)
    assert all(isinstance(kind, EventKind) for kind in KIND_HEADLINES)


def test_the_agreeing_group_is_shown_from_the_round_s_record_checked_by_its_digest() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, {4}))
    stored = verdict.evidence[4].to_dict()
    members = AgreementRecord.from_verdict(verdict).agreeing
    assert members == (0, 1, 2, 3, 5, 6) and "clique" not in stored

    def group(members: tuple[int, ...] | None) -> str:
        return dict(explain(EventKind.OUTSIDE_MAX_CLIQUE, 4, stored, members).facts)[
            "Agreeing group"
        ]

    assert group(members) == "workers 0, 1, 2, 3, 5 and 6"
    assert group(None) == "6 workers (the round's record does not list them)"
    # A record of another round (or a forged one) is not shown as this event's group.
    assert (
        group((0, 1, 2, 3, 4, 5)) == "6 workers (the round's record lists another group; not shown)"
    )
    assert group((0, 1, 2, 3, 5)).startswith("6 workers (the round's record lists another")


def test_disagreeing_with_the_whole_agreeing_group_is_said_once_not_listed_twice() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, {4}))
    stored = verdict.evidence[4].to_dict()
    members = AgreementRecord.from_verdict(verdict).agreeing

    facts = dict(explain(EventKind.OUTSIDE_MAX_CLIQUE, 4, stored, members).facts)
    partial = {**stored, "disagreed_with": [0, 1]}
    some = dict(explain(EventKind.OUTSIDE_MAX_CLIQUE, 4, partial, members).facts)

    assert facts["Agreeing group"] == "workers 0, 1, 2, 3, 5 and 6"
    assert facts["Disagreed with"] == "every worker of the agreeing group"
    assert some["Disagreed with"] == "workers 0 and 1"
    unknown = dict(explain(EventKind.OUTSIDE_MAX_CLIQUE, 4, stored, None).facts)
    assert unknown["Disagreed with"] == "workers 0, 1, 2, 3, 5 and 6"  # the group is not listed


def test_an_event_recorded_before_rounds_kept_the_group_still_shows_its_own_list() -> None:
    words = explain(EventKind.OUTSIDE_MAX_CLIQUE, 4, {"clique": [0, 1, 2, 3, 5, 6]})
    assert dict(words.facts)["Agreeing group"] == "workers 0, 1, 2, 3, 5 and 6"


def test_a_malformed_agreeing_group_is_skipped_not_fatal() -> None:
    for bad in ({"count": -1, "digest": "0" * 64}, {"count": 3, "digest": "x"}, [1, 2], "six"):
        words = explain(EventKind.OUTSIDE_MAX_CLIQUE, 4, {"agreeing": bad}, (0, 1))
        assert "Agreeing group" not in dict(words.facts)


def test_a_replica_s_digest_prefix_is_shown_with_the_full_digest_the_round_keeps() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, {4}))
    record = AgreementRecord.from_verdict(verdict)
    stored = verdict.evidence[4].to_dict()
    words = explain(EventKind.OUTSIDE_MAX_CLIQUE, 4, stored, digests=record.digests)
    for disputed, shown in zip(verdict.evidence[4].files, words.files, strict=True):
        for row in shown.replicas:
            assert row.full_digest == disputed.digests[row.worker]
            assert row.full_digest.startswith(row.digest) and len(row.digest) == 32
    # Without the round's digests (an older round), the prefix is all there is.
    alone = explain(EventKind.OUTSIDE_MAX_CLIQUE, 4, stored)
    assert all(r.full_digest == r.digest for f in alone.files for r in f.replicas)


def test_an_event_stored_with_every_pair_and_full_digests_still_reads() -> None:
    """Events recorded before the round kept the digests list every pair under distances."""
    old = {
        "files": [
            {
                "file": 3,
                "replicas": [
                    {"worker": 0, "digest": "a" * 64},
                    {"worker": 1, "digest": "a" * 64},
                    {"worker": 2, "digest": "b" * 64},
                ],
                "distances": [
                    {"a": 0, "b": 1, "distance": 0.0, "agree": True},
                    {"a": 0, "b": 2, "distance": 2.0, "agree": False},
                    {"a": 1, "b": 2, "distance": 2.0, "agree": False},
                ],
                "accepted_from": 0,
            }
        ],
        "tolerance": 1e-5,
    }
    (shown,) = explain(EventKind.OUTSIDE_MAX_CLIQUE, 2, old).files
    rows = {r.worker: r for r in shown.replicas}
    assert rows[0].distance == rows[1].distance == 2.0 and rows[2].distance is None
    assert rows[0].full_digest == "a" * 64 and rows[0].group == 1 and rows[2].group == 2


def test_hostile_replica_fields_are_skipped_not_fatal() -> None:
    hostile = {
        "files": [
            {
                "file": 1,
                "replicas": [
                    {"worker": 0, "digest": 7, "distance": "far", "agree": "yes"},
                    {"worker": True, "digest": "x"},
                    {"worker": 2, "digest": "ab", "distance": float("nan")},
                    "not a replica",
                ],
                "accepted_from": 0,
            }
        ]
    }
    (shown,) = explain(EventKind.OUTSIDE_MAX_CLIQUE, 2, hostile, digests=["ab", "abc"]).files
    rows = {r.worker: r for r in shown.replicas}
    assert set(rows) == {0, 2}
    assert rows[0].digest == "" and rows[0].distance is None and rows[0].agrees_with_subject is None
    assert rows[2].full_digest == "ab"  # two listed digests start with it: not resolved
