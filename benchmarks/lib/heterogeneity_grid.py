"""The grid of ``eval_heterogeneity.py``: partitions, aggregators, attacks, one run config per case.

Every case is a local-data run (``data.mode = "local"``): K = 20 clients of
Fashion-MNIST, each training on its own part of a seeded partition (IID, or
Dirichlet over labels with concentration alpha), r = 1, aggregated by one rule,
alone or after nearest-neighbour mixing (NNM). Every rule is told to tolerate
``F`` = 4 inputs, the most adversaries of the grid, in every case, attacked or
not, so that a row under attack and the row of the same rule without attack
differ by the attack alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from phalanx.config import RunConfig

K = 20
F = 4
SEED = 2026
IN_PROCESS = "in-process (test double)"
FLOWER = "flower-simulation"
NO_ATTACK = "none"


@dataclass(frozen=True)
class Partition:
    """How the clients' data is divided: ``iid``, or ``dirichlet`` with ``alpha``."""

    kind: Literal["iid", "dirichlet"]
    alpha: float | None = None

    @property
    def label(self) -> str:
        """``iid`` or ``dirichlet-0.3``."""
        return self.kind if self.alpha is None else f"{self.kind}-{self.alpha:g}"

    def setting(self) -> dict[str, object] | None:
        """The ``data.partition`` table of a run config (``None``: IID, the default)."""
        return None if self.alpha is None else {"kind": self.kind, "alpha": self.alpha}


PARTITIONS = (
    Partition("iid"),
    Partition("dirichlet", 1.0),
    Partition("dirichlet", 0.3),
    Partition("dirichlet", 0.1),
)
RULES = (
    "mean",
    "median",
    "trimmed_mean",
    "multi_krum",
    "geometric_median",
    "centered_clipping",
)
PRES: tuple[str | None, ...] = (None, "nnm")
ATTACKS = ("alie", "ipm", "sign_flip", "label_flip")
QS = (0, 2, 4)


@dataclass(frozen=True)
class Settings:
    """What every run of one invocation shares."""

    rounds: int
    model: Literal["cnn", "mlp"]
    steps: int
    batch_size: int
    lr: float
    eval_samples: int


@dataclass(frozen=True)
class Case:
    """One cell of the grid: a partition, a rule (after ``pre`` or alone), an attack and q."""

    partition: Partition
    rule: str
    pre: str | None
    attack: str
    q: int
    seed: int = SEED

    @property
    def aggregator(self) -> str:
        """``median`` or ``nnm + median``."""
        return self.rule if self.pre is None else f"{self.pre} + {self.rule}"

    @property
    def run_id(self) -> str:
        """Run id (it also derives the simulated workers' keys)."""
        pre = "" if self.pre is None else f"{self.pre}-"
        seed = "" if self.seed == SEED else f"-seed{self.seed}"  # the first seed's ids as before
        return (
            f"heterogeneity-{self.partition.label}-{pre}{self.rule}-{self.attack}-q{self.q}{seed}"
        )

    def config(self, settings: Settings) -> RunConfig:
        """The run configuration of this case."""
        data: dict[str, object] = {
            "dataset": "fashion-mnist",
            "model": settings.model,
            "mode": "local",
            "eval_samples": settings.eval_samples,
            "local": {
                "steps": settings.steps,
                "batch_size": settings.batch_size,
                "lr": settings.lr,
                "optimizer": "sgd",
            },
        }
        if self.partition.setting() is not None:
            data["partition"] = self.partition.setting()
        aggregation: dict[str, object] = {"rule": self.rule, "f": F}
        if self.pre is not None:
            aggregation["pre"] = self.pre
        return RunConfig.model_validate(
            {
                "name": self.run_id,
                "seed": self.seed,
                "rounds": settings.rounds,
                "data": data,
                "assignment": {"scheme": "none", "num_workers": K, "r": 1},
                "aggregation": aggregation,
                "attack": {
                    "name": None if self.q == 0 else self.attack,
                    "q": self.q,
                },
                # FedAvg's server step: the aggregate of the clients' updates, as is.
                "training": {"optimizer": "sgd", "server_lr": 1.0, "momentum": 0.0},
            }
        )


def grid(
    partitions: Sequence[Partition],
    rules: Sequence[str],
    pres: Sequence[str | None],
    attacks: Sequence[str],
    qs: Sequence[int],
    seeds: Sequence[int] = (SEED,),
) -> list[Case]:
    """Every case: each partition and aggregator without attack (``0`` in ``qs``), then under
    each attack and positive q; each under every seed (a seed draws the partition, the
    adversaries and the initial model)."""
    cases = []
    for seed in seeds:
        for partition in partitions:
            for pre in pres:
                for rule in rules:
                    if 0 in qs:
                        cases.append(Case(partition, rule, pre, NO_ATTACK, 0, seed))
                    cases.extend(
                        Case(partition, rule, pre, attack, q, seed)
                        for attack in attacks
                        for q in qs
                        if q
                    )
    return cases
