"""A client's round of training on its own data (``data.mode = "local"``).

:func:`train_locally` is a pure function: the global parameters, the client's
data, the settings of ``data.local`` (:class:`~phalanx.data_mode.LocalTrainingConfig`)
and a seed in; the update and the sample count out. It trains a copy of the
model, so the caller's model, its parameters and torch's global random state are
left as they were; two calls with equal inputs return bit-identical updates on
the same torch build and thread count.

Sign convention
---------------
As in :mod:`phalanx.training`: the update is ``params_before - params_after``,
a descent direction the server *subtracts* (``params -= lr_server * aggregate``).
With ``lr_server = 1`` and the sample-weighted mean
(:func:`phalanx.aggregation.weighting.weighted_mean`) the server step is
FedAvg's: the new global model is the average of the clients' local models
weighted by their sample counts.

A model that does not fit the data (other image shape, fewer outputs than the
data has classes) raises :class:`ModelDataMismatchError` before any training, so the
client can report it as a run problem: its data is wrong for this run, and the
client is not misbehaving.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional

from phalanx.attacks.labels import LabelPoison, poisoned_labels
from phalanx.data import ImageDataset
from phalanx.data_mode import LocalTrainingConfig
from phalanx.nets import flatten_params, load_flat_, num_params

MAX_SEED = 2**63 - 1


class ModelDataMismatchError(ValueError):
    """The run's model does not fit a client's data (image shape or number of classes).

    Raised before training, with one line that names the data and what differs;
    a caller records it as a run problem, never as misbehaviour of the client.
    """

    fault_kind = "data_mismatch"
    """The fault a worker reports for it (:func:`phalanx.faults.fault_kind`)."""


@dataclass(frozen=True, eq=False)
class LocalUpdate:
    """What a client's round of local training gives the coordinator.

    Parameters
    ----------
    update : Tensor
        1-D float32, ``params_before - params_after`` (see the module's sign convention).
    num_samples : int
        Samples the client trained on: its weight in FedAvg's mean.
    steps : int
        Optimizer steps taken.
    """

    update: Tensor
    num_samples: int
    steps: int


def check_model_fits(model: nn.Module, dataset: ImageDataset) -> None:
    """Raise :class:`ModelDataMismatchError` unless ``model`` maps ``dataset``'s images to classes.

    One image goes through the model in eval mode without gradients (the model is
    left in the mode it was in); its output must be ``(1, outputs)`` with at least
    ``dataset.num_classes`` outputs.
    """
    shape = "x".join(str(s) for s in dataset.x.shape[1:])
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(dataset.x[:1])
    except RuntimeError as err:
        cause = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelDataMismatchError(
            f"{dataset.name}: the model does not take its {shape} images ({cause})"
        ) from err
    finally:
        model.train(was_training)
    if not isinstance(out, Tensor) or out.dim() != 2 or out.shape[0] != 1:
        got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise ModelDataMismatchError(
            f"{dataset.name}: the model maps one {shape} image to {got}, not to (1, classes)"
        )
    if out.shape[1] < dataset.num_classes:
        raise ModelDataMismatchError(
            f"{dataset.name}: the data has {dataset.num_classes} classes but the model only "
            f"{out.shape[1]} outputs"
        )


def train_locally(
    model: nn.Module,
    params: Tensor,
    dataset: ImageDataset,
    settings: LocalTrainingConfig,
    *,
    seed: int,
    poison_labels: LabelPoison | None = None,
) -> LocalUpdate:
    """Train a copy of ``model``, started at ``params``, on a client's ``dataset``.

    Each epoch visits the samples in a fresh random order in minibatches of
    ``min(batch_size, len(dataset))`` (the last one of an epoch may be smaller);
    ``steps`` takes that many minibatches in the same order, epoch after epoch.
    The loss is the mean cross-entropy; the optimizer (SGD, SGD with momentum,
    Adam) starts with no state. The order and any randomness of the model
    (dropout) come from ``seed`` alone.

    Parameters
    ----------
    model : nn.Module
        The run's architecture; its parameters and mode are not changed.
    params : Tensor
        The global parameters, 1-D, ``num_params(model)`` long, finite.
    dataset : ImageDataset
        The client's data (e.g. ``train.subset(partition[client])``).
    settings : LocalTrainingConfig
        Epochs or steps, batch size, learning rate, optimizer.
    seed : int
        ``0 .. 2**63 - 1``; e.g. :func:`phalanx.training.derive_seed` of the run,
        the round and the client.
    poison_labels : callable, optional
        A simulated adversary's data attack: maps the data's labels and its number of
        classes to the labels trained on instead (e.g.
        :meth:`phalanx.attacks.LabelFlip.poison_labels`), once, before training; the
        images, the order of the minibatches and the count stay the client's own.

    Returns
    -------
    LocalUpdate
        Its update is returned as computed: training that diverges (a step size too
        large for the data) gives NaN or Inf, which the caller checks before sending,
        as honest workers check every update.

    Raises
    ------
    ModelDataMismatchError
        When the model does not fit the data (see :func:`check_model_fits`).
    ValueError
        When ``params`` or ``seed`` is malformed, or ``poison_labels`` returns anything
        but one label in ``0 .. num_classes - 1`` per sample.
    """
    start = checked_params(model, params)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be a whole number in 0..2**63 - 1, got {seed!r}")
    local = load_flat_(copy.deepcopy(model), start)
    check_model_fits(local, dataset)
    labels = (
        dataset.y
        if poison_labels is None
        else poisoned_labels(poison_labels, dataset.y, dataset.num_classes)
    )
    n = len(dataset)
    batch = min(settings.batch_size, n)
    total = settings.steps or math.ceil(n / batch) * (settings.epochs or 1)
    order = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        # The CPU generator alone, as phalanx.training does (no accelerator seeding).
        torch.default_generator.manual_seed(seed)
        local.train()
        optimizer = _optimizer(local, settings)
        for chosen in _minibatches(n, batch, total, order):
            optimizer.zero_grad(set_to_none=True)
            loss = functional.cross_entropy(local(dataset.x[chosen]), labels[chosen])
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
    return LocalUpdate(update=start - flatten_params(local), num_samples=n, steps=total)


def _minibatches(n: int, batch: int, total: int, generator: torch.Generator) -> Iterator[Tensor]:
    """``total`` minibatches of indices, walking through fresh permutations of ``0 .. n - 1``."""
    taken = 0
    while True:
        order = torch.randperm(n, generator=generator)
        for i in range(0, n, batch):
            if taken == total:
                return
            taken += 1
            yield order[i : i + batch]


def _optimizer(model: nn.Module, settings: LocalTrainingConfig) -> torch.optim.Optimizer:
    if settings.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=settings.lr)
    momentum = settings.momentum_value if settings.optimizer == "momentum" else 0.0
    return torch.optim.SGD(model.parameters(), lr=settings.lr, momentum=momentum)


def checked_params(model: nn.Module, params: Tensor) -> Tensor:
    """Return a float32 copy of ``params``, the global model a client starts from.

    Raises
    ------
    ValueError
        When ``params`` is not a 1-D floating-point tensor of the model's length, or
        holds NaN or Inf.
    """
    expected = num_params(model)
    if not isinstance(params, Tensor) or params.dim() != 1 or not params.is_floating_point():
        got = tuple(params.shape) if isinstance(params, Tensor) else type(params).__name__
        raise ValueError(f"params must be a 1-D floating-point tensor, got {got}")
    if params.shape[0] != expected:
        raise ValueError(f"params has {params.shape[0]} values, the model {expected}")
    flat = params.detach().to(torch.float32).clone()
    if not bool(torch.isfinite(flat).all()):
        raise ValueError("params hold NaN or Inf")
    return flat
