"""Red team of the evidence across rounds (`phalanx.detection.disputes`, issue 17).

Framing held: every dispute needs a liar, so no choice of whom to dispute, no dispute
among colluders and no worker dropping out gets an honest worker proven while at most
``bound`` lie (`test_framing_attacks_never_prove_an_honest_worker` fails if that stops
holding). Cost did not: each round computed a matching of the dispute graph for every
worker in it, quadratic in the workers that ever disputed (38 to 60 s a round after ten
rounds of 100 colluders among K = 10,000); and a checkpoint's state was read without
checks (a self-dispute or a foreign worker id changed who is proven).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Set

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from phalanx.detection import disputes
from phalanx.detection.disputes import DisputeRecord, LiarsAcrossRounds, proven_liars


def reference_proofs(record: DisputeRecord, bound: int, known: set[int]) -> set[int]:
    """`proven_liars` as first written: a fresh matching for every worker, every pass."""
    g, liars, proven, changed = record.graph(), set(known), set(), True
    while changed:
        changed = False
        for w in sorted(set(g.nodes) - liars):
            certain = set(g.adj[w]) | liars
            if len(certain) <= bound:
                rest = len(nx.maximal_matching(g.subgraph(set(g.nodes) - certain - {w})))
                if len(certain) + rest <= bound:
                    continue
            proven.add(w)
            liars.add(w)
            changed = True
    return proven


@given(
    edges=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11), st.integers(1, 6))),
    bound=st.integers(0, 6),
    known=st.sets(st.integers(0, 11), max_size=3),
)
def test_the_shortcut_proves_exactly_whom_the_full_search_proves(
    edges: list[tuple[int, int, int]], bound: int, known: set[int]
) -> None:
    """Could fail if skipping workers the cover keeps within the bound skipped a proof."""
    record = DisputeRecord()
    for a, b, t in edges:
        if a != b:
            record.add_round(t, [(a, b)])
    found = proven_liars(record, bound, known=known)
    assert set(found) == reference_proofs(record, bound, known)


def test_a_large_run_under_the_default_bound_computes_one_matching_a_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """K = 2,000 with 50 colluders who each dispute 4 honest workers a round: every
    worker is far within the default bound, which a single cover shows. Counts the
    matchings computed instead of timing them."""
    calls = 0
    matching = disputes.greedy_matching

    def counted(edges: Iterable[tuple[int, int]], excluded: Set[int]) -> set[int]:
        nonlocal calls
        calls += 1
        return matching(edges, excluded)

    monkeypatch.setattr(disputes, "greedy_matching", counted)
    rng = random.Random(17)
    liars = rng.sample(range(2000), 50)
    honest = sorted(set(range(2000)) - set(liars))
    across = LiarsAcrossRounds(bound=999)
    for t in range(1, 6):
        calls = 0
        assert not across.observe(t, [(c, rng.choice(honest)) for c in liars for _ in range(4)])
        assert calls == 1


def honest_never_proven(liars: set[int], conflicts: list[tuple[int, int, int]], bound: int) -> None:
    across = LiarsAcrossRounds(bound)
    for t in sorted({t for _, _, t in conflicts}):
        across.observe(t, [(a, b) for a, b, s in conflicts if s == t])
        assert across.proven <= liars


@pytest.mark.parametrize("seed", range(5))
def test_framing_attacks_never_prove_an_honest_worker(seed: int) -> None:
    """Liars at the bound (7 of 15) choose whom to dispute: all against one honest worker
    (framing), against each other (colluders feigning honest disputes), and against the
    honest workers that stay after others drop out. Fails if any honest worker is proven.
    """
    rng = random.Random(seed)
    liars = set(rng.sample(range(15), 7))
    honest = sorted(set(range(15)) - liars)
    target = honest[0]
    conflicts = []
    for t in range(1, 31):
        present = [h for h in honest if rng.random() < 0.7] or [target]
        conflicts += [(c, target, t) for c in liars]  # framing
        conflicts += [(a, b, t) for a, b in itertools.combinations(sorted(liars), 2)]
        conflicts += [(c, rng.choice(present), t) for c in liars]
    honest_never_proven(liars, conflicts, bound=7)


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ({"disputes": [[3, 3, 1]]}, "itself"),
        ({"disputes": [[3]]}, "pair"),
        ({"disputes": [[1, 2]]}, "round"),
        ({"disputes": [[1, -2, 1]]}, "worker"),
        ({"disputes": [[1, 2, 0]]}, "round"),
        ({"disputes": [[1, True, 1]]}, "integer"),
        ({"disputes": [[1, "2", 1]]}, "integer"),
        ({"disputes": [[1, 2.5, 1]]}, "integer"),
        ({"disputes": "12"}, "list"),
        ({"proven": [-1]}, "worker"),
        ({"proven": [None]}, "integer"),
        ({"disputes": [[1, 20, 1]]}, "20"),
        ({"proven": [15]}, "15"),
    ],
)
def test_a_hostile_checkpoint_state_is_refused(state: dict[str, object], match: str) -> None:
    """A self-dispute made a worker its own partner (an honest worker one liar short of
    being proven), and ids outside the run's workers reached the coordinator's lookups."""
    across = LiarsAcrossRounds(bound=7)
    with pytest.raises(ValueError, match=match):
        across.restore(state, num_workers=15)  # type: ignore[arg-type]


def test_a_restored_record_continues_identically() -> None:
    """Held: state() then restore() gives the same proofs on the next rounds."""
    rng = random.Random(3)
    first, second = LiarsAcrossRounds(3), LiarsAcrossRounds(3)
    rounds = [[(rng.choice([0, 1, 2]), rng.randrange(3, 15)) for _ in range(4)] for _ in range(9)]
    for t, pairs in enumerate(rounds[:4], start=1):
        first.observe(t, pairs)
    second.restore(first.state(), num_workers=15)
    for t, pairs in enumerate(rounds[4:], start=5):
        assert first.observe(t, pairs).keys() == second.observe(t, pairs).keys()
    assert first.state() == second.state()
