"""Where a run's training data lives, and how a client trains on its own (``data.local``).

``data.mode = "assigned"`` (the default): every worker loads the same dataset
and computes updates on the samples the coordinator assigns, so replicas of a
file can be compared (redundant assignment). ``data.mode = "local"``: every
client trains on its own partition, as in most federations (a hospital, a
phone, a company keeps its data); nothing can be compared across clients, so
r = 1. In simulation the partition comes from ``data.partition``
(:mod:`phalanx.partitions`); a deployed client names its own data. A client
trains with :func:`phalanx.local_training.train_locally` and the settings of
:class:`LocalTrainingConfig`. Torch-free: the run config imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from phalanx.strict_numbers import NumbersNotBooleans

DataMode = Literal["assigned", "local"]
LocalOptimizer = Literal["sgd", "momentum", "adam"]

MAX_SHAPE = 2**31 - 1
"""Largest channel count, image side or class count a task may name."""

MAX_EPOCHS = 1000
MAX_STEPS = 100_000
MAX_BATCH_SIZE = 100_000
MAX_LR = 100.0
DEFAULT_MOMENTUM = 0.9
"""Momentum of ``optimizer = "momentum"`` when ``momentum`` is left ``null``."""


class LocalTrainingConfig(NumbersNotBooleans):
    """How each client trains on its own data in a round (``data.local``).

    A round of local training is ``epochs`` passes over the client's data, or
    ``steps`` minibatches; with neither given, one epoch. The client reports
    ``params_before - params_after`` and its sample count.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    epochs: int | None = Field(
        default=None,
        ge=1,
        le=MAX_EPOCHS,
        description="Passes over the client's data per round (null: 1 unless steps is given).",
    )
    steps: int | None = Field(
        default=None,
        ge=1,
        le=MAX_STEPS,
        description="Minibatch steps per round instead of whole epochs.",
    )
    batch_size: int = Field(
        default=32,
        ge=1,
        le=MAX_BATCH_SIZE,
        description="Samples per minibatch; a client with fewer samples uses them all.",
    )
    lr: float = Field(default=0.01, gt=0.0, le=MAX_LR, description="The client's step size.")
    optimizer: LocalOptimizer = Field(
        default="sgd",
        description="sgd: plain SGD; momentum: SGD with momentum; adam: Adam. The optimizer's "
        "state starts afresh every round.",
    )
    momentum: float | None = Field(
        default=None,
        ge=0.0,
        lt=1.0,
        description=f"optimizer = 'momentum': the momentum (null: {DEFAULT_MOMENTUM}).",
    )

    @model_validator(mode="after")
    def _one_length_and_its_optimizer(self) -> LocalTrainingConfig:
        if self.epochs is not None and self.steps is not None:
            raise ValueError("give epochs or steps, not both")
        if self.momentum is not None and self.optimizer != "momentum":
            raise ValueError(
                f"momentum is read by optimizer = 'momentum' only, not {self.optimizer!r}"
            )
        return self

    @property
    def momentum_value(self) -> float:
        """The momentum of ``optimizer = "momentum"``, the default when left ``null``."""
        return DEFAULT_MOMENTUM if self.momentum is None else self.momentum


@dataclass(frozen=True)
class ModelShape:
    """What the run's model takes and gives: image channels, image side, classes.

    In ``data.mode = "local"`` every task carries it, so a client builds the run's
    model from it, never from its own data, and can tell when its data does not
    fit (:class:`phalanx.local_training.ModelDataMismatchError`).
    """

    in_channels: int
    image_size: int
    num_classes: int

    def __post_init__(self) -> None:
        for name in ("in_channels", "image_size", "num_classes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SHAPE:
                raise ValueError(f"{name} must be a whole number in 1..{MAX_SHAPE}, got {value!r}")

    def as_list(self) -> list[int]:
        """Return the three numbers, in order (the wire form)."""
        return [self.in_channels, self.image_size, self.num_classes]
