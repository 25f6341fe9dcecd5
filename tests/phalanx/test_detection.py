from __future__ import annotations

import hashlib
import itertools
import json
import random

import networkx as nx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.detection import (
    DEFAULT_TOL,
    DegreeWindow,
    Replica,
    agreement_graph,
    compare_file,
    detect,
    low_degree_workers,
    maximum_cliques,
    outlier_scores,
    payload_digest,
    relative_distances,
    replicas_agree,
)

DIM = 8
FANO = ((0, 1, 2), (0, 3, 4), (0, 5, 6), (1, 3, 5), (1, 4, 6), (2, 3, 6), (2, 4, 5))


def subsets(k: int, r: int) -> Assignment:
    return Assignment(
        num_workers=k, files=tuple(itertools.combinations(range(k), r)), scheme="subsets"
    )


def honest_value(file: int) -> Tensor:
    return torch.randn(DIM, generator=torch.Generator().manual_seed(1000 + file))


def wrong_value(file: int, salt: int = 0) -> Tensor:
    return -100.0 * honest_value(file) + salt


def make_replica(worker: int, file: int, value: Tensor) -> Replica:
    value = value.to(torch.float32)
    return Replica(worker, file, value, payload_digest(value.numpy().tobytes()))


def honest_replicas(assignment: Assignment, skip: frozenset[int] = frozenset()) -> list[Replica]:
    return [
        make_replica(w, f, honest_value(f))
        for f, workers in enumerate(assignment.files)
        for w in workers
        if w not in skip
    ]


def weak_attack(
    assignment: Assignment, adversaries: frozenset[int], *, collude: bool = True
) -> list[Replica]:
    """Every adversary distorts every file; colluders all send the same wrong value."""
    return [
        make_replica(
            w, f, wrong_value(f, 0 if collude else w + 1) if w in adversaries else honest_value(f)
        )
        for f, workers in enumerate(assignment.files)
        for w in workers
    ]


# --- payloads and replicas ------------------------------------------------------------


def test_payload_digest_is_hex_sha256() -> None:
    assert payload_digest(b"abc") == hashlib.sha256(b"abc").hexdigest()
    assert payload_digest(b"abc").startswith("ba7816bf")


@pytest.mark.parametrize(
    "value",
    [torch.zeros(2, 3), torch.zeros(3, dtype=torch.float64), torch.tensor([1.0, float("nan")])],
)
def test_replica_rejects_values_that_are_not_finite_flat_float32(value: Tensor) -> None:
    with pytest.raises(ValueError, match="replica of worker 1 for file 2"):
        Replica(1, 2, value, "d")


# --- comparing replicas ---------------------------------------------------------------


def test_relative_distance_is_difference_over_larger_norm() -> None:
    values = torch.tensor([[3.0, 4.0], [0.0, 0.0], [-3.0, -4.0], [6.0, 8.0]])
    d = relative_distances(values)
    assert d[0, 2].item() == pytest.approx(2.0)
    assert d[0, 3].item() == pytest.approx(0.5)
    assert d[0, 1].item() == pytest.approx(1.0)
    assert torch.equal(d, d.T)


def test_two_zero_vectors_agree_under_tolerance() -> None:
    a, b = make_replica(0, 0, torch.zeros(DIM)), make_replica(1, 0, -torch.zeros(DIM))
    assert a.digest != b.digest  # -0.0 has other bytes
    assert relative_distances(torch.zeros(2, DIM)).abs().max().item() == 0.0
    assert replicas_agree(a, b, mode="tolerance")
    assert not replicas_agree(a, b, mode="exact")


def test_exact_mode_compares_digests_only() -> None:
    value = honest_value(0)
    same_value_other_bytes = Replica(1, 0, value, payload_digest(b"other encoding"))
    assert not replicas_agree(make_replica(0, 0, value), same_value_other_bytes, mode="exact")
    assert replicas_agree(make_replica(0, 0, value), same_value_other_bytes, mode="tolerance")
    assert replicas_agree(make_replica(0, 0, value), same_value_other_bytes, mode="auto")


