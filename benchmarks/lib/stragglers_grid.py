"""The grid of ``eval_stragglers.py``: workloads, device profiles, policies, and a config per case.

A :class:`Workload` is a model trained by ``K`` workers on an assignment
(:class:`Layout`); a :class:`Profile` is the systems model of their devices
(``RunConfig.systems``); a :class:`Policy` is when a round stops waiting
(``RunConfig.collect``). A :class:`Case` is one run: a workload on one layout,
a profile, a policy and an attack, on one transport; it gives the run config.

Every policy but ``group_fastest`` runs on the workload's main layout; the
``group_fastest`` policies need the ``groups`` scheme (a group is the workers of
one file) and run there, with a run of ``all`` on the same layout to compare
against. The asynchronous mode (``RunConfig.asynchronous``, r = 1 only) runs on
the workload's r = 1 layout, where there is one, beside a run of ``all`` there.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from benchmarks.lib.robustness_grid import FLOWER, IN_PROCESS, NO_ATTACK
from phalanx.collect import PolicyName
from phalanx.config import RunConfig, Scheme
from phalanx.nets import build_model, num_params
from phalanx.plan import base_assignment
from phalanx.systems import SystemsConfig, arrival_time, draw_profiles

SEED = 2026
ATTACK = "alie"
"""The attack of the attacked runs: A Little Is Enough, from weak (random) adversaries."""
Q = 3
TRACE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "devices-100.csv"
"""The device-capacity trace of profile (c): 100 made-up devices (``generate.py`` beside it)."""

DEADLINE_MARGIN = 1.25
"""The deadline over the ``ceil(0.8 K)``-th worker's typical arrival: room for a round's jitter."""
PAYLOAD_DIGEST_BYTES = 64
"""A reply's digest of one payload: SHA-256 in hex."""


@dataclass(frozen=True)
class Layout:
    """An assignment scheme at one ``r``, with the training samples each file holds."""

    scheme: Scheme
    r: int
    samples_per_file: int


@dataclass(frozen=True)
class Workload:
    """A model trained by ``num_workers`` workers, on its main layout and on ``groups``."""

    key: str
    label: str
    model: Literal["cnn", "mlp"]
    num_workers: int
    main: Layout
    groups: Layout
    server_lr: float
    rounds: int
    eval_samples: int = 1000
    r1: Layout | None = None
    """The layout of the asynchronous mode, which needs r = 1; ``None``: it does not run."""


WORKLOADS = (
    # STS(15), the default run config's assignment: 35 files of 14 samples (490 a round,
    # 98 per worker); groups of 3: 5 files of 96 (480 a round, 96 per worker). Adam's
    # step is eval_compression.py's, tuned for this CNN.
    Workload(
        "cnn-k15",
        "Fashion-MNIST CNN, K = 15",
        "cnn",
        15,
        main=Layout("bibd", 3, 14),
        groups=Layout("groups", 3, 96),
        server_lr=0.004,
        rounds=30,
    ),
    # K = 100 has no Steiner triple system (K is not 1 or 3 mod 6) and no MOLS design
    # (no r with K / r a prime above r), and subsets would be C(100, 3) files: every
    # policy runs on groups of 4 (25 files of 64 samples, 1,600 a round). Adam's step
    # is eval_robustness.py's, for this MLP.
    Workload(
        "mlp-k100",
        "Fashion-MNIST MLP, K = 100",
        "mlp",
        100,
        main=Layout("groups", 4, 64),
        groups=Layout("groups", 4, 64),
        server_lr=0.005,
        rounds=30,
        # r = 1, each worker the 64 samples of one file: a worker's compute as on groups.
        r1=Layout("none", 1, 64),
    ),
)

NETWORK: tuple[tuple[str, Any], ...] = (
    ("up_bytes_per_s", 1.25e7),
    ("down_bytes_per_s", 1.25e8),
    ("latency_s", 0.05),
)
"""Links of profiles (a) and (b): 100 Mbit/s up, 1 Gbit/s down, so that compute dominates.

A bibd worker uploads 7 CNN updates a round (11.8 MB): about 0.9 s at this
rate, against about 1 s of compute for its 98 samples at 10 ms a sample.
"""
ROUND_SIGMA = 0.2
"""Log-deviation of every worker's per-round compute factor, in every profile."""


