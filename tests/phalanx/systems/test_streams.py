from __future__ import annotations

import pytest

from phalanx.systems import streams


def test_the_same_key_gives_the_same_draws_in_any_keyword_order() -> None:
    first = streams.stream(streams.DROPOUT, seed=3, worker=4, round_=5).random(4)
    second = streams.stream(streams.DROPOUT, round_=5, worker=4, seed=3).random(4)
    assert first.tolist() == second.tolist()


def test_domains_and_keys_give_different_streams() -> None:
    draws = {
        streams.stream(domain, seed=seed, worker=worker).random()
        for domain in (streams.SPEED, streams.ON_OFF)
        for seed in (0, 1)
        for worker in (0, 1)
    }
    assert len(draws) == 8


def test_the_domains_are_distinct() -> None:
    domains = [streams.SPEED, streams.STRAGGLERS, streams.ROUND_FACTOR, streams.DROPOUT]
    assert len({*domains, streams.ON_OFF}) == 5


@pytest.mark.parametrize("key", ["seed", "worker", "round_"])
def test_a_negative_key_is_refused_by_name(key: str) -> None:
    with pytest.raises(ValueError, match=f"^{key.rstrip('_')} must be >= 0, got -1$"):
        streams.stream(streams.DROPOUT, **{key: -1})
