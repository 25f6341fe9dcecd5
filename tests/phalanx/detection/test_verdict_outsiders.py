"""`judge` with ``outsiders="suspect"``: one round alone flags nobody outside the largest group."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.detection import Replica, compare_round, detect, judge, payload_digest
from phalanx.detection.disputes import LiarsAcrossRounds

DIM = 6


def honest_value(file: int) -> Tensor:
    return torch.randn(DIM, generator=torch.Generator().manual_seed(500 + file))


def replica(worker: int, file: int, value: Tensor) -> Replica:
    return Replica(worker, file, value, payload_digest(value.numpy().tobytes()))


def outvoted_round() -> tuple[Assignment, list[Replica], int]:
    """The triples of 6 workers; colluders 0 and 1 lie only on their file with honest 2.

    Everyone but worker 2 agrees with everyone: they are the unique largest group, and
    worker 2, who alone told the truth on that file, is left outside it.
    """
    assignment = Assignment(
        num_workers=6, files=tuple(itertools.combinations(range(6), 3)), scheme="subsets"
    )
    target = assignment.files.index((0, 1, 2))
    replicas = [
        replica(w, f, -honest_value(f) if f == target and w in (0, 1) else honest_value(f))
        for f, workers in enumerate(assignment.files)
        for w in workers
    ]
    return assignment, replicas, target


def test_the_aspis_rule_flags_the_honest_worker_two_colluders_outvoted() -> None:
    # The premise "the honest workers are the largest agreeing group" fails here.
    assignment, replicas, target = outvoted_round()
    verdict = detect(assignment, replicas)
    assert verdict.rule == "unique_clique" and verdict.flagged == {2}
    assert torch.equal(verdict.accepted[target], -honest_value(target))


def test_as_a_suspect_the_outvoted_worker_is_not_flagged_and_the_disputed_file_is_dropped() -> None:
    assignment, replicas, target = outvoted_round()
    verdict = detect(assignment, replicas, outsiders="suspect")
    assert verdict.rule == "unique_clique"
    assert verdict.flagged == frozenset() and verdict.suspects == {2}
    assert verdict.drops[target].reason == "disputed"
    assert verdict.dropped == (target,)
    assert all(torch.equal(v, honest_value(f)) for f, v in verdict.accepted.items())
    assert "unique largest group" in verdict.explain(2)
    assert "proves nothing" in verdict.explain(2)
    assert "not flagged: it belongs to the unique largest group" in verdict.explain(0)


def test_a_lone_liar_proven_by_its_own_round_is_flagged_and_its_files_keep_honest_values() -> None:
    # Worker 5 lies on every file: it disputes all 5 others at once, more than a bound of 2.
    assignment = Assignment(
        num_workers=6, files=tuple(itertools.combinations(range(6), 3)), scheme="subsets"
    )
    replicas = [
        replica(w, f, -honest_value(f) if w == 5 else honest_value(f))
        for f, workers in enumerate(assignment.files)
        for w in workers
    ]
    compared = compare_round(assignment, replicas)
    across = LiarsAcrossRounds(bound=2)
    assert set(across.observe(1, compared.conflicts())) == {5}
    verdict = judge(compared, distrusted=frozenset(across.proven), outsiders="suspect")
    assert verdict.flagged == {5} and verdict.suspects == frozenset()
    assert verdict.dropped == ()
    assert all(torch.equal(v, honest_value(f)) for f, v in verdict.accepted.items())


def test_with_no_dispute_both_settings_keep_the_same_values() -> None:
    # Runs without attack must not change: same value, from the same worker, per file.
    assignment, replicas, _ = outvoted_round()
    honest = [replica(r.worker, r.file, honest_value(r.file)) for r in replicas]
    flag = detect(assignment, honest)
    suspect = detect(assignment, honest, outsiders="suspect")
    assert flag.accepted_digests == suspect.accepted_digests
    assert flag.accepted_from == suspect.accepted_from
    assert suspect.suspects == frozenset() and suspect.flagged == frozenset()


def test_a_file_only_suspects_replied_for_is_dropped() -> None:
    assignment, replicas, target = outvoted_round()
    # Workers 3 and 4 send nothing for file (2, 3, 4): only the suspect's replica is left.
    alone = assignment.files.index((2, 3, 4))
    kept = [r for r in replicas if r.file != alone or r.worker == 2]
    verdict = detect(assignment, kept, outsiders="suspect")
    assert verdict.suspects == {2}
    assert verdict.drops[alone].reason == "suspects_only"
    assert target in verdict.dropped


def test_unknown_outsiders_setting_is_refused() -> None:
    assignment, replicas, _ = outvoted_round()
    with pytest.raises(ValueError, match="outsiders must be one of"):
        detect(assignment, replicas, outsiders="ban")  # type: ignore[arg-type]