def test_tolerance_mode_ignores_digests() -> None:
    a = Replica(0, 0, honest_value(0), "same")
    b = Replica(1, 0, wrong_value(0), "same")
    assert not replicas_agree(a, b, mode="tolerance")
    assert replicas_agree(a, b, mode="auto")  # equal digests agree at once
    assert replicas_agree(a, b, mode="exact")


def test_auto_mode_falls_back_to_tolerance_when_digests_differ() -> None:
    base = honest_value(0)
    near = make_replica(1, 0, base * (1 + 1e-7))
    far = make_replica(2, 0, base * (1 + 1e-3))
    assert replicas_agree(make_replica(0, 0, base), near, mode="auto")
    assert not replicas_agree(make_replica(0, 0, base), far, mode="auto")
    assert replicas_agree(make_replica(0, 0, base), far, mode="auto", tol=1e-2)


def test_distances_are_skipped_when_every_digest_matches_outside_tolerance_mode() -> None:
    reps = [make_replica(w, 0, honest_value(0)) for w in range(3)]
    assert compare_file(0, reps, mode="auto").distances is None
    assert compare_file(0, reps, mode="exact").distances is None
    assert compare_file(0, reps, mode="tolerance").distances is not None


def test_comparison_rejects_unknown_mode_and_negative_tolerance() -> None:
    reps = [make_replica(0, 0, honest_value(0))]
    with pytest.raises(ValueError, match="mode"):
        compare_file(0, reps, mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tol"):
        compare_file(0, reps, tol=-1.0)


# --- the agreement graph ---------------------------------------------------------------


@st.composite
def attacked_rounds(draw: st.DrawFn) -> tuple[Assignment, frozenset[int], list[Replica]]:
    """A random assignment, random adversaries with arbitrary per-file behaviour, and
    random missing replicas."""
    k = draw(st.integers(3, 9))
    r = draw(st.integers(1, min(3, k)))
    pool = list(itertools.combinations(range(k), r))
    files = tuple(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=12)))
    assignment = Assignment(num_workers=k, files=files)
    adversaries = frozenset(draw(st.sets(st.integers(0, k - 1), max_size=k)))
    replicas = []
    for f, workers in enumerate(files):
        for w in workers:
            if draw(st.booleans()) and draw(st.booleans()):
                continue  # a straggler
            behaviour = (
                draw(st.sampled_from(["honest", "shared", "own"])) if w in adversaries else "honest"
            )
            value = {
                "honest": honest_value(f),
                "shared": wrong_value(f),
                "own": wrong_value(f, w + 1),
            }
            replicas.append(make_replica(w, f, value[behaviour]))
    return assignment, adversaries, replicas


@settings(max_examples=150, deadline=None)
@given(attacked_rounds(), st.sampled_from(["exact", "tolerance", "auto"]))
def test_honest_workers_always_form_a_clique(
    round_: tuple[Assignment, frozenset[int], list[Replica]], mode: str
) -> None:
    assignment, adversaries, replicas = round_
    graph = agreement_graph(assignment, replicas, mode=mode)  # type: ignore[arg-type]
    honest = {r.worker for r in replicas} - adversaries
    assert all(graph.has_edge(a, b) for a, b in itertools.combinations(honest, 2))


@settings(max_examples=150, deadline=None)
@given(attacked_rounds())
def test_every_verdict_splits_files_into_accepted_and_dropped_from_unflagged_workers(
    round_: tuple[Assignment, frozenset[int], list[Replica]],
) -> None:
    assignment, _, replicas = round_
    verdict = detect(assignment, replicas)
    replied = {r.worker for r in replicas}
    assert verdict.flagged <= replied
    assert set(verdict.evidence) == verdict.flagged
    assert set(verdict.accepted).isdisjoint(verdict.dropped)
    assert set(verdict.accepted) | set(verdict.dropped) == set(range(assignment.num_files))
    for file, worker in verdict.accepted_from.items():
        assert worker not in verdict.flagged
        sent = next(r for r in replicas if (r.worker, r.file) == (worker, file))
        assert torch.equal(verdict.accepted[file], sent.value)
    assert set(verdict.degrees) == replied


