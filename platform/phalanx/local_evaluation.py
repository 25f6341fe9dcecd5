"""A client's local test split, and its evaluation of the global model on it (local data).

With federated evaluation on (``data.local.evaluate_every > 0``), each client holds
out a seeded share of its own data as its local test split and trains on the rest,
as Flower's tutorials split each partition with ``train_test_split(test_size=0.2,
seed=...)``. The split is a pure function of the client's data, the fraction and a
seed, so a simulated client derives it alike on either transport, and a deployed
client splits its own file the same way. The coordinator, which made a simulated
partition, knows every split's size from the part's size alone (:func:`held_out_size`)
and caps claimed counts by them.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from phalanx.data import ImageDataset
from phalanx.data_mode import LocalTrainingConfig
from phalanx.local_training import check_model_fits, checked_params
from phalanx.nets import load_flat_
from phalanx.training import derive_seed, evaluate

SPLIT_ROUND = -3
"""The ``round`` of :func:`~phalanx.training.derive_seed` reserved for a client's split."""


def held_out_size(n: int, fraction: float) -> int:
    """Return how many of a client's ``n`` samples its local test split holds.

    ``round(n * fraction)``, at least 1 and at most ``n - 1`` (a client keeps a
    sample to train on); 0 when ``n < 2``: such a client cannot hold one out.

    Raises
    ------
    ValueError
        When ``n`` is negative or ``fraction`` is not in ``(0, 1)``.
    """
    if n < 0:
        raise ValueError(f"a client holds n >= 0 samples, got {n}")
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {fraction!r}")
    if n < 2:
        return 0
    return min(n - 1, max(1, math.floor(n * fraction + 0.5)))


def split_sizes(n: int, fraction: float | None) -> tuple[int, int]:
    """Return how many of a client's ``n`` samples it trains and tests on (``None``: no split)."""
    held = 0 if fraction is None else held_out_size(n, fraction)
    return n - held, held


def split_seed(run_seed: int, worker: int) -> int:
    """Return the seed of worker ``worker``'s split in a run seeded ``run_seed``."""
    return derive_seed(run_seed, SPLIT_ROUND, worker)


@dataclass(frozen=True)
class LocalSplit:
    """A client's data as it trains and tests on it."""

    train: ImageDataset
    test: ImageDataset | None
    """``None`` when the client holds out nothing (evaluation off, or one sample)."""


def local_split(dataset: ImageDataset, fraction: float | None, *, seed: int) -> LocalSplit:
    """Hold out :func:`held_out_size` seeded samples of ``dataset`` as its test split.

    Parameters
    ----------
    dataset : ImageDataset
        The client's own data.
    fraction : float or None
        The share to hold out; ``None``: nothing (the client trains on all of it).
    seed : int
        E.g. :func:`split_seed`; the samples held out are the first of a seeded
        permutation, each part kept in the data's order.
    """
    n = len(dataset)
    _, held = split_sizes(n, fraction)
    if held == 0:
        return LocalSplit(train=dataset, test=None)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    test_idx, _ = torch.sort(order[:held])
    train_idx, _ = torch.sort(order[held:])
    return LocalSplit(train=dataset.subset(train_idx), test=dataset.subset(test_idx))


def client_split(
    dataset: ImageDataset, settings: LocalTrainingConfig | None, *, run_seed: int, worker: int
) -> LocalSplit:
    """Return the split worker ``worker`` of a run seeded ``run_seed`` makes of its own data.

    With federated evaluation on (``settings.evaluates``) it holds out
    ``settings.test_fraction`` (:func:`local_split`, seeded by :func:`split_seed`);
    otherwise it trains on all of it. ``None`` settings are ``data.local``'s defaults.
    Honest clients and the simulated red team (which trains as an honest client of its
    data would) both split by this function.
    """
    local = settings or LocalTrainingConfig()
    fraction = local.test_fraction if local.evaluates else None
    return local_split(dataset, fraction, seed=split_seed(run_seed, worker))


class NoTestSplitError(ValueError):
    """A client asked to evaluate holds no local test split (fewer than two samples)."""


@dataclass(frozen=True)
class LocalEvaluation:
    """What a client measured of the global model on its local test split."""

    loss: float
    accuracy: float
    num_samples: int


def evaluate_locally(
    model: nn.Module, params: Tensor, test: ImageDataset | None
) -> LocalEvaluation:
    """Evaluate ``model`` with the global ``params`` on a client's test split.

    A copy of the model is loaded; the caller's model is left as it was.

    Raises
    ------
    NoTestSplitError
        When ``test`` is ``None`` or empty.
    phalanx.local_training.ModelDataMismatchError
        When the model does not fit the data.
    ValueError
        When ``params`` is not a finite 1-D float tensor of the model's length.
    """
    if test is None or len(test) == 0:
        raise NoTestSplitError("the client holds no local test split (fewer than two samples)")
    # As training checks them: NaN weights gave a NaN loss, refused as an implausible
    # report of the client's, and complex or integer ones were cast without a word.
    local = load_flat_(copy.deepcopy(model), checked_params(model, params))
    check_model_fits(local, test)
    loss, accuracy = evaluate(local, test)
    return LocalEvaluation(loss=loss, accuracy=accuracy, num_samples=len(test))
