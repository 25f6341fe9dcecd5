"""The heterogeneity grid: its size, and a valid local-data run config for every case."""

from __future__ import annotations

from benchmarks.lib.heterogeneity_grid import (
    ATTACKS,
    NO_ATTACK,
    PARTITIONS,
    PRES,
    QS,
    RULES,
    SEED,
    Case,
    F,
    K,
    Settings,
    grid,
)

SETTINGS = Settings(rounds=2, model="mlp", steps=3, batch_size=32, lr=0.05, eval_samples=100)


def test_the_full_grid_has_the_432_cases_the_issue_names() -> None:
    cases = grid(PARTITIONS, RULES, PRES, ATTACKS, QS)
    assert len(cases) == 4 * 12 * (1 + 4 * 2) == 432
    assert len({c.run_id for c in cases}) == 432


def test_every_case_without_attack_is_a_local_data_run_of_k_clients_at_f() -> None:
    for case in grid(PARTITIONS, RULES, PRES, (), QS):
        config = case.config(SETTINGS)
        assert (case.attack, case.q, config.attack.q) == (NO_ATTACK, 0, 0)
        assert config.data.mode == "local" and config.assignment.num_workers == K
        assert config.assignment.r == 1 and config.aggregation.f == F
        assert config.aggregation.pre == case.pre
        alpha = None if config.data.partition is None else config.data.partition.alpha
        assert alpha == case.partition.alpha


def test_labels_name_the_partition_and_the_aggregator() -> None:
    case = Case(PARTITIONS[2], "median", "nnm", "alie", 4)
    assert (case.partition.label, case.aggregator) == ("dirichlet-0.3", "nnm + median")
    assert case.run_id == "heterogeneity-dirichlet-0.3-nnm-median-alie-q4"


def test_every_attacked_case_is_a_simulated_attack_on_local_data() -> None:
    for case in grid(PARTITIONS, RULES, PRES, ATTACKS, QS):
        if case.q:
            attack = case.config(SETTINGS).attack
            assert (attack.name, attack.q, attack.strategy) == (case.attack, case.q, "all")


def test_the_cases_without_attack_come_with_q_0_only() -> None:
    attacked = grid(PARTITIONS[:1], ("median",), (None,), ("alie",), (4,))
    assert [(c.attack, c.q) for c in attacked] == [("alie", 4)]
    clean = grid(PARTITIONS[:1], ("median",), (None,), ("alie",), (0,))
    assert [(c.attack, c.q) for c in clean] == [(NO_ATTACK, 0)]


def test_each_seed_is_a_case_of_its_own_and_the_first_keeps_its_run_ids() -> None:
    one = grid(PARTITIONS[:1], ("median",), (None,), ("alie",), (0, 4))
    two = grid(PARTITIONS[:1], ("median",), (None,), ("alie",), (0, 4), (SEED, 2027))
    assert two[:2] == one
    assert [c.seed for c in two] == [SEED, SEED, 2027, 2027]
    assert two[2].run_id == one[0].run_id + "-seed2027"
    assert two[2].config(SETTINGS).seed == 2027 and one[0].config(SETTINGS).seed == SEED