def test_workers_that_share_no_file_are_joined() -> None:
    assignment = Assignment(num_workers=4, files=((0, 1), (2, 3)))
    replicas = [
        make_replica(0, 0, honest_value(0)),
        make_replica(1, 0, honest_value(0)),
        make_replica(2, 1, honest_value(1)),
        make_replica(3, 1, wrong_value(1)),
    ]
    graph = agreement_graph(assignment, replicas)
    assert set(graph.edges) == {(0, 1), (0, 2), (0, 3), (1, 2), (1, 3)}


# --- maximum cliques by conflict components --------------------------------------------


def brute_force_maximum_cliques(conflicts: nx.Graph) -> set[frozenset[int]]:
    cliques = [frozenset(c) for c in nx.find_cliques(nx.complement(conflicts))]
    size = max(len(c) for c in cliques)
    return {c for c in cliques if len(c) == size}


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 11), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_conflict_component_cliques_equal_brute_force(n: int, p: float, seed: int) -> None:
    conflicts = nx.gnp_random_graph(n, p, seed=seed)
    expected = brute_force_maximum_cliques(conflicts)
    found = maximum_cliques(conflicts)
    assert set(found.cliques()) == expected
    assert found.count == len(expected) == len(found.cliques())
    assert found.is_unique == (len(expected) == 1)
    assert found.union == frozenset().union(*expected)
    assert found.size == len(next(iter(expected)))


def test_cliques_listing_is_capped_while_count_stays_exact() -> None:
    conflicts = nx.Graph([(2 * i, 2 * i + 1) for i in range(10)])  # 2**10 tied cliques
    found = maximum_cliques(conflicts)
    assert found.count == 1024 and not found.is_unique
    assert len(found.cliques(limit=64)) == 64


def test_detection_scales_to_a_thousand_workers_by_conflict_components() -> None:
    rng = random.Random(7)
    k, per_worker, r = 1000, 3, 3
    slots = [w for w in range(k) for _ in range(per_worker)]
    rng.shuffle(slots)
    files = tuple(tuple(sorted(set(slots[i : i + r]))) for i in range(0, len(slots), r))
    assignment = Assignment(num_workers=k, files=files, scheme="random")
    adversaries = frozenset(rng.sample(range(k), 100))
    verdict = detect(assignment, weak_attack(assignment, adversaries))
    # The conflict graph has a component of hundreds of workers here; listing the maximal
    # cliques of its complement would not finish.
    assert verdict.rule == "unique_clique"
    assert verdict.flagged == adversaries


