"""The update a client computes on its own data in a round: honest, or with poisoned labels.

Honest workers (:mod:`phalanx_clients.worker`) and the simulated red team
(:mod:`phalanx_clients.behaviour`, :mod:`phalanx_clients.crowd`) both call
:func:`compute_local_update`, so the red team's copy of an honest client's update is
that client's update to the bit (on the same torch build and thread count), and a
label-flipping adversary trains exactly as an honest client of its data would, on
other labels.
"""

from __future__ import annotations

from torch import Tensor, nn

from phalanx.attacks.labels import LabelPoison
from phalanx.config import RunConfig
from phalanx.data import ImageDataset
from phalanx.data_mode import LocalTrainingConfig, ModelShape
from phalanx.local_training import LocalUpdate, train_locally
from phalanx.nets import build_model
from phalanx.training import derive_seed


def local_model(config: RunConfig, shape: ModelShape) -> nn.Module:
    """Build the run's model for ``shape`` (channels, image side, classes)."""
    return build_model(
        config.data.model,
        in_channels=shape.in_channels,
        image_size=shape.image_size,
        num_classes=shape.num_classes,
    )


def compute_local_update(
    config: RunConfig,
    model: nn.Module,
    data: ImageDataset,
    round: int,
    file: int,
    params: Tensor,
    *,
    poison_labels: LabelPoison | None = None,
) -> LocalUpdate:
    """Train ``model`` from ``params`` on a client's ``data`` as round ``round`` asks.

    The settings are the run's ``data.local``; the seed is the run's, the round's and
    the client's ``file`` of the round (:func:`phalanx.training.derive_seed`), so a
    reply is the same on either transport.

    Parameters
    ----------
    data : ImageDataset
        What the client trains on: its own data less its local test split
        (:func:`phalanx.local_evaluation.client_split`).
    poison_labels : callable, optional
        A data attack's label poisoning (see :func:`phalanx.local_training.train_locally`).

    Raises
    ------
    phalanx.local_training.ModelDataMismatchError
        When the data does not fit the model.
    """
    return train_locally(
        model,
        params,
        data,
        config.data.local or LocalTrainingConfig(),
        seed=derive_seed(config.seed, round, file),
        poison_labels=poison_labels,
    )
