"""The ``collect`` setting: which policy closes a round, and its parameters."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, StrictBool, model_validator

from phalanx.strict_numbers import NumbersNotBooleans

PolicyName = Literal[
    "all", "deadline", "fastest_k", "adaptive_k", "quorum", "group_fastest", "bandit"
]

MAX_DEADLINE_S = 7 * 24 * 3600.0
"""Longest deadline a round may have: a week."""
MAX_K = 10_000
"""Most workers a round may wait for or choose (``phalanx.config.MAX_WORKERS``)."""

#: The parameters each policy reads; any other one set is refused.
PARAMETERS: dict[str, frozenset[str]] = {
    "all": frozenset(),
    "deadline": frozenset({"deadline_s"}),
    "fastest_k": frozenset({"deadline_s", "k"}),
    "adaptive_k": frozenset({"deadline_s", "k", "k_step", "burn_in"}),
    "quorum": frozenset({"deadline_s", "m"}),
    "group_fastest": frozenset({"deadline_s", "group_selection", "lazy_c", "max_staleness"}),
    "bandit": frozenset({"deadline_s", "k", "exploration"}),
}
#: The parameters a policy cannot do without.
REQUIRED: dict[str, frozenset[str]] = {
    "deadline": frozenset({"deadline_s"}),
    "fastest_k": frozenset({"k"}),
    "adaptive_k": frozenset({"k"}),
    "bandit": frozenset({"k"}),
}
#: What an optional parameter left ``null`` means.
DEFAULTS: dict[str, float | int | str] = {
    "k_step": 1,
    "burn_in": 10,
    "m": 2,
    "group_selection": "all",
    "lazy_c": 1.0,
    "max_staleness": 10,
    "exploration": 1.5,
}
_PARAMETER_NAMES = frozenset().union(*PARAMETERS.values())


class CollectConfig(NumbersNotBooleans):
    """When a round stops waiting for replies: the policy and its parameters.

    Every parameter is ``null`` unless its policy reads it; ``null`` means the
    default named in its description. A parameter set for a policy that does
    not read it is refused, so a config never says more than it does.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    policy: PolicyName = Field(
        default="all",
        description="all: wait for every reply (close at the last); deadline: a cut-off; "
        "fastest_k: the first k complete replies; adaptive_k: fastest_k with k growing at each "
        "error floor; quorum: every file has m agreeing replicas; group_fastest: the fastest "
        "worker of each group (G-CADA); bandit: work only for k workers a UCB bandit chooses.",
    )
    deadline_s: float | None = Field(
        default=None,
        gt=0.0,
        le=MAX_DEADLINE_S,
        description="Seconds after which the round closes with what arrived; required by "
        "deadline, an upper bound for the others (null: none but the transport's timeout).",
    )
    k: int | None = Field(
        default=None,
        ge=1,
        le=MAX_K,
        description="fastest_k: workers waited for; adaptive_k: the starting k; bandit: "
        "workers chosen each round.",
    )
    k_step: int | None = Field(
        default=None, ge=1, le=MAX_K, description="adaptive_k: growth of k at a floor (null: 1)."
    )
    burn_in: int | None = Field(
        default=None,
        ge=0,
        le=100_000,
        description="adaptive_k: rounds after each growth before the stationarity test "
        "counts (null: 10).",
    )
    m: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="quorum: agreeing replicas that close a file (null: 2).",
    )
    group_selection: Literal["all", "lazy"] | None = Field(
        default=None,
        description="group_fastest: wait for every group, or the groups CADA's lazy rule "
        "selects (null: all).",
    )
    lazy_c: float | None = Field(
        default=None,
        ge=0.0,
        le=1e6,
        description="group_fastest, lazy: CADA's laziness constant c (null: 1.0).",
    )
    max_staleness: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="group_fastest, lazy: rounds after which a group is waited for whatever "
        "its innovation (null: 10).",
    )
    exploration: float | None = Field(
        default=None,
        ge=0.0,
        le=100.0,
        description="bandit: weight of the UCB exploration bonus (null: 1.5, CUCB's 3/2).",
    )

    messages: Literal["per_reply", "per_file"] | None = Field(
        default=None,
        description="per_reply: a worker's files arrive together, in one reply; per_file: "
        "each file goes out as soon as it is computed, so a straggler's finished files count "
        "(null: per_reply).",
    )
    drop_compute: StrictBool | None = Field(
        default=None,
        strict=True,
        description="DropCompute: a worker stops computing once its compute time passes the "
        "round's budget and sends the files it finished (null: false).",
    )
    compute_budget_s: float | None = Field(
        default=None,
        gt=0.0,
        le=MAX_DEADLINE_S,
        description="drop_compute: seconds of compute per round (null: chosen after the "
        "warm-up rounds from the measured compute times, to maximise files per second).",
    )
    warmup_rounds: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="drop_compute with an automatic budget: rounds measured, without a "
        "budget, before it is chosen (null: 3).",
    )

    @model_validator(mode="after")
    def _parameters_of_the_policy(self) -> CollectConfig:
        given = {name for name in _PARAMETER_NAMES if getattr(self, name) is not None}
        stray = sorted(given - PARAMETERS[self.policy])
        if stray:
            reads = ", ".join(sorted(PARAMETERS[self.policy])) or "none"
            raise ValueError(
                f"{', '.join(stray)} not read by policy {self.policy!r} (it reads: {reads}); "
                "remove them or choose the policy that reads them"
            )
        absent = sorted(REQUIRED.get(self.policy, frozenset()) - given)
        if absent:
            raise ValueError(f"policy {self.policy!r} needs {', '.join(absent)}")
        budget = [n for n in ("compute_budget_s", "warmup_rounds") if getattr(self, n) is not None]
        if budget and not self.drop_compute:
            raise ValueError(f"{', '.join(budget)} apply only with drop_compute = true")
        if self.compute_budget_s is not None and self.warmup_rounds is not None:
            raise ValueError("warmup_rounds apply only to an automatic budget: remove one")
        lazy_only = {"lazy_c", "max_staleness"} & given
        if lazy_only and self.group_selection != "lazy":
            raise ValueError(
                f"{', '.join(sorted(lazy_only))} apply only with group_selection 'lazy'"
            )
        return self

    @property
    def per_file(self) -> bool:
        """Whether each file goes out on its own as soon as it is computed."""
        return self.messages == "per_file"

    @property
    def warmup(self) -> int:
        """Rounds measured before an automatic compute budget is chosen."""
        return 3 if self.warmup_rounds is None else self.warmup_rounds

    def parameters(self) -> dict[str, float | int | str]:
        """Return the parameters the policy reads, ``null`` ones at their defaults."""
        chosen = {
            name: getattr(self, name) if getattr(self, name) is not None else DEFAULTS.get(name)
            for name in sorted(PARAMETERS[self.policy])
        }
        if chosen.get("group_selection") == "all":
            chosen = {k: v for k, v in chosen.items() if k not in {"lazy_c", "max_staleness"}}
        return {name: value for name, value in chosen.items() if value is not None}
