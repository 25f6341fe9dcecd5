"""Byzantine behaviours for simulation and red-team runs.

A Byzantine worker wraps an honest one: it computes the honest updates of its
files, then replaces those that the adversaries' strategy says to distort with
the attack's output. Omniscient attacks (ALIE, IPM, mimic) see the honest
updates of a sample of the round's files, the same sample for every adversary,
so colluding adversaries send identical vectors for the same file.

On local data (a task that names the run's model shape) an adversary's task has
one file, its own, and no sample index. Its honest update is its local training on
its own data, as an honest client of that data would train; a data attack (label
flip) trains so on poisoned labels; an update attack sees the reference crowd
(:mod:`phalanx_clients.crowd`): the honest local updates of a round-seeded sample
of honest clients, computed once per round by the red team. Its reply claims the
count an honest client of its data would claim.

The red team knows the round's plan (it is the omniscient adversary of a
simulation): it derives the assignment and the files' samples it needs once per
round and keeps the last few (:data:`ROUNDS_KEPT`), instead of once per task; so
too the reference updates an update attack sees (on assigned data, the honest
updates of :data:`REFERENCE_FILES` files; on local data, the reference crowd).
An adversary's task thus costs its own files, whatever the federation's size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.attacks import (
    Attack,
    AttackContext,
    DataAttack,
    distortion_plan,
    forged_update,
    load_attack,
)
from phalanx.config import RunConfig
from phalanx.data import ImageDataset, load_dataset
from phalanx.data_mode import ModelShape
from phalanx.plan import adversaries, round_assignment, round_samples, task_samples
from phalanx.replies import Task
from phalanx.training import derive_seed
from phalanx_clients.crowd import LocalCrowd
from phalanx_clients.file_updates import compute_file_updates
from phalanx_clients.local_updates import compute_local_update, local_model

REFERENCE_FILES = 8

ROUNDS_KEPT = 2
"""Rounds whose plan a red team keeps at once (a round's tasks all come before the next's)."""

TrainData = Callable[[RunConfig], ImageDataset]
"""Maps a run config to the run's training split (what a simulated client's part comes from)."""


def run_train_set(config: RunConfig) -> ImageDataset:
    """Load the training split of ``config``'s dataset (the red team's default source)."""
    return load_dataset(config.data.dataset, "train", num_classes=config.data.num_classes)


@dataclass(frozen=True)
class RoundPlan:
    """What the red team knows of one round: who holds what, and whom to distort."""

    assignment: Assignment
    distort: dict[int, frozenset[int]]


@dataclass(frozen=True)
class RedTeam:
    """Who the adversaries are and how they attack (ground truth in simulation)."""

    adversaries: frozenset[int]
    attack: Attack | DataAttack
    strategy: str
    train_data: TrainData = field(default=run_train_set, repr=False, compare=False)
    """The run's training split, for the reference crowd on local data (a host that
    holds it already passes it, so the red team does not load a second copy)."""
    _plans: dict[int, RoundPlan] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    _crowds: dict[str, LocalCrowd] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    _references: dict[int, tuple[bytes, Tensor]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    _file_references: dict[int, tuple[bytes, Tensor]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def round_plan(self, config: RunConfig, round: int) -> RoundPlan:
        """Return round ``round``'s assignment and distortion plan, derived once per round."""
        plan = self._plans.get(round)
        if plan is None:
            assignment = round_assignment(config, round)
            distort = distortion_plan(
                assignment,
                self.adversaries,
                strategy=self.strategy,  # type: ignore[arg-type]
                seed=config.seed,
            )
            plan = self._plans[round] = RoundPlan(assignment, dict(distort))
            while len(self._plans) > ROUNDS_KEPT:
                del self._plans[min(self._plans)]
        return plan

    def local_crowd(self, config: RunConfig) -> LocalCrowd:
        """Return every simulated client's own data in ``config``'s run, derived once."""
        key = hashlib.sha256(config.model_dump_json().encode()).hexdigest()
        crowd = self._crowds.get(key)
        if crowd is None:
            self._crowds.clear()  # one run per red team: keep its crowd, never a second
            crowd = self._crowds[key] = LocalCrowd.of(config, self.train_data(config))
        return crowd

    def reference_updates(
        self, config: RunConfig, round: int, params: Tensor, shape: ModelShape
    ) -> Tensor:
        """Return round ``round``'s reference crowd on local data, computed once per round.

        The stack of :meth:`phalanx_clients.crowd.LocalCrowd.reference_updates`, the
        same for every adversary; kept for the last :data:`ROUNDS_KEPT` rounds, each
        with the digest of the ``params`` it started from (other parameters: computed
        afresh).
        """
        return _kept(
            self._references,
            round,
            params,
            lambda: self.local_crowd(config).reference_updates(
                self.round_plan(config, round).assignment, self.adversaries, round, params, shape
            ),
        )

    def file_references(
        self, config: RunConfig, train_set: ImageDataset, round: int, params: Tensor
    ) -> Tensor:
        """Return round ``round``'s reference updates on assigned data, computed once per round.

        The honest updates of a round-seeded sample of :data:`REFERENCE_FILES` files
        (:func:`reference_file_updates`), the same for every adversary; kept for the
        last :data:`ROUNDS_KEPT` rounds like :meth:`reference_updates`, with the
        digest of the ``params`` they started from.
        """
        num_files = self.round_plan(config, round).assignment.num_files
        return _kept(
            self._file_references,
            round,
            params,
            lambda: reference_file_updates(config, train_set, round, num_files, params),
        )

    @classmethod
    def from_config(
        cls, config: RunConfig, *, train_data: TrainData = run_train_set
    ) -> RedTeam | None:
        """Build the red team a run config describes, or ``None`` when it has no attack.

        ``train_data`` gives the run's training split, read only on local data (for
        the reference crowd of update attacks).
        """
        spec = config.attack
        if spec.q == 0 or spec.name is None:
            return None
        return cls(
            adversaries=adversaries(config),
            attack=load_attack(spec.name, **spec.params),
            strategy=spec.strategy,
            train_data=train_data,
        )

    def behaviour_of(self, worker: int) -> Behaviour | None:
        """Return the behaviour of ``worker``: ``None`` when it is honest."""
        return Behaviour(self) if worker in self.adversaries else None