# --- Aspis decision rules --------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_weak_attack_on_subsets_flags_exactly_the_adversaries(data: st.DataObject) -> None:
    k = data.draw(st.integers(7, 9))
    q = data.draw(st.integers(0, (k - 1) // 2))  # q < K/2: the honest clique is the unique maximum
    adversaries = frozenset(data.draw(st.permutations(range(k)))[:q])
    collude = data.draw(st.booleans())
    assignment = subsets(k, 3)
    verdict = detect(assignment, weak_attack(assignment, adversaries, collude=collude))
    assert verdict.rule == "unique_clique"
    assert verdict.flagged == adversaries
    assert verdict.max_cliques == (frozenset(range(k)) - adversaries,)
    for file, value in verdict.accepted.items():
        assert torch.equal(value, honest_value(file))
    all_adversarial = {f for f, ws in enumerate(assignment.files) if set(ws) <= adversaries}
    assert set(verdict.dropped) == all_adversarial


@pytest.mark.parametrize("q", [0, 1, 2, 3])
def test_weak_attack_on_the_fano_plane_flags_exactly_the_adversaries(q: int) -> None:
    assignment = Assignment(num_workers=7, files=FANO, scheme="bibd")
    adversaries = frozenset(FANO[0][:q]) if q < 3 else frozenset(FANO[0])
    verdict = detect(assignment, weak_attack(assignment, adversaries))
    assert verdict.flagged == adversaries
    assert verdict.dropped == ((0,) if q == 3 else ())
    assert all(torch.equal(v, honest_value(f)) for f, v in verdict.accepted.items())


def test_unique_max_clique_flags_every_worker_outside_it_with_high_severity_evidence() -> None:
    assignment = subsets(7, 3)
    verdict = detect(assignment, weak_attack(assignment, frozenset({3})))
    evidence = verdict.evidence[3]
    assert (evidence.kind, evidence.severity) == ("outside_max_clique", "high")
    assert verdict.agreeing == {0, 1, 2, 4, 5, 6}
    assert evidence.agreeing is not None and evidence.agreeing.matches({0, 1, 2, 4, 5, 6})
    assert evidence.disagreed_with == (0, 1, 2, 4, 5, 6)
    assert [d.file for d in evidence.files] == list(assignment.files_of(3))
    dispute = evidence.files[0]
    assert set(dispute.digests) == set(assignment.workers_of(dispute.file))
    assert dispute.accepted_from in assignment.workers_of(dispute.file)
    assert {(d.a, d.b) for d in dispute.distances} == set(
        itertools.combinations(assignment.workers_of(dispute.file), 2)
    )
    assert all(d.agree == (3 not in (d.a, d.b)) for d in dispute.distances)


def pairwise_attack() -> tuple[Assignment, list[Replica]]:
    """Files are the pairs of 7 workers. Adversaries 0 and 1 disagree only with the honest
    workers 2 and 3, so {0, 1, 4, 5} and {2, 3, 4, 5} tie as largest agreeing groups;
    adversary 6 disagrees with everyone."""
    assignment = subsets(7, 2)
    replicas = []
    for f, (a, b) in enumerate(assignment.files):
        for w, other in ((a, b), (b, a)):
            lies = w == 6 or (w in (0, 1) and other in (2, 3))
            replicas.append(make_replica(w, f, wrong_value(f, w) if lies else honest_value(f)))
    return assignment, replicas


def test_competing_max_cliques_fall_back_to_per_file_majority() -> None:
    assignment, replicas = pairwise_attack()
    verdict = detect(assignment, replicas, on_tie="majority")
    assert verdict.rule == "majority"
    assert set(verdict.max_cliques) == {frozenset({0, 1, 4, 5}), frozenset({2, 3, 4, 5})}
    assert verdict.num_max_cliques == 2
    # Only the worker outside every maximum clique is flagged.
    assert verdict.flagged == {6}
    assert verdict.evidence[6].kind == "majority_minority"
    # Workers 0 to 3 are each outside one of the tied groups: suspects.
    assert verdict.suspects == {0, 1, 2, 3}
    # Two disagreeing replicas have no strict majority: those files are dropped.
    split = {assignment.files.index((a, d)) for a in (0, 1) for d in (2, 3)}
    assert {f for f, d in verdict.drops.items() if d.reason == "disputed"} == split
    # A file whose voters are all suspects may be the colluders' own: dropped too.
    for f, (a, b) in enumerate(assignment.files):
        voters = {a, b} - {6}
        if voters <= {0, 1, 2, 3} and f not in split:
            assert verdict.drops[f].reason == "suspects_only"
        elif f not in split:
            # The flagged worker does not vote: its partner's replica is accepted alone.
            assert verdict.accepted_from[f] in voters
    assert all(torch.equal(v, honest_value(f)) for f, v in verdict.accepted.items())


def test_flagged_colluders_cannot_outvote_an_honest_replica() -> None:
    # File 0 holds honest worker 0 and colluders 5, 6, who conflict with workers 0..4.
    # Workers 2 and 4 also lie on one file each (against 1 and 3), so the largest groups
    # {0, 1 or 2, 3 or 4} tie and only 5 and 6 are outside all of them.
    files = [(0, 5, 6)] + [(h, a) for h in range(5) for a in (5, 6)] + [(1, 2), (3, 4)]
    assignment = Assignment(num_workers=7, files=tuple(files))
    replicas = []
    for f, workers in enumerate(assignment.files):
        for w in workers:
            lies = w in (5, 6) or (f >= 11 and w in (2, 4))
            replicas.append(make_replica(w, f, wrong_value(f, 1) if lies else honest_value(f)))
    verdict = detect(assignment, replicas, on_tie="majority")
    assert verdict.rule == "majority"
    assert {5, 6} <= verdict.flagged
    assert verdict.accepted_from[0] == 0
    assert torch.equal(verdict.accepted[0], honest_value(0))


def colluding_pair() -> tuple[Assignment, list[Replica]]:
    """Files are the triples of 6 workers. Colluders 0 and 1 lie together only on the two
    files they share with honest worker 2 or 3, so {0, 1, 4, 5} and {2, 3, 4, 5} tie as
    largest agreeing groups and the colluders hold the majority of those two files."""
    assignment = subsets(6, 3)
    replicas = []
    for f, workers in enumerate(assignment.files):
        lied = {0, 1} <= set(workers) and bool({2, 3} & set(workers))
        for w in workers:
            lies = lied and w in (0, 1)
            replicas.append(make_replica(w, f, wrong_value(f, 1) if lies else honest_value(f)))
    return assignment, replicas


def test_a_tie_drops_every_disputed_file_by_default() -> None:
    assignment, replicas = colluding_pair()
    verdict = detect(assignment, replicas)
    assert verdict.rule == "unanimity" and verdict.num_max_cliques == 2
    assert verdict.flagged == frozenset()
    disputed = {assignment.files.index(t) for t in ((0, 1, 2), (0, 1, 3))}
    suspects_only = {assignment.files.index(t) for t in ((0, 2, 3), (1, 2, 3))}
    assert verdict.suspects == {0, 1, 2, 3}
    reasons = {f: d.reason for f, d in verdict.drops.items()}
    assert reasons == dict.fromkeys(disputed, "disputed") | dict.fromkeys(
        suspects_only, "suspects_only"
    )
    assert all(torch.equal(v, honest_value(f)) for f, v in verdict.accepted.items())
    assert "tied largest" in verdict.explain(0)


def test_a_tie_under_the_majority_rule_no_longer_hands_colluders_their_files() -> None:
    # Colluders 0 and 1 outnumber honest 2 (or 3) on their two files, but every voter of
    # those files is a suspect of the tie, so neither file is accepted.
    assignment, replicas = colluding_pair()
    verdict = detect(assignment, replicas, on_tie="majority")
    disputed = {assignment.files.index(t) for t in ((0, 1, 2), (0, 1, 3))}
    assert disputed <= set(verdict.dropped)
    assert all(torch.equal(v, honest_value(f)) for f, v in verdict.accepted.items())


def test_a_proven_liar_never_supplies_a_value_even_inside_the_unique_clique() -> None:
    # Workers 0, 1, 2 share file 0 and send the same wrong value; everyone agrees elsewhere.
    assignment = subsets(7, 3)
    liars = frozenset({0, 1, 2})
    file = assignment.files.index((0, 1, 2))
    replicas = [
        make_replica(w, f, wrong_value(f) if f == file else honest_value(f))
        for f, workers in enumerate(assignment.files)
        for w in workers
    ]
    assert detect(assignment, replicas).accepted_from[file] in liars
    verdict = detect(assignment, replicas, distrusted=liars)
    assert (
        verdict.rule == "unique_clique" and verdict.flagged == frozenset()
    )  # they disputed nobody
    assert verdict.drops[file].reason == "untrusted"
    assert verdict.drops[file].holders == (0, 1, 2)
    assert set(verdict.drops[file].digests) == {0, 1, 2}
    assert all(verdict.accepted_from[f] not in liars for f in verdict.accepted)


def test_unknown_tie_policy_is_refused() -> None:
    assignment, replicas = colluding_pair()
    with pytest.raises(ValueError, match="on_tie"):
        detect(assignment, replicas, on_tie="coin")  # type: ignore[arg-type]


def test_file_whose_replicas_are_all_flagged_is_dropped() -> None:
    assignment = subsets(5, 2)  # file 0 is (0, 1)
    verdict = detect(assignment, weak_attack(assignment, frozenset({0, 1})))
    assert verdict.flagged == {0, 1}
    assert verdict.dropped == (0,)


def test_single_replicas_left_by_stragglers_are_accepted_unless_their_worker_is_flagged() -> None:
    assignment = subsets(5, 3)
    assert (assignment.files[0], assignment.files[1], assignment.files[9]) == (
        (0, 1, 2),
        (0, 1, 3),
        (2, 3, 4),
    )
    missing = {(1, 0), (2, 0), (0, 1), (1, 1), (3, 1), (2, 9), (3, 9)}
    replicas = [
        r for r in weak_attack(assignment, frozenset({4})) if (r.worker, r.file) not in missing
    ]
    verdict = detect(assignment, replicas)
    assert verdict.flagged == {4}
    assert verdict.accepted_from[0] == 0  # its only replica, from an unflagged worker
    assert verdict.dropped == (1, 9)  # no replica at all; only the flagged worker's


def test_missing_workers_are_not_flagged_and_say_so() -> None:
    assignment = subsets(7, 3)
    replicas = [r for r in weak_attack(assignment, frozenset({2})) if r.worker != 5]
    verdict = detect(assignment, replicas)
    assert verdict.flagged == {2}
    assert 5 not in verdict.degrees
    assert "sent no replica" in verdict.explain(5)
    assert "not flagged" in verdict.explain(0)


# --- honest noise -----------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["tolerance", "auto"]))
def test_tiny_honest_floating_point_noise_never_flags_under_tolerance(seed: int, mode: str) -> None:
    gen = torch.Generator().manual_seed(seed)
    assignment = subsets(7, 3)
    replicas = []
    for f, workers in enumerate(assignment.files):
        for w in workers:
            noise = 1 + 1e-6 * (2 * torch.rand(DIM, generator=gen) - 1)
            replicas.append(make_replica(w, f, honest_value(f) * noise))
    verdict = detect(assignment, replicas, mode=mode)  # type: ignore[arg-type]
    assert verdict.flagged == frozenset()
    assert verdict.dropped == ()
    assert verdict.rule == "unique_clique"


def test_exact_mode_counts_honest_noise_as_disagreement() -> None:
    assignment = subsets(4, 2)
    replicas = [
        make_replica(r.worker, r.file, r.value * (1 + 1e-6 * (r.worker + 1)))
        for r in honest_replicas(assignment)
    ]
    assert detect(assignment, replicas, mode="auto").flagged == frozenset()
    exact = detect(assignment, replicas, mode="exact")
    assert exact.rule == "unanimity" and len(exact.dropped) == assignment.num_files


# --- r = 1: outliers --------------------------------------------------------------------


def single_replica_round(k: int, adversaries: frozenset[int]) -> tuple[Assignment, list[Replica]]:
    gen = torch.Generator().manual_seed(3)
    dim = 256
    base = torch.randn(dim, generator=gen)
    assignment = Assignment(num_workers=k, files=tuple((w,) for w in range(k)), scheme="none")
    replicas = [
        make_replica(
            w, w, -100 * base if w in adversaries else base + 0.1 * torch.randn(dim, generator=gen)
        )
        for w in range(k)
    ]
    return assignment, replicas


def test_single_replica_outliers_are_flagged_with_low_severity() -> None:
    adversaries = frozenset({2, 9, 11})
    assignment, replicas = single_replica_round(16, adversaries)
    verdict = detect(assignment, replicas, f=3)
    assert verdict.rule == "outlier"
    assert verdict.flagged == adversaries
    assert {e.severity for e in verdict.evidence.values()} == {"low"}
    assert {e.kind for e in verdict.evidence.values()} == {"outlier"}
    assert set(verdict.dropped) == adversaries
    assert "single replica" in verdict.explain(2)


def test_an_outlier_is_flagged_only_as_far_as_the_ratio_asks() -> None:
    assignment, replicas = single_replica_round(8, frozenset({1}))
    evidence = detect(assignment, replicas).evidence[1]
    ratio = evidence.distance_ratio
    assert ratio is not None and ratio > 50 and evidence.ratio_threshold == 2.0
    assert f"{ratio:.3g} times the typical one (over 2)" in evidence.summary()
    assert evidence.to_dict()["distance_ratio"] == ratio
    # The same update is spared by a ratio it does not reach, and flagged by one it does.
    assert detect(assignment, replicas, outlier_ratio=ratio * 1.01).flagged == frozenset()
    assert detect(assignment, replicas, outlier_ratio=ratio * 0.99).flagged == {1}
    with pytest.raises(ValueError, match="outlier_ratio must be at least 1"):
        detect(assignment, replicas, outlier_ratio=0.5)
    with pytest.raises(ValueError, match="outlier_ratio must be at least 1 and finite"):
        detect(assignment, replicas, outlier_ratio=float("inf"))  # screening off, silently
    with pytest.raises(ValueError, match="outlier_threshold must be positive and finite"):
        detect(assignment, replicas, outlier_threshold=float("inf"))


def test_outlier_detection_can_be_turned_off() -> None:
    assignment, replicas = single_replica_round(8, frozenset({1}))
    verdict = detect(assignment, replicas, outlier_threshold=None)
    assert verdict.rule == "none"
    assert verdict.flagged == frozenset() and verdict.dropped == ()


def test_outlier_scores_rank_the_far_update_highest_and_need_enough_updates() -> None:
    values = torch.zeros(6, 4)
    values[:, 0] = torch.tensor([0.0, 0.1, -0.1, 0.2, -0.2, 50.0])
    scores = outlier_scores(values, f=1)
    assert int(scores.argmax()) == 5 and scores[5] > 3.5
    assert scores[:5].abs().max() < 3.5
    with pytest.raises(ValueError, match="n >= f \\+ 3"):
        outlier_scores(values, f=4)


# --- Aspis+: windowed degree ------------------------------------------------------------


def test_degree_window_flags_workers_below_the_bound_over_the_window() -> None:
    window = DegreeWindow(window=3, threshold=4.0)
    assert window.observe({0: 5, 1: 3, 2: 6}) == {1}
    assert window.observe({0: 5, 1: 6, 2: 1}) == {2}  # 1: 9 >= 8; 2: 7 < 8
    assert window.observe({0: 5, 1: 4, 2: 6}) == frozenset()  # 2: 13 >= 12
    assert window.observe({0: 1, 1: 4, 2: 6}) == {0}  # round 1 left the window; 0: 11 < 12
    evidence = window.evidence()[0]
    assert (evidence.kind, evidence.score, evidence.threshold, evidence.rounds) == (
        "low_degree",
        11.0,
        12.0,
        3,
    )


def test_degree_window_does_not_count_rounds_a_worker_missed() -> None:
    assert low_degree_workers([{0: 4, 1: 4}, {0: 4}, {0: 4}], threshold=4.0) == frozenset()
    assert low_degree_workers([{0: 4, 1: 3}, {0: 4}], threshold=4.0) == {1}


def test_degree_window_follows_stable_ids_and_flags_weak_attackers() -> None:
    k, adversaries = 9, frozenset({1, 4, 6})
    window = DegreeWindow(window=4, threshold=k - len(adversaries) - 1)
    rng = random.Random(0)
    for _ in range(4):
        labels = list(range(k))  # label -> stable id, new every round
        rng.shuffle(labels)
        relabelled = frozenset(labels.index(s) for s in adversaries)
        verdict = detect(subsets(k, 3), weak_attack(subsets(k, 3), relabelled))
        flagged = window.observe({labels[w]: d for w, d in verdict.degrees.items()})
    assert flagged == adversaries


# --- evidence ---------------------------------------------------------------------------


def test_verdict_and_evidence_round_trip_through_json() -> None:
    assignment, replicas = pairwise_attack()
    verdicts = [
        detect(assignment, replicas),
        detect(*single_replica_round(10, frozenset({0})), f=1),
    ]
    window = DegreeWindow(window=2, threshold=5.0)
    window.observe({0: 1, 1: 6})
    records = [e for v in verdicts for e in v.evidence.values()] + list(window.evidence().values())
    assert {e.kind for e in records} == {"majority_minority", "outlier", "low_degree"}
    for data in [v.to_dict() for v in verdicts] + [e.to_dict() for e in records]:
        assert json.loads(json.dumps(data, allow_nan=False)) == data


def test_evidence_summary_names_workers_files_distances_and_the_rule() -> None:
    assignment = subsets(5, 3)
    verdict = detect(assignment, weak_attack(assignment, frozenset({3})), tol=DEFAULT_TOL)
    text = verdict.explain(3)
    files = assignment.files_of(3)
    assert text.startswith("Worker 3 disagreed with workers 0, 1, 2 and 4 on files ")
    assert all(str(f) in text for f in files)
    assert "tolerance 1e-05" in text
    assert "the 4 workers of the round's largest group (listed with the round) agree" in text
    assert "unique largest group" in text
    assert f"{verdict.evidence[3].files[0].distance_from(3):.3g}" in text
    assert "belongs to the unique largest group" in verdict.explain(0)


def test_exact_mode_evidence_says_digests_differ() -> None:
    assignment = subsets(5, 3)
    verdict = detect(assignment, weak_attack(assignment, frozenset({3})), mode="exact")
    assert "digests differ" in verdict.explain(3)


# --- input validation ------------------------------------------------------------------


def test_detect_rejects_replicas_that_do_not_fit_the_assignment() -> None:
    assignment = subsets(4, 2)
    good = honest_replicas(assignment)
    with pytest.raises(ValueError, match="not assigned"):
        detect(assignment, [*good, make_replica(3, 0, honest_value(0))])
    with pytest.raises(ValueError, match="two replicas"):
        detect(assignment, [*good, good[0]])
    with pytest.raises(ValueError, match="values"):
        detect(
            assignment,
            [*good[1:], make_replica(good[0].worker, good[0].file, torch.zeros(DIM + 1))],
        )
    with pytest.raises(ValueError, match="outside"):
        detect(assignment, [make_replica(0, 99, honest_value(0))])


def test_the_verdict_lists_each_conflict_with_the_files_it_was_on() -> None:
    # Workers 0 and 1 share files 0 and 1 with worker 2, which lies on file 1 only.
    assignment = Assignment(num_workers=3, files=((0, 1, 2), (0, 1, 2), (0, 1)))
    replicas = [
        make_replica(w, f, wrong_value(f) if (w, f) == (2, 1) else honest_value(f))
        for f, workers in enumerate(assignment.files)
        for w in workers
    ]
    verdict = detect(assignment, replicas)
    assert verdict.conflicts == {(0, 2): (1,), (1, 2): (1,)}
    assert verdict.flagged == {2}
    assert detect(assignment, honest_replicas(assignment)).conflicts == {}


def test_once_two_colluders_are_proven_the_honest_worker_they_outvoted_is_no_outsider() -> None:
    # Colluders 0 and 1 share file (0, 1, 2) with honest 2 and outvote it; everyone else
    # agrees, so the largest agreeing group is everyone but 2, and the round flags 2.
    assignment = subsets(7, 3)
    file = assignment.files.index((0, 1, 2))
    replicas = [
        make_replica(w, f, wrong_value(f) if f == file and w < 2 else honest_value(f))
        for f, workers in enumerate(assignment.files)
        for w in workers
    ]
    alone = detect(assignment, replicas)
    assert alone.flagged == {2} and alone.accepted_from[file] in (0, 1)
    proven = detect(assignment, replicas, distrusted=frozenset({0, 1}))
    assert proven.flagged == {0, 1} and proven.suspects == frozenset()
    assert proven.accepted_from[file] == 2
    assert torch.equal(proven.accepted[file], honest_value(file))
    # Their disagreements are still on the record.
    assert proven.conflicts == alone.conflicts
