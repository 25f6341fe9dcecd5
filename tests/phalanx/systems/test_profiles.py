from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.systems import (
    SystemsConfig,
    TraceRow,
    choose_stragglers,
    draw_profiles,
    load_trace,
    profiles_from_trace,
    straggler_count,
)
from phalanx.systems.profiles import base_seconds_per_sample

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "traces" / "devices-100.csv"
EXPONENTIAL = SystemsConfig(
    speed_distribution="shifted_exponential", speed_scale_s=0.002, speed_shift_s=0.001
)


def _speeds(config: SystemsConfig, num_workers: int = 2000, seed: int = 1) -> list[float]:
    return [p.seconds_per_sample for p in draw_profiles(config, num_workers, seed)]


def test_the_same_inputs_draw_the_same_profiles() -> None:
    config = EXPONENTIAL.model_copy(update={"straggler_fraction": 0.2})
    assert draw_profiles(config, 15, 7) == draw_profiles(config, 15, 7)
    assert draw_profiles(config, 15, 7) != draw_profiles(config, 15, 8)


def test_a_workers_speed_does_not_depend_on_how_many_workers_there_are() -> None:
    assert draw_profiles(EXPONENTIAL, 10, 3) == draw_profiles(EXPONENTIAL, 40, 3)[:10]


def test_constant_speed_is_the_shift_plus_the_scale_for_every_worker() -> None:
    config = SystemsConfig(speed_scale_s=0.5, speed_shift_s=0.25)
    assert set(_speeds(config, 50)) == {0.75}


def test_the_shifted_exponentials_minimum_is_the_shift_and_its_mean_shift_plus_scale() -> None:
    speeds = _speeds(EXPONENTIAL)
    assert min(speeds) >= 0.001
    assert min(speeds) < 0.001 + 0.002 * 0.01
    assert statistics.fmean(speeds) == pytest.approx(0.003, rel=0.1)


def test_the_lognormals_median_is_the_scale() -> None:
    config = SystemsConfig(speed_distribution="lognormal", speed_scale_s=0.004, speed_sigma=0.5)
    assert statistics.median(_speeds(config)) == pytest.approx(0.004, rel=0.1)


def test_the_paretos_minimum_is_shift_plus_scale_and_its_tail_is_heavy() -> None:
    config = SystemsConfig(
        speed_distribution="pareto", speed_scale_s=0.001, speed_shift_s=0.001, speed_alpha=1.5
    )
    speeds = _speeds(config)
    assert min(speeds) >= 0.002
    assert min(speeds) < 0.002 * 1.01
    # P(Z > 10) = 10^-1.5, about 3 % of 2000 workers
    assert 30 < sum(s > 0.001 + 0.01 for s in speeds) < 100


@pytest.mark.parametrize(
    ("fraction", "num_workers", "count"),
    [(0.0, 15, 0), (0.1, 15, 2), (0.2, 15, 3), (0.2, 100, 20), (0.5, 3, 2), (1.0, 7, 7)],
)
def test_the_straggler_count_rounds_the_fraction_halves_up(
    fraction: float, num_workers: int, count: int
) -> None:
    assert straggler_count(fraction, num_workers) == count


@given(
    fraction=st.floats(min_value=0.0, max_value=1.0),
    num_workers=st.integers(min_value=1, max_value=200),
    seed=st.integers(min_value=0, max_value=2**63 - 1),
)
def test_exactly_the_counted_stragglers_are_slowed_by_k(
    fraction: float, num_workers: int, seed: int
) -> None:
    config = EXPONENTIAL.model_copy(
        update={"straggler_fraction": fraction, "straggler_slowdown": 4.0}
    )
    profiles = draw_profiles(config, num_workers, seed)
    stragglers = [w for w, p in enumerate(profiles) if p.straggler]
    assert len(stragglers) == straggler_count(fraction, num_workers)
    assert set(stragglers) == choose_stragglers(fraction, num_workers, seed)
    for worker, profile in enumerate(profiles):
        base = base_seconds_per_sample(config, seed, worker)
        assert profile.seconds_per_sample == (4.0 * base if profile.straggler else base)


def test_the_seed_chooses_the_stragglers() -> None:
    chosen = {choose_stragglers(0.2, 15, seed) for seed in range(20)}
    assert len(chosen) > 10


def test_links_and_latency_come_from_the_config_without_a_trace() -> None:
    config = SystemsConfig(up_bytes_per_s=100.0, down_bytes_per_s=200.0, latency_s=0.3)
    profile = draw_profiles(config, 1, 0)[0]
    assert (profile.up_bytes_per_s, profile.down_bytes_per_s, profile.latency_s) == (
        100.0,
        200.0,
        0.3,
    )


def test_a_trace_gives_each_worker_its_row_and_stragglers_still_apply() -> None:
    rows = load_trace(EXAMPLE)
    config = SystemsConfig(trace=str(EXAMPLE), straggler_fraction=0.2, straggler_slowdown=5.0)
    profiles = draw_profiles(config, 15, 4)
    assert len(profiles) == 15
    for row, profile in zip(rows, profiles, strict=False):
        slowdown = 5.0 if profile.straggler else 1.0
        assert profile.seconds_per_sample == row.seconds_per_sample * slowdown
        assert (profile.up_bytes_per_s, profile.down_bytes_per_s, profile.latency_s) == (
            row.up_bytes_per_s,
            row.down_bytes_per_s,
            row.latency_s,
        )
    assert sum(p.straggler for p in profiles) == 3


def test_a_trace_without_latency_takes_the_configs() -> None:
    rows = [TraceRow(0, 0.1, 10.0, 20.0, None), TraceRow(1, 0.2, 10.0, 20.0, 0.5)]
    profiles = profiles_from_trace(SystemsConfig(latency_s=0.25), rows, 2, 0)
    assert [p.latency_s for p in profiles] == [0.25, 0.5]


def test_a_trace_with_fewer_workers_than_the_run_is_refused() -> None:
    rows = [TraceRow(0, 0.1, 10.0, 20.0, None), TraceRow(1, 0.2, 10.0, 20.0, None)]
    with pytest.raises(ValueError, match="the trace has 2 workers but the run has 3"):
        profiles_from_trace(SystemsConfig(), rows, 3, 0)


def test_trace_rows_out_of_order_are_refused() -> None:
    rows = [TraceRow(1, 0.1, 10.0, 20.0, None), TraceRow(0, 0.2, 10.0, 20.0, None)]
    with pytest.raises(ValueError, match=r"workers 0\.\.N-1, in order"):
        profiles_from_trace(SystemsConfig(), rows, 2, 0)


def test_a_config_naming_a_missing_trace_fails_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read it"):
        draw_profiles(SystemsConfig(trace=str(tmp_path / "absent.csv")), 3, 0)


@pytest.mark.parametrize(("num_workers", "seed"), [(0, 0), (3, -1)])
def test_no_workers_or_a_negative_seed_is_refused(num_workers: int, seed: int) -> None:
    with pytest.raises(ValueError, match="must be >= "):
        draw_profiles(SystemsConfig(), num_workers, seed)