@dataclass(frozen=True)
class Behaviour:
    """A Byzantine worker's way of answering a task."""

    red_team: RedTeam

    def updates(
        self,
        honest: dict[int, Tensor],
        task: Task,
        params: Tensor,
        *,
        config: RunConfig,
        train_set: ImageDataset,
    ) -> dict[int, Tensor]:
        """Return the updates this adversary sends for ``task``, keyed by file.

        Parameters
        ----------
        honest : dict
            The worker's honest update of every file of the task.
        task : Task
            The task.
        params : Tensor
            The global model the updates start from.
        config : RunConfig
            The run.
        train_set : ImageDataset
            The worker's training data (a data attack trains on it with flipped labels);
            on local data, its own data less its local test split, as it trains on it.
        """
        plan = self.red_team.round_plan(config, task.round)
        assignment = plan.assignment
        targets = sorted(plan.distort.get(task.worker, frozenset()) & set(task.files))
        if not targets:
            return honest
        if task.model_shape is not None:
            return self._local_updates(honest, task, params, targets, config, train_set)
        attack = self.red_team.attack
        if isinstance(attack, DataAttack):
            samples = task.samples_by_file()
            poisoned = compute_file_updates(
                config,
                train_set,
                task.round,
                {f: samples[f] for f in targets},
                params,
                poison_labels=attack.poison_labels,
            )
            return {**honest, **poisoned}
        # A copy: an attack that writes into it changes no other adversary's reference.
        reference = self.red_team.file_references(config, train_set, task.round, params).clone()
        out = dict(honest)
        for f in targets:
            ctx = AttackContext(
                round=task.round,
                file=f,
                worker=task.worker,
                honest_updates=reference,
                num_workers=config.assignment.num_workers,
                num_byzantine=len(self.red_team.adversaries),
                seed=config.seed,
                holders=assignment.workers_of(f),
                fellows=self.red_team.adversaries & set(assignment.workers_of(f)),
            )
            out[f] = forged_update(attack, honest[f], ctx)
        return out

    def _local_updates(
        self,
        honest: dict[int, Tensor],
        task: Task,
        params: Tensor,
        targets: list[int],
        config: RunConfig,
        train_set: ImageDataset,
    ) -> dict[int, Tensor]:
        """Return a local-data task's update: trained on poisoned labels, or forged.

        The context of an update attack: the file's only holder is the adversary
        itself (r = 1), so ``holders`` is ``(worker,)``, ``fellows`` is ``{worker}``
        and ``majority`` holds; ``honest_updates`` is a copy of the round's reference
        crowd (an attack that writes into it changes no other adversary's crowd).
        """
        shape = task.model_shape
        assert shape is not None  # the caller's test
        attack = self.red_team.attack
        out = dict(honest)
        if isinstance(attack, DataAttack):
            model = local_model(config, shape)
            for f in targets:
                out[f] = compute_local_update(
                    config,
                    model,
                    train_set,
                    task.round,
                    f,
                    params,
                    poison_labels=attack.poison_labels,
                ).update
            return out
        reference = self.red_team.reference_updates(config, task.round, params, shape).clone()
        for f in targets:
            ctx = AttackContext(
                round=task.round,
                file=f,
                worker=task.worker,
                honest_updates=reference,
                num_workers=config.assignment.num_workers,
                num_byzantine=len(self.red_team.adversaries),
                seed=config.seed,
                holders=(task.worker,),
                fellows=frozenset({task.worker}),
            )
            out[f] = forged_update(attack, honest[f], ctx)
        return out


