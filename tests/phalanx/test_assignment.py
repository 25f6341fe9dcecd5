import itertools
import json
import math
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.assignment import (
    MAX_SUBSET_FILES,
    SCHEMES,
    Assignment,
    bibd_assignment,
    count_files,
    groups_assignment,
    make_assignment,
    mols_assignment,
    none_assignment,
    random_assignment,
    relabel,
    round_seed,
    subsets_assignment,
)

BIBD_ORDERS = [k for k in range(3, 100) if k % 6 in (1, 3)]
SMALL_PRIMES = [2, 3, 5, 7, 11, 13]


def pair_counts(a: Assignment) -> Counter[tuple[int, int]]:
    """Files shared by every pair of workers, zero included."""
    counts: Counter[tuple[int, int]] = Counter(
        {p: 0 for p in itertools.combinations(range(a.num_workers), 2)}
    )
    for workers in a.files:
        counts.update(itertools.combinations(workers, 2))
    return counts


def load_spread(a: Assignment) -> int:
    return max(a.worker_loads) - min(a.worker_loads)


def named_values(message: str, after: str) -> list[int]:
    """Integers named in ``message`` right after ``after`` (``13 or 15``, ``15 (l=5)``)."""
    tail = message.split(after, 1)[1]
    return [int(v) for v in re.findall(r"(?:^|or )(\d+)", tail.strip())]


@st.composite
def scheme_parameters(draw: st.DrawFn) -> tuple[str, int, int, int | None]:
    scheme = draw(st.sampled_from(SCHEMES))
    if scheme == "none":
        return scheme, draw(st.integers(1, 60)), 1, None
    if scheme == "groups":
        r = draw(st.integers(1, 8))
        return scheme, r * draw(st.integers(1, 10)), r, None
    if scheme == "subsets":
        k = draw(st.integers(1, 11))
        return scheme, k, draw(st.integers(1, k)), None
    if scheme == "bibd":
        return scheme, draw(st.sampled_from(BIBD_ORDERS[:12])), 3, None
    if scheme == "mols":
        r = draw(st.integers(1, 5))
        prime = draw(st.sampled_from([p for p in SMALL_PRIMES if p >= r + 1]))
        return scheme, r * prime, r, None
    k = draw(st.integers(1, 200))
    return scheme, k, draw(st.integers(1, min(k, 6))), draw(st.integers(1, 3 * k))


@settings(max_examples=150, deadline=None)
@given(scheme_parameters(), st.integers(0, 2**32))
def test_every_scheme_puts_each_file_on_r_distinct_workers_with_balanced_load(
    params: tuple[str, int, int, int | None], seed: int
) -> None:
    scheme, k, r, num_files = params
    a = make_assignment(scheme, k, r, num_files=num_files, seed=seed)
    assert a.scheme == scheme
    assert a.num_workers == k
    assert a.replication == r
    assert all(len(set(w)) == r and list(w) == sorted(w) for w in a.files)
    assert all(0 <= w < k for workers in a.files for w in workers)
    assert sum(a.worker_loads) == a.num_files * r
    if scheme == "random":
        assert load_spread(a) <= 1
    else:
        assert load_spread(a) == 0


def test_none_puts_file_i_on_worker_i() -> None:
    a = none_assignment(4)
    assert a.files == ((0,), (1,), (2,), (3,))
    assert a.replication == 1


def test_groups_are_disjoint_consecutive_blocks_of_r_workers() -> None:
    a = groups_assignment(9, 3)
    assert a.files == ((0, 1, 2), (3, 4, 5), (6, 7, 8))
    assert a.shared_files(0, 2) == (0,)
    assert a.shared_files(0, 3) == ()


