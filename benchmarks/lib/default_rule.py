"""The default robust rule after detection against the plain mean: cases, pairs, the table.

Each pair runs one seed and one attack setting twice, identical but for
``[aggregation]``: the plain mean (``rule = "mean"``, ``f = 0``) and the default
(``trimmed_mean``, ``f = "auto"``: per round, the accepted files the liars not yet
proven could have supplied). The difference of final accuracies, default minus
mean, is what the default costs (without attack) or saves (under attack).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from phalanx.config import RunConfig

Rule = Literal["mean", "default"]
RULES: tuple[Rule, ...] = ("mean", "default")
SEEDS = (2026, 2027, 2028)
ROUNDS = 20


@dataclass(frozen=True)
class Setting:
    """An attack setting of the evaluation (``q = 0``: no attack)."""

    name: str
    q: int = 0
    strategy: str = "all"
    attack: str | None = None


SETTINGS = (
    Setting("no attack"),
    # Issue 17's report: colluders who lie only where they hold a file's majority, with
    # updates reversed and scaled by 100; relabelling hands them whole files now and then.
    Setting("3 colluders, only_majorities", 3, "only_majorities", "reversed_gradient"),
)


@dataclass(frozen=True)
class Case:
    """One run: a setting, a seed and the rule."""

    setting: Setting
    seed: int
    rule: Rule
    rounds: int = ROUNDS

    @property
    def run_id(self) -> str:
        """Run id (it also derives the simulated workers' keys)."""
        return f"default-rule-q{self.setting.q}-{self.rule}-s{self.seed}-{self.rounds}r"

    def config(self) -> RunConfig:
        """The default run configuration (STS(15)) on Fashion-MNIST's MLP, but for the rule."""
        s = self.setting
        document: dict[str, Any] = {
            "name": self.run_id,
            "seed": self.seed,
            "rounds": self.rounds,
            "data": {
                "dataset": "fashion-mnist",
                "model": "mlp",
                "samples_per_file": 14,
                "eval_samples": 1000,
            },
            "attack": {
                "name": s.attack,
                "q": s.q,
                "selection": "strong",
                "strategy": s.strategy,
            },
            "training": {"optimizer": "adam", "server_lr": 0.005},
        }
        if self.rule == "mean":
            document["aggregation"] = {"rule": "mean", "f": 0}
        return RunConfig.model_validate(document)


def cases(seeds: Sequence[int] = SEEDS, rounds: int = ROUNDS) -> list[Case]:
    """Every setting and seed, each with both rules (a pair)."""
    return [Case(s, seed, rule, rounds) for s in SETTINGS for seed in seeds for rule in RULES]


@dataclass(frozen=True)
class Outcome:
    """What one run gave."""

    setting: str
    seed: int
    rule: Rule
    final_accuracy: float | None
    mean_f_used: float | None
    seconds: float
    error: str | None = None


@dataclass(frozen=True)
class PairSummary:
    """Default minus mean, over the seeds of one setting, in accuracy points."""

    setting: str
    mean_accuracy: float
    default_accuracy: float
    differences: tuple[float, ...]
    mean_f_used: float

    @property
    def difference(self) -> float:
        """Mean difference over the seeds."""
        return statistics.fmean(self.differences)


def summarize(outcomes: Sequence[Outcome]) -> list[PairSummary]:
    """Pair the two rules' runs of each setting and seed; settings in first-seen order.

    Raises
    ------
    ValueError
        When a run failed or has no partner: a pair is all or nothing.
    """
    by_key = {(o.setting, o.seed, o.rule): o for o in outcomes}
    summaries = []
    for setting in dict.fromkeys(o.setting for o in outcomes):
        seeds = sorted({o.seed for o in outcomes if o.setting == setting})
        pairs = []
        for seed in seeds:
            mean, default = (by_key.get((setting, seed, rule)) for rule in RULES)
            if mean is None or default is None:
                raise ValueError(f"{setting}, seed {seed}: a rule's run is missing")
            for o in (mean, default):
                if o.final_accuracy is None or o.error is not None:
                    raise ValueError(f"{setting}, seed {seed}, {o.rule}: {o.error}")
            pairs.append((mean, default))
        summaries.append(
            PairSummary(
                setting=setting,
                mean_accuracy=statistics.fmean(_accuracy(m) for m, _ in pairs),
                default_accuracy=statistics.fmean(_accuracy(d) for _, d in pairs),
                differences=tuple(_accuracy(d) - _accuracy(m) for m, d in pairs),
                mean_f_used=statistics.fmean(d.mean_f_used or 0.0 for _, d in pairs),
            )
        )
    return summaries


def _accuracy(outcome: Outcome) -> float:
    assert outcome.final_accuracy is not None  # summarize checked it
    return 100 * outcome.final_accuracy


def markdown(summaries: Sequence[PairSummary], notes: str) -> str:
    """The results table, one line per setting, with the per-seed differences."""
    lines = [
        "# The default rule after detection against the plain mean",
        "",
        notes,
        "",
        "| setting | mean | default (trimmed mean, f auto) | default - mean | per seed | "
        "mean f used |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for s in summaries:
        per_seed = ", ".join(f"{d:+.2f}" for d in s.differences)
        lines.append(
            f"| {s.setting} | {s.mean_accuracy:.2f} % | {s.default_accuracy:.2f} % | "
            f"{s.difference:+.2f} | {per_seed} | {s.mean_f_used:.1f} |"
        )
    return "\n".join(lines) + "\n"
