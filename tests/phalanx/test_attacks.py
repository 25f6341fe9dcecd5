from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.attack_plugins import AttackPluginError, is_reference
from phalanx.attacks import (
    ATTACKS,
    ALittleIsEnough,
    Attack,
    AttackContext,
    Constant,
    DataAttack,
    Gaussian,
    InnerProductManipulation,
    LabelFlip,
    Mimic,
    ReversedGradient,
    SignFlip,
    alie_z,
    disagreement_targets,
    distortion_plan,
    load_attack,
    majority_files,
    select_adversaries,
)

# --------------------------------------------------------------------------- fixtures

FANO_LINES = ((0, 1, 2), (0, 3, 4), (0, 5, 6), (1, 3, 5), (1, 4, 6), (2, 3, 6), (2, 4, 5))


def subsets(K: int, r: int) -> Assignment:
    return Assignment(K, tuple(itertools.combinations(range(K), r)), "subsets")


def groups(K: int, r: int) -> Assignment:
    return Assignment(K, tuple(tuple(range(g, g + r)) for g in range(0, K, r)), "groups")


def fano() -> Assignment:
    return Assignment(7, FANO_LINES, "bibd")


def mols_15_3() -> Assignment:
    """ByzShield's K=15, r=3 scheme: 3 MOLS of order 5, worker (i, s) = 5 i + s."""
    files = tuple(
        tuple(sorted(5 * i + ((i + 1) * a + b) % 5 for i in range(3)))
        for a in range(5)
        for b in range(5)
    )
    return Assignment(15, files, "mols")


def brute_majorities(assignment: Assignment, adversaries: set[int]) -> int:
    return sum(2 * len(adversaries & set(ws)) > len(ws) for ws in assignment.files)


def brute_best_majorities(assignment: Assignment, q: int) -> int:
    return max(
        brute_majorities(assignment, set(c))
        for c in itertools.combinations(range(assignment.num_workers), q)
    )


def strongest_majorities(assignment: Assignment, q: int, exact_limit: int) -> int:
    adversaries = select_adversaries(assignment, q, mode="strong", exact_limit=exact_limit)
    assert len(adversaries) == q
    return len(majority_files(assignment, adversaries))


def ctx(worker: int = 0, *, honest_updates: Tensor | None = None, **kw: int) -> AttackContext:
    fields = {"round": 3, "file": 5, "num_workers": 10, "num_byzantine": 3, "seed": 7} | kw
    return AttackContext(worker=worker, honest_updates=honest_updates, **fields)


@pytest.fixture
def stack() -> Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(8, 32, generator=gen)


# --------------------------------------------------------------------------- update formulas


def test_reversed_gradient_scales_by_minus_100_by_default() -> None:
    honest = torch.tensor([1.0, -2.0, 0.5])
    assert torch.equal(ReversedGradient()(honest, ctx()), torch.tensor([-100.0, 200.0, -50.0]))
    assert torch.equal(ReversedGradient(scale=3.0)(honest, ctx()), torch.tensor([3.0, -6.0, 1.5]))


def test_constant_sends_value_in_every_coordinate() -> None:
    honest = torch.tensor([1.0, -2.0, 0.5])
    assert torch.equal(Constant()(honest, ctx()), torch.full((3,), -100.0))
    assert torch.equal(Constant(value=2.5)(honest, ctx()), torch.full((3,), 2.5))


def test_sign_flip_negates_the_honest_update() -> None:
    honest = torch.tensor([1.0, -2.0, 0.0])
    assert torch.equal(SignFlip()(honest, ctx()), torch.tensor([-1.0, 2.0, 0.0]))


def test_gaussian_draws_with_requested_mean_and_std_regardless_of_honest() -> None:
    honest = torch.full((20_000,), 1e6)
    out = Gaussian(std=3.0, mean=-2.0)(honest, ctx())
    assert abs(float(out.mean()) + 2.0) < 0.1
    assert abs(float(out.std()) - 3.0) < 0.1


def test_gaussian_rejects_negative_std() -> None:
    with pytest.raises(ValueError, match="std"):
        Gaussian(std=-1.0)


def test_alie_with_explicit_z_is_mean_plus_z_population_std(stack: Tensor) -> None:
    out = ALittleIsEnough(z=1.0)(stack[0], ctx(honest_updates=stack))
    values = stack.numpy()
    expected = values.mean(axis=0) + 1.0 * values.std(axis=0)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("n", "f"), [(50, 12), (20, 4), (15, 3), (100, 20)])
