"""The stored record of a round's agreement graph: built from detection, bounded, read back."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from typing import Any

import pytest
import torch
from torch import Tensor

from phalanx.agreement_record import (
    MAX_CLIQUES,
    MAX_CONFLICTS,
    MAX_DIGESTS,
    MAX_FILES_PER_CONFLICT,
    AgreementRecord,
    AgreementRecordError,
    ConflictEdge,
    full_digest,
    stored_agreeing,
    stored_digests,
)
from phalanx.assignment import Assignment, bibd_assignment
from phalanx.detection import Replica, Verdict, detect, payload_digest
from phalanx.detection.evidence import DIGEST_PREFIX_LENGTH, Evidence, FileDispute

DIM = 8


def honest_value(file: int) -> Tensor:
    return torch.randn(DIM, generator=torch.Generator().manual_seed(1000 + file))


def replica(worker: int, file: int, value: Tensor) -> Replica:
    value = value.to(torch.float32)
    return Replica(worker, file, value, payload_digest(value.numpy().tobytes()))


def attacked(assignment: Assignment, liars: frozenset[int]) -> list[Replica]:
    """Every liar sends the same wrong value for every file (they collude)."""
    return [
        replica(w, f, -100.0 * honest_value(f) if w in liars else honest_value(f))
        for f, workers in enumerate(assignment.files)
        for w in workers
    ]


def stored(record: AgreementRecord) -> Any:
    """The record as the database hands it back: through JSON."""
    return json.loads(json.dumps(record.to_dict(), allow_nan=False))


def synthetic_verdict(
    workers: int, conflicts: dict[tuple[int, int], tuple[int, ...]], flagged: frozenset[int]
) -> Verdict:
    degree = {w: workers - 1 for w in range(workers)}
    for a, b in conflicts:
        degree[a] -= 1
        degree[b] -= 1
    return Verdict(
        accepted={},
        accepted_from={},
        accepted_digests={},
        dropped=(),
        flagged=flagged,
        evidence={},
        rule="unique_clique",
        max_cliques=(frozenset(range(workers)) - flagged,),
        num_max_cliques=1,
        degrees=degree,
        conflicts=conflicts,
    )


def test_a_round_is_recorded_with_its_conflicts_degrees_and_clique() -> None:
    assignment = bibd_assignment(7, 3)
    liars = frozenset({2, 5})
    verdict = detect(assignment, attacked(assignment, liars))

    record = AgreementRecord.from_verdict(verdict)

    assert record.rule == "unique_clique" and record.compared and record.complete
    assert record.replied == tuple(range(7)) and record.flagged == (2, 5)
    honest = [w for w in range(7) if w not in liars]
    # Every pair of workers shares exactly one file in STS(7): each honest-liar pair
    # disagreed on it, the two colluders agreed with each other.
    assert {(e.a, e.b) for e in record.conflicts} == {
        tuple(sorted((h, liar))) for h in honest for liar in liars
    }
    for edge in record.conflicts:
        (shared,) = [f for f, ws in enumerate(assignment.files) if {edge.a, edge.b} <= set(ws)]
        assert edge.files == (shared,) and edge.num_files == 1
    assert record.degrees == {**{h: 4 for h in honest}, 2: 1, 5: 1}
    assert record.degree(0) == 4 and record.degree(2) == 1 and record.degree(9) is None
    assert record.outside_max_cliques == ((2, 5),) and record.num_max_cliques == 1


def test_a_record_reads_back_what_was_stored() -> None:
    assignment = bibd_assignment(7, 3)
    record = AgreementRecord.from_verdict(detect(assignment, attacked(assignment, frozenset({4}))))

    data = stored(record)

    assert data["replied"] == [[0, 6]]
    assert AgreementRecord.from_dict(data) == record


def test_a_degree_absent_from_the_record_is_full() -> None:
    assignment = bibd_assignment(7, 3)
    record = AgreementRecord.from_verdict(detect(assignment, attacked(assignment, frozenset())))
    assert record.conflicts == () and record.degrees == {} and record.flagged == ()
    assert [record.degree(w) for w in range(7)] == [6] * 7


def test_tied_groups_keep_the_conflicts_between_unflagged_workers() -> None:
    # Files are the pairs of 7 workers; 0 and 1 lie only to 2 and 3, 6 lies to everyone:
    # {0, 1, 4, 5} and {2, 3, 4, 5} tie as largest agreeing groups.
    assignment = Assignment(num_workers=7, files=tuple(itertools.combinations(range(7), 2)))
    replicas = []
    for f, (a, b) in enumerate(assignment.files):
        for w, other in ((a, b), (b, a)):
            lies = w == 6 or (w in (0, 1) and other in (2, 3))
            replicas.append(replica(w, f, -honest_value(f) + w if lies else honest_value(f)))
    verdict = detect(assignment, replicas)
    assert verdict.rule == "unanimity" and verdict.flagged == {6}

    record = AgreementRecord.from_verdict(verdict)

    pairs = {(e.a, e.b) for e in record.conflicts}
    assert {(0, 2), (0, 3), (1, 2), (1, 3)} <= pairs  # neither end flagged
    assert record.num_max_cliques == 2
    assert set(record.outside_max_cliques) == {(2, 3, 6), (0, 1, 6)}


def test_single_replicas_record_that_nothing_was_compared() -> None:
    assignment = Assignment(num_workers=5, files=tuple((w,) for w in range(5)))
    record = AgreementRecord.from_verdict(detect(assignment, attacked(assignment, frozenset())))
    assert record.rule in ("outlier", "none") and not record.compared
    assert record.conflicts == () and record.replied == tuple(range(5))


def test_a_round_nobody_answered_is_recorded_empty() -> None:
    record = AgreementRecord.from_verdict(detect(bibd_assignment(7, 3), []))
    assert record.replied == () and record.num_max_cliques == 0
    assert AgreementRecord.from_dict(stored(record)) == record


def test_a_thousand_workers_with_a_hundred_liars_make_a_small_record() -> None:
    rng = random.Random(7)
    k, per_worker, r = 1000, 3, 3
    slots = [w for w in range(k) for _ in range(per_worker)]
    rng.shuffle(slots)
    files = tuple(tuple(sorted(set(slots[i : i + r]))) for i in range(0, len(slots), r))
    assignment = Assignment(num_workers=k, files=files, scheme="random")
    liars = frozenset(rng.sample(range(k), 100))
    verdict = detect(assignment, attacked(assignment, liars))
    assert verdict.flagged == liars

    record = AgreementRecord.from_verdict(verdict)
    size = len(json.dumps(record.to_dict()))

    assert record.complete and record.num_conflicts == len(verdict.conflicts) > 300
    # The liars' files hold two values each, theirs and the honest one.
    assert record.num_digests == len(record.digests) <= 2 * per_worker * len(liars)
    without_digests = len(json.dumps(dataclasses.replace(record, digests=()).to_dict()))
    # About 36 KB: ~600 conflicts and the degrees of the ~700 workers in them, never the
    # ~500,000 pairs that agreed; then the ~600 digests the flags name, 68 bytes each.
    assert without_digests < 40_000, without_digests
    assert size - without_digests <= 68 * record.num_digests
    assert size < 80_000, size


def test_the_listed_parts_stay_bounded_however_many_conflicts_there_are() -> None:
    workers = 1000
    liars = frozenset(range(900, 1000))
    # Every honest worker disagrees with every other one on ten files, the liars too.
    many_files = tuple(range(10))
    conflicts = {pair: many_files for pair in itertools.combinations(range(workers), 2)}
    verdict = synthetic_verdict(workers, conflicts, liars)
    verdict = dataclasses.replace(
        verdict,
        max_cliques=tuple(frozenset({w}) for w in range(64)),
        num_max_cliques=workers,
    )

    record = AgreementRecord.from_verdict(verdict)

    assert len(record.conflicts) == MAX_CONFLICTS and record.num_conflicts == len(conflicts)
    assert not record.complete
    assert all(liars & {e.a, e.b} for e in record.conflicts)  # flagged workers' edges first
    assert all(
        len(e.files) == MAX_FILES_PER_CONFLICT and e.num_files == 10 for e in record.conflicts
    )
    assert len(record.outside_max_cliques) == MAX_CLIQUES and record.num_max_cliques == workers
    size = len(json.dumps(record.to_dict()))
    assert size < 128_000, size
    assert AgreementRecord.from_dict(stored(record)) == record


DROP = {"file": 3, "reason": "disputed", "holders": [0, 1, 2], "digests": [[0, "ab"], [1, "cd"]]}


def _valid() -> dict[str, Any]:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, frozenset({2, 5})))
    data: dict[str, Any] = stored(AgreementRecord.from_verdict(verdict))
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(version=5), "version 5 is not 4"),
        (lambda d: d.update(digests="ab"), "digests is not a list"),
        (lambda d: d.update(digests=[7]), "not a short string"),
        (lambda d: d.update(digests=["AB"]), "lowercase hex"),
        (lambda d: d.update(digests=["ab", "ab"]), "distinct and sorted"),
        (lambda d: d.update(digests=["cd", "ab"]), "distinct and sorted"),
        (lambda d: d.update(digests=["ab"] * 1025), "more than 1024"),
        (lambda d: d.update(num_digests=0), "below the digests"),
        (lambda d: d.update(version=True), "has no version"),
        (lambda d: d.update(agreeing=[[0, 99]]), "did not reply"),
        (lambda d: d.update(agreeing=[[3, 1]]), "not increasing"),
        (lambda d: d.update(agreeing="0-5"), "agreeing is not a list"),
        (lambda d: d.update(dropped={"file": 0}), "dropped is not a list"),
        (lambda d: d.update(dropped=[{**DROP, "reason": "bored"}]), "no known reason"),
        (lambda d: d.update(dropped=[{**DROP, "file": -1}]), "non-negative integer"),
        (lambda d: d.update(dropped=[{**DROP, "holders": [10**6]}]), "not below"),
        (lambda d: d.update(dropped=[{**DROP, "digests": [[0]]}]), "pair"),
        (lambda d: d.update(dropped=[{**DROP, "digests": [[0, "x" * 129]]}]), "short string"),
        (lambda d: d.update(dropped=[DROP] * 257), "more than 256"),
        (lambda d: d.update(dropped=[DROP], num_dropped=0), "below the dropped"),
        (lambda d: d.update(suspects=[9]), "did not reply"),
        (lambda d: d.update(version="x" * 10_000), "has no version"),
        (lambda d: d.update(rule=None), "rule"),
        (lambda d: d.update(rule="x" * 33), "rule"),
        (lambda d: d.update(replied="0-6"), "replied is not a list"),
        (lambda d: d.update(replied=[[0, 3], [2, 6]]), "not increasing"),
        (lambda d: d.update(replied=[[6, 0]]), "not increasing"),
        (lambda d: d.update(replied=[[0, 10**9]]), "more than"),
        (lambda d: d.update(replied=[[0, True]]), "non-negative integer"),
        (lambda d: d.update(flagged=[7]), "did not reply"),
        (lambda d: d.update(degrees=[[0]]), "pair"),
        (lambda d: d.update(degrees=[[0, -1]]), "non-negative integer"),
        (lambda d: d["conflicts"].append(d["conflicts"][0]), "listed twice"),
        (lambda d: d["conflicts"][0].update(a=5, b=0), "in order"),
        (lambda d: d["conflicts"][0].update(files=list(range(9))), "more than 8"),
        (lambda d: d["conflicts"][0].update(num_files=0), "below the files"),
        (lambda d: d.update(conflicts=[{"a": 0, "b": 1}] * 1001), "more than 1000"),
        (lambda d: d.update(num_conflicts=1), "below the conflicts"),
        (lambda d: d.update(outside_max_cliques=[[1.5]]), "non-negative integer"),
        (lambda d: d.update(num_max_cliques="1"), "non-negative integer"),
    ],
)
def test_a_malformed_record_is_refused_with_its_reason(change: Any, message: str) -> None:
    data = _valid()
    change(data)
    with pytest.raises(AgreementRecordError, match=message):
        AgreementRecord.from_dict(data)


@pytest.mark.parametrize("data", [None, [], "record", 3])
def test_something_other_than_an_object_is_refused(data: object) -> None:
    with pytest.raises(AgreementRecordError, match="not a JSON object"):
        AgreementRecord.from_dict(data)


def test_edges_read_back_in_order() -> None:
    data = _valid()
    data["conflicts"].reverse()
    record = AgreementRecord.from_dict(data)
    assert [(e.a, e.b) for e in record.conflicts] == sorted((e.a, e.b) for e in record.conflicts)
    assert isinstance(record.conflicts[0], ConflictEdge)


def test_a_version_1_record_reads_back_without_suspects_or_dropped_files() -> None:
    data = _valid()
    for key in ("suspects", "dropped", "num_dropped"):
        del data[key]
    record = AgreementRecord.from_dict({**data, "version": 1})
    assert (record.suspects, record.dropped, record.num_dropped) == ((), (), 0)


def test_a_tie_records_its_suspects_and_every_dropped_file_with_holders_and_digests() -> None:
    assignment = Assignment(num_workers=6, files=tuple(itertools.combinations(range(6), 3)))
    # Colluders 0 and 1 lie together only where honest 2 or 3 is their third: a tie.
    lied = [{0, 1} <= set(ws) and bool({2, 3} & set(ws)) for ws in assignment.files]
    replicas = [
        replica(w, f, -honest_value(f) if lied[f] and w < 2 else honest_value(f))
        for f, ws in enumerate(assignment.files)
        for w in ws
    ]
    verdict = detect(assignment, replicas)
    record = AgreementRecord.from_dict(stored(AgreementRecord.from_verdict(verdict)))
    assert record.suspects == tuple(sorted(verdict.suspects)) and record.suspects
    assert record.num_dropped == len(verdict.dropped) == len(record.dropped) > 0
    for entry in record.dropped:
        assert entry.holders == assignment.workers_of(entry.file)
        assert {w for w, _ in entry.digests} == set(assignment.workers_of(entry.file))
        assert entry.reason in {"disputed", "suspects_only"}


def test_the_record_keeps_the_agreeing_group_once_and_older_records_have_none() -> None:
    data = _valid()
    record = AgreementRecord.from_dict(data)
    assert record.agreeing == (0, 1, 3, 4, 6)  # everyone but liars 2 and 5
    assert data["agreeing"] == [[0, 1], [3, 4], [6, 6]]
    assert stored_agreeing(data["version"], data["agreeing"]) == record.agreeing
    older = {k: v for k, v in data.items() if k != "agreeing"}
    assert AgreementRecord.from_dict({**older, "version": 2}).agreeing is None
    assert stored_agreeing(2, data["agreeing"]) is None
    assert stored_agreeing(True, data["agreeing"]) is None
    assert stored_agreeing(data["version"], [[4, 2]]) is None
    assert stored_agreeing(data["version"], "0-6") is None


def test_the_record_keeps_each_flag_s_full_digests_and_an_event_s_prefix_finds_them() -> None:
    assignment = bibd_assignment(7, 3)
    verdict = detect(assignment, attacked(assignment, frozenset({2, 5})))
    record = AgreementRecord.from_dict(stored(AgreementRecord.from_verdict(verdict)))
    named = {d for e in verdict.evidence.values() for f in e.files for d in f.digests.values()}
    assert set(record.digests) == named and record.num_digests == len(named)
    assert list(record.digests) == sorted(named)
    for evidence in verdict.evidence.values():
        for file in evidence.to_dict()["files"]:
            for shown in file["replicas"]:
                assert len(shown["digest"]) == DIGEST_PREFIX_LENGTH
                assert record.full_digest(shown["digest"]) in named
                assert record.full_digest(shown["digest"]).startswith(shown["digest"])


def test_a_prefix_names_a_digest_only_when_exactly_one_listed_digest_has_it() -> None:
    digests = ("aa01", "aa02", "ab00")
    assert full_digest("ab", digests) == "ab00"
    assert full_digest("aa02", digests) == "aa02"
    assert full_digest("aa", digests) is None  # two start with it
    assert full_digest("ff", digests) is None and full_digest("", digests) is None


def test_older_records_have_no_digests_and_the_cap_keeps_the_true_count() -> None:
    data = _valid()
    assert stored_digests(data["version"], data["digests"]) == tuple(data["digests"])
    older = {k: v for k, v in data.items() if k not in ("digests", "num_digests")}
    assert AgreementRecord.from_dict({**older, "version": 3}).digests == ()
    assert stored_digests(3, data["digests"]) == ()
    assert stored_digests(data["version"], ["AB"]) == ()
    flagged = frozenset(range(600))
    evidence = {
        w: Evidence(
            worker=w,
            kind="outside_max_clique",
            severity="high",
            files=(FileDispute(w, {w: f"{2 * w:064x}", 600: f"{2 * w + 1:064x}"}, (), 600),),
        )
        for w in flagged
    }
    verdict = dataclasses.replace(synthetic_verdict(601, {}, flagged), evidence=evidence)
    record = AgreementRecord.from_verdict(verdict)
    assert len(record.digests) == MAX_DIGESTS < record.num_digests == 1_200
    # The lowest-numbered flagged workers' digests are those kept.
    assert record.digests == tuple(f"{i:064x}" for i in range(MAX_DIGESTS))
    assert AgreementRecord.from_dict(stored(record)) == record