def test_subsets_are_all_r_subsets_in_combinations_order() -> None:
    a = subsets_assignment(6, 3)
    assert a.files == tuple(itertools.combinations(range(6), 3))
    assert a.num_files == 20
    assert set(a.worker_loads) == {10}


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9).flatmap(lambda k: st.tuples(st.just(k), st.integers(2, k))))
def test_subsets_every_pair_of_workers_shares_c_k_minus_2_r_minus_2_files(
    kr: tuple[int, int],
) -> None:
    k, r = kr
    a = subsets_assignment(k, r)
    assert set(pair_counts(a).values()) == {math.comb(k - 2, r - 2)}
    assert set(a.worker_loads) == {math.comb(k - 1, r - 1)}


def test_subsets_refuses_more_files_than_the_cap_and_points_to_scalable_schemes() -> None:
    assert math.comb(100, 5) > MAX_SUBSET_FILES
    with pytest.raises(ValueError, match="use bibd, mols or random"):
        subsets_assignment(100, 5)


@pytest.mark.parametrize("k", BIBD_ORDERS)
def test_bibd_is_a_steiner_triple_system_for_every_admissible_k(k: int) -> None:
    a = bibd_assignment(k)
    assert a.num_files == k * (k - 1) // 6
    assert set(a.worker_loads) == {(k - 1) // 2}
    assert all(len(w) == 3 for w in a.files)
    assert set(pair_counts(a).values()) == {1}
    assert len(set(a.files)) == a.num_files


def test_bibd_sts15_has_35_triples_7_per_worker_and_one_shared_file_per_pair() -> None:
    a = make_assignment("bibd", 15, 3)
    assert a.num_files == 35
    assert set(a.worker_loads) == {7}
    assert all(len(a.shared_files(i, j)) == 1 for i, j in itertools.combinations(range(15), 2))


@pytest.mark.parametrize(
    ("k", "expected"),
    [(14, "nearest valid: 13 or 15"), (12, "nearest valid: 13"), (5, "nearest valid: 3 or 7")],
)
def test_bibd_rejects_inadmissible_k_naming_the_nearest_admissible(k: int, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        bibd_assignment(k)


@pytest.mark.parametrize("k", [1, 2])
def test_bibd_rejects_degenerate_k_naming_3_and_7(k: int) -> None:
    with pytest.raises(ValueError, match="3 or 7"):
        bibd_assignment(k)


def test_bibd_rejects_replication_other_than_3() -> None:
    with pytest.raises(ValueError, match="r must be 3"):
        bibd_assignment(7, 2)


@given(st.integers(3, 400).filter(lambda k: k % 6 not in (1, 3)))
def test_bibd_error_names_admissible_k_and_none_is_closer(k: int) -> None:
    with pytest.raises(ValueError) as info:
        bibd_assignment(k)
    named = named_values(str(info.value), "nearest valid:")
    assert named
    for n in named:
        assert bibd_assignment(n).num_workers == n
    distance = abs(named[0] - k)
    assert all(abs(n - k) == distance for n in named)
    admissible = [j for j in range(3, 2 * k) if j % 6 in (1, 3)]
    assert min(abs(j - k) for j in admissible) == distance


def test_mols_k15_r3_has_25_files_5_per_worker_3_workers_each() -> None:
    a = make_assignment("mols", 15, 3)
    assert a.num_files == 25
    assert set(a.worker_loads) == {5}
    assert a.replication == 3
    counts = pair_counts(a)
    for (i, j), shared in counts.items():
        # Workers of one square (same block of l = 5 labels) share nothing,
        # workers of two different squares share exactly one file.
        assert shared == (0 if i // 5 == j // 5 else 1)


def test_mols_file_x_y_goes_to_the_cell_value_of_each_latin_square() -> None:
    a = mols_assignment(15, 3)
    x, y, order = 1, 2, 5
    expected = tuple((i - 1) * order + (i * x + y) % order for i in (1, 2, 3))
    assert a.workers_of(x * order + y) == expected == (3, 9, 10)


@given(
    st.integers(1, 6).flatmap(
        lambda r: st.tuples(st.just(r), st.sampled_from([p for p in SMALL_PRIMES if p >= r + 1]))
    )
)
def test_mols_any_two_workers_share_at_most_one_file(rl: tuple[int, int]) -> None:
    r, prime = rl
    a = mols_assignment(r * prime, r)
    assert a.num_files == prime * prime
    assert set(a.worker_loads) == {prime}
    assert max(pair_counts(a).values(), default=0) <= 1


@pytest.mark.parametrize(
    ("k", "r", "expected"),
    [
        (16, 3, r"nearest valid K: 15 \(l=5\)"),
        (18, 3, r"nearest valid K: 15 \(l=5\) or 21 \(l=7\)"),
        (4, 3, r"nearest valid K: 15 \(l=5\)"),
        (15, 5, r"nearest valid K: 35 \(l=7\) \(or keep K=15 with r=3\)"),
    ],
)
def test_mols_rejects_impossible_k_naming_the_nearest_k(k: int, r: int, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        mols_assignment(k, r)


@given(st.integers(1, 6), st.integers(1, 300))
def test_mols_error_names_a_k_that_builds_and_none_is_closer(r: int, k: int) -> None:
    valid = [r * p for p in range(r + 1, 700) if all(p % d for d in range(2, p))]
    if k in valid or k < r:
        return
    with pytest.raises(ValueError) as info:
        mols_assignment(k, r)
    named = named_values(str(info.value), "nearest valid K:")
    assert named
    for n in named:
        assert mols_assignment(n, r).num_workers == n
    assert min(abs(v - k) for v in valid) == abs(named[0] - k)


def test_random_scales_to_5000_workers_and_is_r_regular() -> None:
    a = random_assignment(5000, 3, seed=7)
    assert a.num_files == 5000
    assert set(a.worker_loads) == {3}
    assert all(len(set(w)) == 3 for w in a.files)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 200), st.integers(0, 2**32))
def test_random_files_never_repeat_a_worker_and_loads_differ_by_at_most_one(
    k: int, r: int, num_files: int, seed: int
) -> None:
    r = min(r, k)
    a = random_assignment(k, r, num_files=num_files, seed=seed)
    assert a.num_files == num_files
    assert all(len(set(w)) == r for w in a.files)
    assert load_spread(a) <= 1


def test_random_is_deterministic_from_its_seed() -> None:
    assert random_assignment(50, 3, seed=1) == random_assignment(50, 3, seed=1)
    assert random_assignment(50, 3, seed=1) != random_assignment(50, 3, seed=2)


def test_random_defaults_to_k_files() -> None:
    assert random_assignment(12, 4, seed=0).num_files == 12


def test_random_rejects_zero_files() -> None:
    with pytest.raises(ValueError, match="num_files >= 1"):
        random_assignment(5, 2, num_files=0)


@pytest.mark.parametrize("scheme", ["groups", "subsets", "mols", "random"])
def test_replication_out_of_range_names_the_nearest_valid_r(scheme: str) -> None:
    with pytest.raises(ValueError, match="nearest valid: r=1"):
        make_assignment(scheme, 6, 0)
    with pytest.raises(ValueError, match="nearest valid: r=6 or K=7"):
        make_assignment(scheme, 6, 7)


def test_groups_rejects_k_not_a_multiple_of_r_naming_valid_k_and_r() -> None:
    with pytest.raises(ValueError, match=r"nearest valid K: 9 \(or keep K=10 with r=2\)"):
        groups_assignment(10, 3)


def test_make_assignment_dispatches_to_each_scheme() -> None:
    assert make_assignment("none", 5, 1) == none_assignment(5)
    assert make_assignment("groups", 6, 2) == groups_assignment(6, 2)
    assert make_assignment("subsets", 5, 2) == subsets_assignment(5, 2)
    assert make_assignment("bibd", 9, 3) == bibd_assignment(9)
    assert make_assignment("mols", 10, 2) == mols_assignment(10, 2)
    assert make_assignment("random", 30, 3, num_files=17, seed=4) == random_assignment(
        30, 3, num_files=17, seed=4
    )


def test_make_assignment_unknown_scheme_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="none, groups, subsets, bibd, mols, random"):
        make_assignment("ramanujan", 15, 3)


def test_make_assignment_none_with_redundancy_is_rejected() -> None:
    with pytest.raises(ValueError, match="use r=1"):
        make_assignment("none", 6, 2)


def test_make_assignment_rejects_a_file_count_the_scheme_cannot_have() -> None:
    assert make_assignment("mols", 15, 3, num_files=25).num_files == 25
    with pytest.raises(ValueError, match="has 25 files, not num_files=30"):
        make_assignment("mols", 15, 3, num_files=30)


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["subsets", "bibd", "mols", "random"]), st.integers(0, 2**32))
def test_relabel_preserves_file_sizes_loads_and_pair_sharing(scheme: str, seed: int) -> None:
    a = make_assignment(scheme, 15 if scheme != "subsets" else 7, 3, seed=1)
    b = relabel(a, seed)
    assert b.scheme == a.scheme
    assert b.num_files == a.num_files
    assert [len(w) for w in b.files] == [len(w) for w in a.files]
    assert sorted(b.worker_loads) == sorted(a.worker_loads)
    assert sorted(pair_counts(b).values()) == sorted(pair_counts(a).values())