def test_alie_z_follows_the_papers_formula(n: int, f: int) -> None:
    s = np.floor(n / 2 + 1) - f
    assert alie_z(n, f) == pytest.approx(norm.ppf((n - s) / n))


def test_alie_z_for_fifty_workers_and_twelve_adversaries() -> None:
    # s = 26 - 12 = 14, Phi^{-1}(36 / 50) = Phi^{-1}(0.72)
    assert alie_z(50, 12) == pytest.approx(0.5828, abs=1e-4)


@pytest.mark.parametrize(("n", "f"), [(10, 6), (10, 10), (0, 0), (1, 0)])
def test_alie_z_refuses_unbounded_or_undefined_settings(n: int, f: int) -> None:
    with pytest.raises(ValueError, match="pass z explicitly"):
        alie_z(n, f)


@pytest.mark.parametrize("seed", range(5))
def test_alie_stays_within_z_std_of_the_mean_in_every_coordinate(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    honest = torch.randn(12, 64, generator=gen) * torch.rand(64, generator=gen) * 5
    context = ctx(honest_updates=honest, num_workers=20, num_byzantine=4)
    out = ALittleIsEnough()(honest[0], context)
    z = alie_z(20, 4)
    std, mean = torch.std_mean(honest, dim=0, correction=0)
    assert 0 < z < 1
    assert torch.all((out - mean).abs() <= z * std + 1e-5)
    assert torch.allclose(out, mean + z * std, atol=1e-5)


def test_ipm_points_against_the_mean_honest_update(stack: Tensor) -> None:
    stack = stack + 0.5  # a mean clearly away from zero
    out = InnerProductManipulation(epsilon=0.1)(stack[0], ctx(honest_updates=stack))
    mean = stack.mean(dim=0)
    assert torch.allclose(out, -0.1 * mean)
    assert float(out @ mean) < 0


def test_ipm_without_the_honest_stack_uses_the_own_update() -> None:
    honest = torch.tensor([1.0, -2.0])
    assert torch.equal(InnerProductManipulation()(honest, ctx()), torch.tensor([-100.0, 200.0]))


def test_mimic_copies_the_chosen_honest_update(stack: Tensor) -> None:
    out = Mimic(index=3)(stack[0], ctx(honest_updates=stack))
    assert torch.equal(out, stack[3])
    out.add_(1.0)
    assert not torch.equal(out, stack[3])  # a copy, not a view


@pytest.mark.parametrize("attack", [ALittleIsEnough(), Mimic()])
def test_omniscient_attacks_need_the_honest_stack(attack: Attack) -> None:
    with pytest.raises(ValueError, match="honest_updates"):
        attack(torch.zeros(4), ctx())


def test_omniscient_attacks_reject_a_stack_of_another_dimension(stack: Tensor) -> None:
    with pytest.raises(ValueError, match="honest_updates"):
        ALittleIsEnough(z=1.0)(torch.zeros(5), ctx(honest_updates=stack))


def test_mimic_rejects_an_index_outside_the_stack(stack: Tensor) -> None:
    with pytest.raises(ValueError, match="index"):
        Mimic(index=8)(stack[0], ctx(honest_updates=stack))


UPDATE_ATTACKS = sorted(name for name in ATTACKS if name != "label_flip")


@pytest.mark.parametrize("name", UPDATE_ATTACKS)
def test_every_update_attack_keeps_shape_and_dtype(name: str, stack: Tensor) -> None:
    attack = load_attack(name)
    assert isinstance(attack, Attack)
    out = attack(stack[1], ctx(honest_updates=stack))
    assert out.shape == stack[1].shape
    assert out.dtype == torch.float32


@pytest.mark.parametrize("name", UPDATE_ATTACKS)
def test_colluders_agree_bit_for_bit_on_the_same_round_and_file(name: str, stack: Tensor) -> None:
    attack = load_attack(name)
    assert isinstance(attack, Attack)
    outs = [attack(stack[2].clone(), ctx(w, honest_updates=stack)) for w in (0, 4, 9)]
    assert all(torch.equal(outs[0], o) for o in outs[1:])


def test_gaussian_noise_changes_with_round_file_and_seed() -> None:
    honest = torch.zeros(16)
    base = Gaussian()(honest, ctx())
    for other in (ctx(round=4), ctx(file=6), ctx(seed=8)):
        assert not torch.equal(base, Gaussian()(honest, other))


@pytest.mark.parametrize(
    ("round_", "worker", "num_byzantine", "seed"),
    [(0, 10, 2, 0), (0, -1, 2, 0), (-1, 0, 2, 0), (0, 0, 11, 0), (0, 0, 2, -3)],
)
def test_context_rejects_impossible_values(
    round_: int, worker: int, num_byzantine: int, seed: int
) -> None:
    with pytest.raises(ValueError):
        AttackContext(round_, 0, worker, 10, num_byzantine, seed=seed)


# --------------------------------------------------------------------------- label flip


def test_label_flip_maps_y_to_num_classes_minus_one_minus_y() -> None:
    labels = torch.tensor([0, 1, 9, 4])
    assert torch.equal(LabelFlip().poison_labels(labels, 10), torch.tensor([9, 8, 0, 5]))
    assert isinstance(LabelFlip(), DataAttack)
    assert not isinstance(LabelFlip(), Attack)


def test_label_flip_rejects_labels_outside_the_classes() -> None:
    with pytest.raises(ValueError, match="labels"):
        LabelFlip().poison_labels(torch.tensor([0, 10]), 10)


# --------------------------------------------------------------------------- registry and plug-ins


@dataclass(frozen=True)
class HalfStep:
    name: ClassVar[str] = "half_step"
    factor: float = 0.5

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        return honest * self.factor


class NotAnAttack:
    name = "not_an_attack"


NOT_A_CLASS = 3


def test_registry_holds_every_attack_under_its_own_name() -> None:
    assert set(ATTACKS) == {
        "reversed_gradient",
        "constant",
        "sign_flip",
        "gaussian",
        "alie",
        "ipm",
        "mimic",
        "label_flip",
    }
    assert all(load_attack(name).name == name for name in ATTACKS)


def test_load_attack_by_name_passes_parameters() -> None:
    attack = load_attack("constant", value=4.0)
    assert attack == Constant(value=4.0)
    assert isinstance(load_attack("label_flip"), LabelFlip)


def test_load_attack_lists_known_names_for_an_unknown_one() -> None:
    with pytest.raises(ValueError, match="reversed_gradient"):
        load_attack("reverse_gradient")


def test_load_attack_rejects_bad_parameters() -> None:
    with pytest.raises(AttackPluginError, match="rejected parameters"):
        load_attack("constant", valu=4.0)


def test_load_attack_refuses_a_plugin_the_host_does_not_allow(
    allow_attack_plugins: Callable[..., None],
) -> None:
    with pytest.raises(AttackPluginError, match="not allowed on this host"):
        load_attack(f"{__name__}:HalfStep", factor=0.25)


def test_load_attack_instantiates_an_allowed_plugin_by_dotted_path(
    allow_attack_plugins: Callable[..., None],
) -> None:
    allow_attack_plugins(f"{__name__}:HalfStep")
    attack = load_attack(f"{__name__}:HalfStep", factor=0.25)
    assert isinstance(attack, Attack)
    assert attack.name == "half_step"
    assert torch.equal(attack(torch.tensor([4.0]), ctx()), torch.tensor([1.0]))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("phalanx_no_such_module_xyz:Attack", "cannot import"),
        (f"{__name__}:Missing", "has no 'Missing'"),
        (f"{__name__}:NotAnAttack", "neither protocol"),
        (f"{__name__}:NOT_A_CLASS", "must name a class"),
        (f"{__name__}:", "package.module:Name"),
        (f"{__name__}:HalfStep:x", "package.module:Name"),
    ],
)
def test_load_attack_explains_a_bad_plugin(
    spec: str, message: str, allow_attack_plugins: Callable[..., None]
) -> None:
    if is_reference(spec):
        allow_attack_plugins(spec)
    with pytest.raises(AttackPluginError, match=message):
        load_attack(spec)


