"""Evidence across rounds: colluders proven from their disputes, honest workers never."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from phalanx.attacks import distortion_plan
from phalanx.config import RunConfig
from phalanx.detection import Replica, detect, payload_digest
from phalanx.detection.disputes import (
    DisputeRecord,
    LiarsAcrossRounds,
    greedy_matching,
    proven_liars,
)
from phalanx.plan import adversaries, base_assignment, round_assignment


def collusion(strategy: str, q: int, seed: int, rounds: int) -> tuple[frozenset[int], list]:
    """The disputes, round by round, of colluders who lie as ``strategy`` on STS(15)."""
    config = RunConfig.model_validate(
        {
            "seed": seed,
            "rounds": rounds,
            "assignment": {"scheme": "bibd", "num_workers": 15, "r": 3, "relabel": True},
            "attack": {"name": "reversed_gradient", "q": q, "strategy": strategy},
        }
    )
    base, liars = base_assignment(config), adversaries(config)
    per_round = []
    for t in range(1, rounds + 1):
        assignment = round_assignment(config, t, base)
        plan = distortion_plan(assignment, liars, strategy=strategy, seed=seed)  # type: ignore[arg-type]
        pairs = set()
        for f, workers in enumerate(assignment.files):
            lying = [w for w in workers if f in plan.get(w, ())]
            pairs |= {(a, b) for a in lying for b in workers if b not in lying}
        per_round.append(pairs)
    return liars, per_round


@pytest.mark.parametrize("strategy", ["only_majorities", "fixed_disagreement"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_colluders_who_tie_every_round_are_proven_in_ten_rounds(strategy: str, seed: int) -> None:
    liars, per_round = collusion(strategy, q=3, seed=seed, rounds=10)
    record, proven = DisputeRecord(), {}
    for t, pairs in enumerate(per_round, start=1):
        record.add_round(t, pairs)
        proven |= dict.fromkeys(proven_liars(record, bound=7, known=proven), t)
        assert set(proven) <= liars
    assert set(proven) == liars


@given(
    liars=st.sets(st.integers(0, 14), max_size=7),
    edges=st.lists(st.tuples(st.integers(0, 14), st.integers(0, 14), st.integers(1, 30))),
)
def test_an_honest_worker_is_never_proven_while_liars_stay_within_the_bound(
    liars: set[int], edges: list[tuple[int, int, int]]
) -> None:
    record = DisputeRecord()
    for a, b, t in sorted(edges, key=lambda e: e[2]):
        # Two honest replicas never disagree: every dispute has a liar on one side.
        if a != b and (a in liars or b in liars):
            record.add_round(t, [(a, b)])
    assert set(proven_liars(record, bound=7)) <= liars


def test_a_worker_whose_partners_could_be_the_liars_is_not_proven() -> None:
    record = DisputeRecord()
    record.add_round(1, [(0, 1), (0, 2)])
    record.add_round(2, [(0, 3)])
    assert proven_liars(record, bound=3) == {}
    record.add_round(3, [(0, 4)])
    proof = proven_liars(record, bound=3)[0]
    assert proof.liars_if_honest == 4 and proof.rounds == (1, 2, 3)
    assert "4 different workers" in proof.summary() and "more than the 3" in proof.summary()


def test_disputes_elsewhere_count_against_the_bound() -> None:
    record = DisputeRecord()
    record.add_round(1, [(0, 1), (0, 2), (5, 6), (7, 8)])
    # Were 0 honest: 1 and 2 lie, and 5-6 and 7-8 need a liar each: 4 > 3.
    proofs = proven_liars(record, bound=3)
    assert set(proofs) == {0} and proofs[0].independent_disputes == 2


def test_each_proof_counts_against_the_next() -> None:
    record = DisputeRecord()
    record.add_round(1, [(9, 5), (9, 6), (9, 7)])
    assert proven_liars(record, bound=3) == {}
    # Were 9 honest, 5, 6 and 7 would lie beside the proven 0: 4 > 3.
    proof = proven_liars(record, bound=3, known={0})[9]
    assert proof.known_liars == 1 and "already proven" in proof.summary()
    record.add_round(2, [(0, w) for w in range(1, 5)])
    assert set(proven_liars(record, bound=3)) == {0, 9}


def test_the_checkpoint_form_restores_the_same_proofs() -> None:
    _, per_round = collusion("only_majorities", q=3, seed=2, rounds=6)
    record = DisputeRecord()
    for t, pairs in enumerate(per_round, start=1):
        record.add_round(t, pairs)
    restored = DisputeRecord.from_state(record.to_state())
    assert restored.rounds == record.rounds
    before, after = proven_liars(record, bound=7), proven_liars(restored, bound=7)
    assert {w: p.to_dict() for w, p in before.items()} == {w: p.to_dict() for w, p in after.items()}


def test_a_round_is_recorded_once_per_pair() -> None:
    record = DisputeRecord()
    record.add_round(4, [(2, 1), (1, 2)])
    assert record.rounds == {(1, 2): [4]}
    with pytest.raises(ValueError, match="itself"):
        record.add_round(5, [(3, 3)])
    with pytest.raises(ValueError, match="bound"):
        proven_liars(record, bound=-1)


def test_colluders_meet_many_partners_while_their_targets_meet_only_them() -> None:
    liars, per_round = collusion("only_majorities", q=3, seed=1, rounds=10)
    record = DisputeRecord()
    for t, pairs in enumerate(per_round, start=1):
        record.add_round(t, pairs)
    for w in set(itertools.chain.from_iterable(record.rounds)) - liars:
        assert set(record.partners(w)) <= liars


def test_honest_workers_whose_replicas_differ_by_noise_under_the_tolerance_are_never_proven() -> (
    None
):
    config = RunConfig.model_validate(
        {"seed": 4, "assignment": {"scheme": "bibd", "num_workers": 15, "r": 3, "relabel": True}}
    )
    base, tol = base_assignment(config), 1e-3
    across = LiarsAcrossRounds(bound=1)
    for t in range(1, 31):
        assignment = round_assignment(config, t, base)
        g = torch.Generator().manual_seed(t)
        replicas = []
        for f, workers in enumerate(assignment.files):
            value = torch.randn(64, generator=g)
            for w in workers:
                # Heavy honest noise: each replica off by up to 0.45 tol, so two differ < tol.
                noise = torch.randn(64, generator=g)
                noisy = value + 0.45 * tol * value.norm() * noise / noise.norm()
                replicas.append(Replica(w, f, noisy, payload_digest(noisy.numpy().tobytes())))
        verdict = detect(assignment, replicas, mode="tolerance", tol=tol)
        assert verdict.conflicts == {}
        assert across.observe(t, verdict.conflicts) == {}


@given(
    pairs=st.lists(
        st.tuples(st.integers(0, 14), st.integers(0, 14)).filter(lambda p: p[0] != p[1]),
        max_size=40,
    ),
    excluded=st.sets(st.integers(0, 14), max_size=6),
)
def test_the_greedy_matching_is_networkx_s_maximal_matching_of_the_subgraph(
    pairs: list[tuple[int, int]], excluded: set[int]
) -> None:
    record = DisputeRecord()
    for t, pair in enumerate(pairs, start=1):
        record.add_round(t, [pair])
    g = record.graph()
    theirs = nx.maximal_matching(g.subgraph(set(g.nodes) - excluded))
    assert greedy_matching(list(g.edges()), excluded) == {v for edge in theirs for v in edge}