@dataclass(frozen=True)
class Profile:
    """A systems model of the workers' devices: a ``systems`` section, ``enabled`` implied."""

    key: str
    letter: str
    label: str
    settings: tuple[tuple[str, Any], ...]

    @property
    def short(self) -> str:
        """The profile in a table cell, e.g. ``(b) persistent stragglers``."""
        return f"({self.letter}) {self.key.replace('_', ' ')}"

    def systems(self) -> dict[str, Any]:
        """The run config's ``systems`` section."""
        return {"enabled": True, **dict(self.settings)}


PROFILES = (
    # Compute speed 5 ms + 5 ms x Exp(1) per sample, drawn once per worker.
    Profile(
        "shifted_exponential",
        "a",
        "(a) shifted exponential",
        (
            ("speed_distribution", "shifted_exponential"),
            ("speed_shift_s", 0.005),
            ("speed_scale_s", 0.005),
            ("round_sigma", ROUND_SIGMA),
            *NETWORK,
        ),
    ),
    Profile(
        "persistent_stragglers",
        "b",
        "(b) 20 % persistent stragglers, 5x slower",
        (
            ("speed_distribution", "constant"),
            ("speed_scale_s", 0.01),
            ("straggler_fraction", 0.2),
            ("straggler_slowdown", 5.0),
            ("round_sigma", ROUND_SIGMA),
            *NETWORK,
        ),
    ),
    # The trace's rows give each worker's speed, links and latency (workers 0..K-1).
    Profile(
        "trace_dropout",
        "c",
        "(c) device trace, 10 % dropouts per round",
        (
            ("trace", str(TRACE)),
            ("availability", "dropout"),
            ("dropout_probability", 0.1),
            ("round_sigma", ROUND_SIGMA),
        ),
    ),
)


@dataclass(frozen=True)
class Policy:
    """A collection policy of the grid; ``on_groups``: it needs the ``groups`` scheme.

    ``asynchronous``: not a policy but the asynchronous mode (a buffer of ``K / 2``),
    on the workload's r = 1 layout, with ``max_staleness`` (``None``: the mode's
    default).
    """

    label: str
    name: PolicyName
    on_groups: bool = False
    lazy: bool = False
    asynchronous: bool = False
    max_staleness: int | None = None

    @property
    def key(self) -> str:
        """File- and id-safe name."""
        return self.label.replace(" (lazy)", "-lazy")


ALL = Policy("all", "all")
POLICIES = (
    ALL,
    Policy("deadline", "deadline"),
    Policy("fastest_k", "fastest_k"),
    Policy("adaptive_k", "adaptive_k"),
    Policy("quorum", "quorum"),
    Policy("group_fastest", "group_fastest", on_groups=True),
    Policy("group_fastest (lazy)", "group_fastest", on_groups=True, lazy=True),
    Policy("bandit", "bandit"),
    Policy("asynchronous", "all", asynchronous=True),
    Policy("asynchronous-fresh", "all", asynchronous=True, max_staleness=0),
)
"""The asynchronous runs buffer K / 2 updates (a worker holds one slot of a buffer, so a
buffer of K would wait for the slowest): a round of them is half the work of a round
of ``all``. ``asynchronous`` keeps the mode's default staleness bound (10 versions),
``asynchronous-fresh`` drops every update computed on an older model."""


