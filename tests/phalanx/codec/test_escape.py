from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.codec.entropy import group_size
from phalanx.codec.escape import (
    ESCAPE_COST,
    Escape,
    plan_escape,
    split_frequencies,
    split_symbols,
    stream_cost,
)
from tests.support.codec_builders import peaked_symbols


def test_stream_cost_counts_search_steps_per_group():
    # 1,000 symbols over 10: groups of 3 (1,000 entries), 334 groups of 3 + 10 steps.
    assert group_size(10, 1000) == 3
    assert stream_cost(10, 1000) == 334 * (3 + 10)
    assert stream_cost(1, 1000) == 0
    assert stream_cost(7, 0) == 0


def test_small_and_flat_tables_stay_whole():
    assert plan_escape(np.array([5, 90, 5]), 100) is None  # too small to pay for a split
    assert plan_escape(np.ones(64, dtype=np.int64), 10**6) is None  # nothing to gain
    assert plan_escape(np.array([1, 1_000_000]), 10**6) is None  # two symbols: nothing to split


def test_a_peaked_table_splits_around_its_mode():
    frequencies = np.array([3, 10, 40, 2000, 60000, 3000, 50, 9, 1], dtype=np.int64)
    assert plan_escape(frequencies, 10**6) == Escape(start=4, width=1)
    wide = np.array([3, 10, 400, 20000, 20000, 20000, 500, 9, 1, 1], dtype=np.int64)
    assert plan_escape(wide, 10**6) == Escape(start=3, width=3)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 10**6), min_size=3, max_size=80).filter(lambda f: sum(f) > 0),
    st.integers(1, 2 * 10**6),
)
def test_a_split_always_leaves_frequency_and_two_symbols_outside_and_pays(frequencies, size):
    table = np.array(frequencies, dtype=np.int64)
    escape = plan_escape(table, size)
    if escape is None:
        return
    assert escape.width + 1 in (2, 4, 8, 16, 32, 64, 128)
    assert escape.start >= 0 and escape.start + escape.width <= len(table)
    core, tail = split_frequencies(table, escape)
    assert len(tail) >= 2 and core[0] == tail.sum() > 0
    np.testing.assert_array_equal(core[1:], table[escape.start : escape.start + escape.width])
    assert core.sum() == table.sum()
    assert stream_cost(len(table), size) > size + ESCAPE_COST


def test_the_plan_is_the_same_for_any_integer_type():
    frequencies = [3, 10, 40, 2000, 60000, 3000, 50, 9, 1]
    plans = {plan_escape(np.array(frequencies, dtype=t), 10**6) for t in (np.int32, np.int64)}
    assert plans == {Escape(start=4, width=1)}


def _reference_split(symbols: np.ndarray, sym_min: int, escape: Escape):
    index = (symbols - sym_min).astype(int)
    inside = (index >= escape.start) & (index < escape.start + escape.width)
    core = np.where(inside, index - escape.start + 1, 0)
    tail = index[~inside]
    tail = np.where(tail >= escape.start, tail - escape.width, tail)
    return core, tail


@settings(max_examples=100, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(-40, 5),
    st.sampled_from([1, 3, 7, 15]),
    st.integers(0, 20),
)
def test_split_symbols_gives_core_digits_and_tail_indices(seed, sym_min, width, start):
    symbols = peaked_symbols(seed, 3000, 3.0)
    symbols = np.clip(symbols, sym_min, sym_min + 60).astype(np.float32)
    escape = Escape(start=start, width=width)
    core, tail = split_symbols(symbols, sym_min, escape)
    want_core, want_tail = _reference_split(symbols, sym_min, escape)
    assert core.dtype == np.float32 and tail.dtype == np.float32
    np.testing.assert_array_equal(core, want_core)
    np.testing.assert_array_equal(tail, want_tail)
