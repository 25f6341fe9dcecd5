"""The ``asynchronous`` section of a run config: buffer, staleness bound, step-size rule.

A section of its own, like ``systems`` and ``codec``, rather than a ``collect``
policy: every collection policy decides when a synchronous round stops waiting,
while asynchronous mode has no such round at all (workers run on model versions of
their own, and the model moves every ``buffer_size`` arrivals), and its settings
(buffer, staleness bound, step-size rule) mean nothing to a round's close. The
peers that have the mode spell it the same way: FederatedScope's ``asyn`` section,
FLSim's FedBuff ``async_trainer``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from phalanx.strict_numbers import NumbersNotBooleans

StepSizeRule = Literal["delay_adaptive", "polynomial", "constant"]

MAX_BUFFER = 10_000
"""Largest buffer a run may ask for (``phalanx.config.MAX_WORKERS``)."""
MAX_STALENESS = 100_000
"""Largest staleness bound a run may ask for, in model versions (``rounds``' bound)."""
DEFAULT_EXPONENT = 0.5
"""FedBuff's staleness weight ``1 / sqrt(1 + staleness)``."""

#: The parameters each step-size rule reads; any other one set is refused.
RULE_PARAMETERS: dict[str, frozenset[str]] = {
    "delay_adaptive": frozenset({"delay_threshold"}),
    "polynomial": frozenset({"staleness_exponent"}),
    "constant": frozenset(),
}


class AsynchronousConfig(NumbersNotBooleans):
    """Buffered asynchronous aggregation (FedBuff-like), at ``assignment.r = 1`` only.

    With ``enabled``, a run's ``rounds`` count model updates: each applies the robust
    aggregate of ``buffer_size`` updates, and is recorded as one round. An update
    computed on a model more than ``max_staleness`` versions old is dropped and
    counted, never aggregated. Detection is outlier screening per buffer
    (``detection.outlier_threshold``): replicas computed on different model versions
    cannot be compared, which is why ``r > 1`` is refused. In simulation the updates
    arrive by the systems model's clock; in a deployment, by their real arrival times.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        allow_inf_nan=False,
        json_schema_extra={
            "description": "Buffered asynchronous aggregation at r = 1: workers compute on the "
            "model version they were given; the model moves every buffer_size arrivals."
        },
    )

    enabled: bool = Field(
        default=False,
        strict=True,
        description="Run asynchronously (assignment.r = 1; in simulation with systems.enabled, "
        "in a deployment on real arrival times).",
    )
    buffer_size: int = Field(
        default=10,
        ge=1,
        le=MAX_BUFFER,
        description="Updates aggregated into each model update (FedBuff's K); one round each.",
    )
    max_staleness: int = Field(
        default=10,
        ge=0,
        le=MAX_STALENESS,
        description="Oldest model, in versions behind the current one, an update may have been "
        "computed on; older ones are dropped and counted (0: only updates on the newest model).",
    )
    step_size: StepSizeRule = Field(
        default="delay_adaptive",
        description="delay_adaptive: full step up to delay_threshold versions of staleness, "
        "then threshold / staleness (Mishchenko et al., NeurIPS 2022); polynomial: "
        "(1 + staleness)^-staleness_exponent (FedBuff, FedAsync); constant: no scaling.",
    )
    delay_threshold: float | None = Field(
        default=None,
        gt=0.0,
        le=float(MAX_STALENESS),
        description="delay_adaptive: staleness, in model versions, up to which the full step "
        "is taken (null: workers / buffer_size, the paper's n in versions).",
    )
    staleness_exponent: float | None = Field(
        default=None,
        ge=0.0,
        le=10.0,
        description="polynomial: the exponent a of (1 + staleness)^-a (null: 0.5).",
    )

    @model_validator(mode="after")
    def _parameters_of_the_rule(self) -> AsynchronousConfig:
        given = {
            name
            for name in ("delay_threshold", "staleness_exponent")
            if getattr(self, name) is not None
        }
        stray = sorted(given - RULE_PARAMETERS[self.step_size])
        if stray:
            reads = ", ".join(sorted(RULE_PARAMETERS[self.step_size])) or "none"
            raise ValueError(
                f"{', '.join(stray)} not read by step_size {self.step_size!r} (it reads: "
                f"{reads}); remove them or choose the rule that reads them"
            )
        return self

    @property
    def exponent(self) -> float:
        """The polynomial rule's exponent, its default when unset."""
        return DEFAULT_EXPONENT if self.staleness_exponent is None else self.staleness_exponent