def byzantine_behaviour(attack: str, worker: int) -> Behaviour:
    """Build the behaviour of a lone Byzantine client: ``attack`` on every file it computes.

    A deployed client switched Byzantine for a red-team demonstration lies this way;
    the coordinator knows nothing of it and must find it.

    Raises
    ------
    ValueError
        When ``attack`` names no known attack nor a plug-in this host allows.
    """
    team = RedTeam(adversaries=frozenset({worker}), attack=load_attack(attack), strategy="all")
    return Behaviour(team)


def _kept(
    store: dict[int, tuple[bytes, Tensor]],
    round: int,
    params: Tensor,
    compute: Callable[[], Tensor],
) -> Tensor:
    """Return ``store``'s stack for ``round`` if it started from ``params``, else ``compute()``'s.

    The new stack is kept with the digest of ``params``; only the last
    :data:`ROUNDS_KEPT` rounds are kept.
    """
    digest = hashlib.sha256(params.detach().to(torch.float32).numpy().tobytes()).digest()
    kept = store.get(round)
    if kept is not None and kept[0] == digest:
        return kept[1]
    stack = compute()
    store[round] = (digest, stack)
    while len(store) > ROUNDS_KEPT:
        del store[min(store)]
    return stack


def reference_file_updates(
    config: RunConfig, train_set: ImageDataset, round: int, num_files: int, params: Tensor
) -> Tensor:
    """Honest updates of a round-seeded sample of files, identical for every adversary.

    Derives the round's samples (O(the round's files)): the red team calls it once
    per round (:meth:`RedTeam.file_references`), never once per adversary's task.
    """
    g = torch.Generator().manual_seed(derive_seed(config.seed, round, -1))
    sample = torch.randperm(num_files, generator=g)[: min(REFERENCE_FILES, num_files)]
    files = tuple(sorted(int(f) for f in sample))
    samples = round_samples(config, len(train_set.y), round, num_files)
    chosen = dict(zip(files, task_samples(samples, files), strict=True))
    updates = compute_file_updates(config, train_set, round, chosen, params)
    return torch.stack([updates[f] for f in files])