@given(st.integers(0, 2**32))
def test_relabel_applies_one_permutation_of_workers_to_every_file(seed: int) -> None:
    # Relabelling "none" reveals the permutation: file i lands on worker perm[i].
    perm = [w for (w,) in relabel(none_assignment(15), seed).files]
    assert sorted(perm) == list(range(15))
    a = mols_assignment(15, 3)
    b = relabel(a, seed)
    assert b.files == tuple(tuple(sorted(perm[w] for w in ws)) for ws in a.files)


def test_relabel_is_deterministic_from_its_seed() -> None:
    a = bibd_assignment(15)
    assert relabel(a, 3) == relabel(a, 3)
    assert relabel(a, 3) != relabel(a, 4)


def test_round_seed_is_stable_and_differs_between_rounds() -> None:
    # Pinned so that a change of hash (and with it every run's relabelling) is noticed.
    assert round_seed(1, 2) == 11489433241791373439
    seeds = {round_seed(1, t) for t in range(100)}
    assert len(seeds) == 100
    assert round_seed(1, 0) != round_seed(2, 0)
    assert all(0 <= s < 2**64 for s in seeds)


def test_per_round_relabelling_from_round_seed_changes_the_labels() -> None:
    a = bibd_assignment(15)
    rounds = [relabel(a, round_seed(42, t)) for t in range(5)]
    assert len(set(rounds)) == 5
    assert rounds[0] == relabel(a, round_seed(42, 0))


