"""The ``data.partition`` setting: how a simulation divides the training split among clients."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, StrictBool, model_validator

from phalanx.data_checks import MAX_CLASSES
from phalanx.strict_numbers import NumbersNotBooleans

PartitionKind = Literal["iid", "dirichlet", "shards", "quantity"]

MAX_ALPHA = 1e6
"""Largest concentration accepted; far beyond it every draw is the uniform split."""
MAX_MIN_PARTITION_SIZE = 1_000_000

#: The parameters each kind reads; any other one set is refused.
PARAMETERS: dict[str, frozenset[str]] = {
    "iid": frozenset(),
    "dirichlet": frozenset({"alpha", "min_partition_size", "self_balancing"}),
    "shards": frozenset({"labels_per_client", "label_assignment"}),
    "quantity": frozenset({"alpha", "min_partition_size"}),
}
#: The parameters a kind cannot do without.
REQUIRED: dict[str, frozenset[str]] = {
    "dirichlet": frozenset({"alpha"}),
    "shards": frozenset({"labels_per_client"}),
    "quantity": frozenset({"alpha"}),
}
#: What an optional parameter left ``null`` means (Flower Datasets' defaults).
DEFAULTS: dict[str, int | str | bool] = {
    "min_partition_size": 10,
    "self_balancing": False,
    "label_assignment": "random",
}
_PARAMETER_NAMES = frozenset().union(*PARAMETERS.values())


class PartitionConfig(NumbersNotBooleans):
    """How the training split is divided among simulated clients in ``data.mode = "local"``.

    The kinds follow Flower Datasets' partitioners (see
    :mod:`phalanx.partitions.schemes`). Every parameter is ``null`` unless its
    kind reads it; ``null`` means the default named in its description. A
    parameter set for a kind that does not read it is refused.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    kind: PartitionKind = Field(
        default="iid",
        description="iid: equal random parts; dirichlet: each label split among clients in "
        "Dirichlet(alpha) proportions; shards: labels_per_client labels per client "
        "(pathological); quantity: IID samples in Dirichlet(alpha) sizes (quantity skew).",
    )
    alpha: float | None = Field(
        default=None,
        gt=0.0,
        le=MAX_ALPHA,
        description="dirichlet, quantity: the concentration; small is skewed, large near IID.",
    )
    labels_per_client: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CLASSES,
        description="shards: the exact number of labels each client holds.",
    )
    label_assignment: Literal["random", "deterministic", "first-deterministic"] | None = Field(
        default=None,
        description="shards: how labels are given to clients (null: random).",
    )
    min_partition_size: int | None = Field(
        default=None,
        ge=0,
        le=MAX_MIN_PARTITION_SIZE,
        description="dirichlet, quantity: fewest samples a client may hold; the draw is "
        "repeated until it holds (null: 10).",
    )
    self_balancing: StrictBool | None = Field(
        default=None,
        description="dirichlet: give no more samples to a client above the average (null: false).",
    )
    seed: int | None = Field(
        default=None,
        ge=0,
        lt=2**63,
        description="Seed of the partition (null: the run's seed).",
    )

    @model_validator(mode="after")
    def _parameters_of_the_kind(self) -> PartitionConfig:
        reads = PARAMETERS[self.kind]
        given = {name for name in _PARAMETER_NAMES if getattr(self, name) is not None}
        foreign = sorted(given - reads)
        if foreign:
            takes = ", ".join(sorted(reads)) or "no parameters"
            raise ValueError(
                f"{', '.join(foreign)}: not a parameter of the {self.kind} partition "
                f"(it takes {takes})"
            )
        missing = sorted(REQUIRED.get(self.kind, frozenset()) - given)
        if missing:
            raise ValueError(f"the {self.kind} partition needs {', '.join(missing)}")
        return self