def fastest_count(num_workers: int) -> int:
    """Workers ``fastest_k`` and ``bandit`` wait for: ``ceil(0.8 K)`` (12 of 15, 80 of 100).

    Also the rank of the typical arrival the deadline is set from (:func:`deadline_for`).
    """
    return -(-4 * num_workers // 5)


def collect_section(
    policy: Policy, *, num_workers: int, r: int, deadline_s: float | None
) -> dict[str, Any]:
    """The run config's ``collect`` section for ``policy`` on ``num_workers`` workers at ``r``.

    ``deadline``: ``deadline_s`` (:func:`deadline_for`); ``fastest_k`` and
    ``bandit``: ``k = ceil(0.8 K)``; ``adaptive_k``: from ``K // 2``, growing by
    ``max(1, K // 20)`` at each error floor; ``quorum``: ``m`` a majority of the
    ``r`` replicas; ``group_fastest``: every group, or CADA's lazy choice.
    """
    k = fastest_count(num_workers)
    if policy.name == "deadline":
        if deadline_s is None:
            raise ValueError("the deadline policy needs deadline_s")
        return {"policy": "deadline", "deadline_s": deadline_s}
    if policy.name in ("fastest_k", "bandit"):
        return {"policy": policy.name, "k": k}
    if policy.name == "adaptive_k":
        return {"policy": "adaptive_k", "k": num_workers // 2, "k_step": max(1, num_workers // 20)}
    if policy.name == "quorum":
        return {"policy": "quorum", "m": r // 2 + 1}
    if policy.name == "group_fastest" and policy.lazy:
        return {"policy": "group_fastest", "group_selection": "lazy"}
    return {"policy": policy.name}


@functools.cache
def model_parameters(model: Literal["cnn", "mlp"]) -> int:
    """Parameters of Fashion-MNIST's ``model`` (1 x 28 x 28 images, 10 classes)."""
    return num_params(build_model(model, in_channels=1, image_size=28, num_classes=10))


def typical_arrivals(config: RunConfig) -> tuple[float, ...]:
    """Each worker's reply arrival in a typical round: no jitter, nobody away.

    The systems model's clock (:func:`phalanx.systems.arrival_time`) on the
    base assignment, with the per-round factor at 1 and every worker there; the
    broadcast is the float32 model, each payload a float32 update with its digest.
    """
    typical = SystemsConfig.model_validate(
        {
            **config.systems.model_dump(),
            "round_sigma": 0.0,
            "availability": "always",
            "dropout_probability": None,
        }
    )
    K = config.assignment.num_workers
    profiles = draw_profiles(typical, K, config.seed)
    assignment = base_assignment(config)
    update = 4 * model_parameters(config.data.model)
    return tuple(
        arrival_time(
            typical,
            profiles[w],
            seed=config.seed,
            worker=w,
            round_=1,
            bytes_down=update,
            work=[config.data.samples_per_file] * len(assignment.files_of(w)),
            bytes_up=len(assignment.files_of(w)) * (update + PAYLOAD_DIGEST_BYTES),
        )
        for w in range(K)
    )


def deadline_for(config: RunConfig) -> float:
    """The ``deadline`` policy's cut-off: 1.25 x the ``ceil(0.8 K)``-th typical arrival.

    In a typical round (:func:`typical_arrivals`) 80 % of the workers reply by
    the quantile; the margin leaves room for the per-round factor. Rounded to
    the millisecond.
    """
    times = sorted(typical_arrivals(config))
    quantile = times[fastest_count(len(times)) - 1]
    return round(DEADLINE_MARGIN * quantile, 3)


@dataclass(frozen=True)
class Case:
    """One run of the grid."""

    workload: Workload
    layout: Layout
    profile: Profile
    policy: Policy
    attack: str
    rounds: int
    transport: str = IN_PROCESS
    seed: int = SEED

    @property
    def q(self) -> int:
        """Adversaries of the run."""
        return 0 if self.attack == NO_ATTACK else Q

    @property
    def run_id(self) -> str:
        """Run id (it also derives the simulated workers' keys); the same on both transports."""
        return (
            f"stragglers-{self.workload.key}-{self.layout.scheme}{self.layout.r}-"
            f"{self.profile.key}-{self.policy.key}-{self.attack}-s{self.seed}-{self.rounds}r"
        )

    def document(self) -> dict[str, Any]:
        """The run config as a document, without its ``collect`` section."""
        w, layout = self.workload, self.layout
        document: dict[str, Any] = {
            "name": self.run_id,
            "seed": self.seed,
            "rounds": self.rounds,
            "data": {
                "dataset": "fashion-mnist",
                "model": w.model,
                "samples_per_file": layout.samples_per_file,
                "eval_samples": w.eval_samples,
            },
            "assignment": {"scheme": layout.scheme, "num_workers": w.num_workers, "r": layout.r},
            "attack": {
                "name": None if self.q == 0 else self.attack,
                "q": self.q,
                "selection": "weak",
                "strategy": "all",
            },
            "training": {"optimizer": "adam", "server_lr": w.server_lr},
            "systems": self.profile.systems(),
        }
        if self.policy.asynchronous:
            document["asynchronous"] = {"enabled": True, "buffer_size": w.num_workers // 2}
            if self.policy.max_staleness is not None:
                document["asynchronous"]["max_staleness"] = self.policy.max_staleness
        return document

    def config(self) -> RunConfig:
        """The run config of this case.

        Raises
        ------
        pydantic.ValidationError
            When the platform refuses the policy (one runs do not carry yet).
        """
        document = self.document()
        deadline = (
            deadline_for(RunConfig.model_validate(document))
            if self.policy.name == "deadline"
            else None
        )
        document["collect"] = collect_section(
            self.policy, num_workers=self.workload.num_workers, r=self.layout.r, deadline_s=deadline
        )
        return RunConfig.model_validate(document)


def cell_cases(
    workload: Workload,
    profile: Profile,
    attack: str,
    policies: Sequence[Policy],
    rounds: int,
    transport: str = IN_PROCESS,
) -> list[Case]:
    """The runs of one cell: each policy on its layout, and ``all`` on every layout used.

    With ``ALL`` among ``policies``, ``all`` runs on the main layout, and on
    ``groups`` (or the r = 1 layout) too when ``group_fastest`` policies (or the
    asynchronous mode) run there and it is not the main layout; without it, the
    policies are compared with ``all`` runs stored before.
    """

    def runs_on(policy: Policy, layout: Layout) -> bool:
        if policy.asynchronous:
            return layout == workload.r1
        return layout == (workload.groups if policy.on_groups else workload.main)

    cases = []
    layouts = (workload.main, workload.groups, *([workload.r1] if workload.r1 else []))
    for layout in dict.fromkeys(layouts):
        mine = [p for p in policies if p != ALL and runs_on(p, layout)]
        if ALL in policies and (layout == workload.main or mine):
            cases.append(Case(workload, layout, profile, ALL, attack, rounds, transport))
        cases += [Case(workload, layout, profile, p, attack, rounds, transport) for p in mine]
    return cases


def grid(
    workloads: Sequence[Workload],
    profiles: Sequence[Profile],
    attacks: Sequence[str],
    policies: Sequence[Policy],
    rounds: int | None = None,
) -> list[Case]:
    """Every cell (workload x profile x attack) with its runs; ``rounds``: the workload's."""
    return [
        case
        for w in workloads
        for profile in profiles
        for attack in attacks
        for case in cell_cases(w, profile, attack, policies, rounds or w.rounds)
    ]


QUICK_ROUNDS = 3


def quick_grid(policies: Sequence[Policy] = POLICIES, rounds: int = QUICK_ROUNDS) -> list[Case]:
    """A tiny grid that runs every path: the CNN under (b), the MLP under each profile."""
    cnn, mlp = WORKLOADS
    return grid([cnn], PROFILES[1:2], (NO_ATTACK, ATTACK), policies, rounds) + grid(
        [mlp], PROFILES, (NO_ATTACK, ATTACK), policies, rounds
    )


FLOWER_ROUNDS = 5


def flower_twins(
    policies: Sequence[Policy], rounds: int = FLOWER_ROUNDS
) -> list[tuple[Case, Case]]:
    """One run per policy through Flower, each with its in-process twin of the same rounds.

    The CNN at K = 15 under profile (b) and the attack: lateness, detection and
    every layout of that workload at once. The asynchronous mode has no twin here:
    the CNN's layouts are r = 3.
    """
    workload, profile = WORKLOADS[0], PROFILES[1]
    twins = []
    # The asynchronous mode's twin is a test (tests/phalanx/flower/test_simulation_asynchronous.py).
    for p in (p for p in policies if not p.asynchronous):
        layout = workload.groups if p.on_groups else workload.main
        flower = Case(workload, layout, profile, p, ATTACK, rounds, FLOWER)
        twins.append((flower, replace(flower, transport=IN_PROCESS)))
    return twins


def select(known: Sequence[Any], wanted: str | None, what: str) -> list[Any]:
    """The items of ``known`` whose key (or label) is in the comma-separated ``wanted``.

    Raises
    ------
    ValueError
        Naming an unknown key and the known ones.
    """
    if wanted is None:
        return list(known)
    keys = {getattr(x, "key", getattr(x, "label", x)): x for x in known}
    chosen = []
    for name in (n.strip() for n in wanted.split(",") if n.strip()):
        if name not in keys:
            raise ValueError(f"unknown {what} {name!r}; choose from {', '.join(keys)}")
        chosen.append(keys[name])
    return chosen
