"""The reference crowd on local data: a round-seeded sample of honest clients and their updates."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.data import load_dataset
from phalanx.local_data import model_shape
from phalanx.nets import flatten_params, init_model
from phalanx.plan import round_assignment
from phalanx_clients.crowd import REFERENCE_CLIENTS, LocalCrowd, reference_clients
from tests.support.configs import local_config
from tests.support.inprocess import inprocess_workers


@st.composite
def federations(draw: st.DrawFn) -> tuple[int, frozenset[int], int, int]:
    k = draw(st.integers(1, 40))
    liars = draw(st.frozensets(st.integers(0, k - 1), max_size=k - 1))
    return k, liars, draw(st.integers(0, 2**31)), draw(st.integers(0, 10_000))


@settings(max_examples=60, deadline=None)
@given(federations())
def test_the_crowd_is_a_seeded_sample_of_honest_clients_only(
    federation: tuple[int, frozenset[int], int, int],
) -> None:
    k, liars, seed, round = federation

    members = reference_clients(k, liars, seed, round)

    honest = set(range(k)) - liars
    assert set(members) <= honest
    assert len(members) == min(REFERENCE_CLIENTS, len(honest))
    assert list(members) == sorted(set(members))
    assert reference_clients(k, liars, seed, round) == members


def test_the_crowd_changes_from_round_to_round() -> None:
    crowds = {reference_clients(20, {1, 2, 3, 4}, 7, t) for t in range(10)}

    assert len(crowds) > 5


def test_a_federation_of_adversaries_alone_has_no_crowd() -> None:
    with pytest.raises(ValueError, match="every one of the 3 workers is an adversary"):
        reference_clients(3, {0, 1, 2}, 0, 1)


def test_a_client_s_crowd_data_is_what_it_trains_on_itself() -> None:
    config = local_config(data={"partition": {"kind": "dirichlet", "alpha": 0.3}})
    train = load_dataset("digits", "train")
    crowd = LocalCrowd.of(config, train)
    workers = inprocess_workers(config, "crowd")

    for w, worker in workers.items():
        own = worker.local_data(w).train
        seen = crowd.training_data(w)
        assert torch.equal(seen.x, own.x) and torch.equal(seen.y, own.y)
        assert len(seen) < len(crowd.partition[w])  # its local test split is held out


def test_a_crowd_whose_every_member_diverges_is_refused_in_words() -> None:
    config = local_config(data={"local": {"lr": 100.0, "steps": 1}})
    train = load_dataset("digits", "train")
    shape = model_shape(load_dataset("digits", "test"))
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=0)
    huge = flatten_params(model) * 1e30

    with pytest.raises(ValueError, match="trained to a finite update"):
        LocalCrowd.of(config, train).reference_updates(
            round_assignment(config, 1), {0}, 1, huge, shape
        )
