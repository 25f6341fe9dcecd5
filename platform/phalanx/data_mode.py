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
MAX_EVALUATE_EVERY = 100_000
DEFAULT_TEST_FRACTION = 0.2
DEFAULT_MOMENTUM = 0.9
"""Momentum of ``optimizer = "momentum"`` when ``momentum`` is left ``null``."""


class LocalTrainingConfig(NumbersNotBooleans):
    """How each client trains on its own data in a round (``data.local``).

    A round of local training is ``epochs`` passes over the client's data, or
    ``steps`` minibatches; with neither given, one epoch. The client reports
    ``params_before - params_after`` and its sample count.

    Federated evaluation (``evaluate_every``, ``test_fraction``): every
    ``evaluate_every`` rounds, and after the last, each client evaluates the global
    model on its local test split and reports loss, accuracy and count
    (:mod:`phalanx.federated_evaluation`). The test split is a seeded held-out
    ``test_fraction`` of the client's own data (:func:`phalanx.local_evaluation.local_split`,
    as Flower's tutorials split a partition with ``train_test_split``); the client
    trains on the rest. With ``evaluate_every = 0`` nothing is held out.
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

    evaluate_every: int = Field(
        default=1,
        ge=0,
        le=MAX_EVALUATE_EVERY,
        description="Federated evaluation every this many rounds, and after the last "
        "(0: none, and the clients train on all their data).",
    )
    test_fraction: float = Field(
        default=DEFAULT_TEST_FRACTION,
        gt=0.0,
        lt=1.0,
        description="Share of each client's data held out as its local test split when "
        "evaluate_every > 0 (at least one sample, and at least one left to train on).",
    )

    @property
    def evaluates(self) -> bool:
        """Whether clients hold out a test split and evaluate the global model on it."""
        return self.evaluate_every > 0

    def evaluates_after(self, round_: int, last_round: int) -> bool:
        """Whether federated evaluation follows round ``round_`` of ``last_round``."""
        if not self.evaluates:
            return False
        return round_ == last_round or round_ % self.evaluate_every == 0

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