def test_summary_is_json_safe_and_reports_the_load_range() -> None:
    summary = random_assignment(10, 3, num_files=7, seed=0).summary()
    assert json.loads(json.dumps(summary)) == summary
    assert summary == {
        "scheme": "random",
        "num_workers": 10,
        "replication": 3,
        "num_files": 7,
        "files_per_worker_min": 2,
        "files_per_worker_max": 3,
    }


@pytest.mark.parametrize(
    ("scheme", "k", "r", "expected"),
    [
        ("none", 9, 1, 9),
        ("groups", 15, 3, 5),
        ("subsets", 15, 3, 455),
        ("bibd", 15, 3, 35),
        ("bibd", 13, 3, 26),
        ("mols", 15, 3, 25),
        ("random", 40, 3, 40),
    ],
)
def test_count_files_agrees_with_the_built_assignment(
    scheme: str, k: int, r: int, expected: int
) -> None:
    assert count_files(scheme, k, r) == expected == make_assignment(scheme, k, r).num_files


def test_count_files_refuses_designs_too_large_to_build_without_building_them() -> None:
    with pytest.raises(ValueError, match="more than 1000000"):
        count_files("bibd", 99_999, 3)
    with pytest.raises(ValueError, match="nearest valid: num_files=1000000"):
        count_files("random", 1000, 3, num_files=10**8)
    with pytest.raises(ValueError, match="13 or 15"):
        count_files("bibd", 14, 3)