# --------------------------------------------------------------------------- adversary selection


def test_weak_selection_is_deterministic_per_seed() -> None:
    assignment = subsets(9, 3)
    first = select_adversaries(assignment, 3, mode="weak", seed=11)
    assert len(first) == 3
    assert first == select_adversaries(assignment, 3, mode="weak", seed=11)
    others = {select_adversaries(assignment, 3, mode="weak", seed=s) for s in range(20)}
    assert len(others) > 10


def test_weak_selection_picks_every_worker_about_equally_often() -> None:
    assignment = groups(12, 3)
    counts = Counter(
        w for s in range(2000) for w in select_adversaries(assignment, 3, mode="weak", seed=s)
    )
    # expected 500 per worker, standard deviation about 19
    assert set(counts) == set(range(12))
    assert all(420 < c < 580 for c in counts.values())


def test_strong_selection_puts_two_adversaries_in_one_group() -> None:
    assignment = groups(15, 3)
    for seed in range(5):
        adversaries = select_adversaries(assignment, 2, mode="strong", seed=seed)
        assert any(adversaries <= set(g) for g in assignment.files)


@pytest.mark.parametrize("exact_limit", [20_000, 0], ids=["exact", "greedy"])
def test_strong_selection_on_groups_takes_detox_worst_case(exact_limit: int) -> None:
    assignment = groups(15, 3)
    found = [
        len(
            majority_files(
                assignment,
                select_adversaries(assignment, q, mode="strong", exact_limit=exact_limit),
            )
        )
        for q in range(2, 8)
    ]
    assert found == [q // 2 for q in range(2, 8)]


@pytest.mark.parametrize("exact_limit", [20_000, 0], ids=["exact", "greedy"])
def test_strong_selection_on_mols_matches_byzshield_worst_case(exact_limit: int) -> None:
    # ByzShield, K=15, r=3: distorted fractions 0.04, 0.12, 0.20, 0.32, 0.48, 0.56 of 25 files
    assignment = mols_15_3()
    found = [
        len(
            majority_files(
                assignment,
                select_adversaries(assignment, q, mode="strong", exact_limit=exact_limit),
            )
        )
        for q in range(2, 8)
    ]
    assert found == [1, 3, 5, 8, 12, 14]


@pytest.mark.parametrize("q", range(8))
def test_strong_selection_on_subsets_maximises_majorities_like_brute_force(q: int) -> None:
    assignment = subsets(7, 3)
    adversaries = select_adversaries(assignment, q, mode="strong")
    assert len(adversaries) == q
    assert brute_majorities(assignment, set(adversaries)) == brute_best_majorities(assignment, q)


@pytest.mark.parametrize("exact_limit", [20_000, 0], ids=["exact", "greedy"])
def test_strong_selection_on_the_fano_plane_avoids_a_line(exact_limit: int) -> None:
    # a non-collinear triple holds a majority of the three lines through its pairs
    assignment = fano()
    adversaries = select_adversaries(assignment, 3, mode="strong", exact_limit=exact_limit)
    assert tuple(sorted(adversaries)) not in FANO_LINES
    assert len(majority_files(assignment, adversaries)) == 3 == brute_best_majorities(assignment, 3)


def test_strong_selection_is_deterministic_per_seed() -> None:
    assignment = groups(15, 3)
    picks = [select_adversaries(assignment, 4, mode="strong", seed=s) for s in (0, 0, 1, 1)]
    assert picks[0] == picks[1]
    assert picks[2] == picks[3]


@pytest.mark.parametrize("q", [-1, 8])
def test_selection_rejects_q_outside_zero_to_k(q: int) -> None:
    with pytest.raises(ValueError, match="q must be"):
        select_adversaries(subsets(7, 3), q, mode="weak")


def test_selection_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        select_adversaries(subsets(7, 3), 2, mode="medium")  # type: ignore[arg-type]


def test_majority_files_counts_strictly_more_than_half_the_replicas() -> None:
    assignment = Assignment(5, ((0, 1), (0, 1, 2), (1, 2, 3, 4), (3,)), "custom")
    assert majority_files(assignment, {0, 1}) == {0, 1}
    assert majority_files(assignment, {1, 2}) == {1}  # 2 of 4 is no majority
    assert majority_files(assignment, {3}) == {3}


# --------------------------------------------------------------------------- distortion plans


def test_all_strategy_distorts_every_file_of_every_adversary() -> None:
    assignment = subsets(7, 3)
    plan = distortion_plan(assignment, {1, 5}, strategy="all")
    assert plan == {1: set(assignment.files_of(1)), 5: set(assignment.files_of(5))}


def test_only_majorities_distorts_exactly_the_files_adversaries_win() -> None:
    assignment = subsets(7, 3)
    plan = distortion_plan(assignment, {1, 5}, strategy="only_majorities")
    expected = {f for f, ws in enumerate(assignment.files) if {1, 5} <= set(ws)}
    assert plan == {1: expected, 5: expected}
    assert len(expected) == 5


def test_fixed_disagreement_distorts_files_whose_honest_replicas_lie_in_the_targets() -> None:
    assignment = subsets(7, 3)
    adversaries, targets = {0, 1}, {2, 3}
    plan = distortion_plan(assignment, adversaries, strategy="fixed_disagreement", targets=targets)
    for a in adversaries:
        expected = {f for f in assignment.files_of(a) if set(assignment.files[f]) <= {0, 1, 2, 3}}
        assert plan[a] == expected
    # every 3-subset of {0, 1, 2, 3} holds an adversary: T has only two workers
    assert set().union(*plan.values()) == {
        f for f, ws in enumerate(assignment.files) if set(ws) <= {0, 1, 2, 3}
    }


def test_fixed_disagreement_keeps_adversaries_in_agreement_outside_the_targets() -> None:
    assignment = subsets(9, 3)
    adversaries = select_adversaries(assignment, 3, mode="strong")
    targets = disagreement_targets(assignment, adversaries)
    plan = distortion_plan(assignment, adversaries, strategy="fixed_disagreement")
    outside = set(range(9)) - adversaries - targets
    assert len(targets) == 3
    assert not targets & adversaries
    assert len(outside) == 9 - 2 * 3
    for a, h in itertools.product(adversaries, outside):
        assert not plan[a] & set(assignment.shared_files(a, h))
    for a, t in itertools.product(adversaries, targets):
        assert plan[a] & set(assignment.shared_files(a, t))  # disagrees with every target


def test_disagreement_targets_maximise_distorted_files_like_brute_force() -> None:
    files = ((0, 2, 3), (0, 4, 5), (1, 2, 6), (1, 3, 4), (0, 1, 6), (2, 5, 6), (0, 3), (1, 3))
    assignment = Assignment(7, files, "custom")
    adversaries = {0, 1}

    def distorted(targets: set[int]) -> int:
        plan = distortion_plan(
            assignment, adversaries, strategy="fixed_disagreement", targets=targets
        )
        return len(set().union(*plan.values()))

    options = [distorted(set(t)) for t in itertools.combinations(range(2, 7), 2)]
    assert min(options) < max(options) == 3
    for seed in range(4):
        chosen = disagreement_targets(assignment, adversaries, seed=seed)
        assert distorted(set(chosen)) == max(options)


def test_fixed_disagreement_rejects_targets_that_are_adversaries() -> None:
    with pytest.raises(ValueError, match="honest"):
        distortion_plan(subsets(7, 3), {0, 1}, strategy="fixed_disagreement", targets={1, 2})


def test_distortion_plan_rejects_unknown_strategy_and_workers() -> None:
    with pytest.raises(ValueError, match="strategy"):
        distortion_plan(subsets(7, 3), {0}, strategy="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="outside"):
        distortion_plan(subsets(7, 3), {7}, strategy="all")


@st.composite
def assignments_with_adversaries(draw: st.DrawFn) -> tuple[Assignment, frozenset[int]]:
    K = draw(st.integers(3, 9))
    r = draw(st.integers(1, min(K, 4)))
    pool = list(itertools.combinations(range(K), r))
    files = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=12))
    adversaries = draw(st.sets(st.integers(0, K - 1), max_size=K))
    return Assignment(K, tuple(files), "custom"), frozenset(adversaries)


@settings(max_examples=60, deadline=None)
@given(assignments_with_adversaries())
def test_distortion_plans_follow_their_definitions(
    case: tuple[Assignment, frozenset[int]],
) -> None:
    assignment, adversaries = case
    every = distortion_plan(assignment, adversaries, strategy="all")
    majorities = distortion_plan(assignment, adversaries, strategy="only_majorities")
    fixed = distortion_plan(assignment, adversaries, strategy="fixed_disagreement")
    targets = disagreement_targets(assignment, adversaries)
    won = majority_files(assignment, adversaries)
    assert set(every) == set(majorities) == set(fixed) == adversaries
    assert len(targets) == min(len(adversaries), assignment.num_workers - len(adversaries))
    for a in adversaries:
        assert every[a] == set(assignment.files_of(a))
        assert majorities[a] == every[a] & won
        for f in every[a]:
            honest = set(assignment.files[f]) - adversaries
            assert (f in fixed[a]) == (honest <= targets)
