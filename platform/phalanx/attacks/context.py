"""What an adversary knows when it forges an update, and the two protocols an attack satisfies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

#: Separates the run-wide stream from every ``(round, file)`` stream of `generator`.
_RUN_STREAM = 2**32 - 1


@dataclass(frozen=True, eq=False)
class AttackContext:
    """What an adversary knows when it forges the update for one file.

    Parameters
    ----------
    round : int
        Training round, ``>= 0``.
    file : int
        File the update is for, ``>= 0``.
    worker : int
        The adversary sending it, in ``0 .. num_workers - 1``. Attacks must not
        let it change the vector (colluders agree).
    num_workers : int
        ``n`` (``K``), the number of workers in the round.
    num_byzantine : int
        ``f`` (``q``), the number of adversaries.
    honest_updates : Tensor or None
        ``(m, d)`` stack of this round's honest updates for omniscient attacks,
        or ``None`` when the adversary knows only its own update. On local data
        (``data.mode = "local"``): the reference crowd, the honest local updates of
        a round-seeded sample of honest clients, the same for every adversary.
    seed : int
        Run-level seed, ``>= 0``; with ``round`` and ``file`` it seeds
        :meth:`generator`, alone :meth:`run_generator`.
    holders : tuple of int
        The workers the file was given to this round, ``worker`` among them (empty
        when unknown). The threat model is omniscient: adversaries know the
        assignment. On local data a client's file is its own: ``(worker,)``.
    fellows : frozenset of int
        The holders that are adversaries, ``worker`` included: who will send the
        same forged value (empty when ``holders`` is). On local data ``{worker}``,
        so :attr:`majority` holds.
    """

    round: int
    file: int
    worker: int
    num_workers: int
    num_byzantine: int
    honest_updates: Tensor | None = None
    seed: int = 0
    holders: tuple[int, ...] = ()
    fellows: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if min(self.round, self.file, self.seed) < 0:
            raise ValueError(
                f"round, file and seed must be >= 0, got {self.round}, {self.file}, {self.seed}"
            )
        if not 0 <= self.worker < self.num_workers:
            raise ValueError(f"worker {self.worker} is outside 0..{self.num_workers - 1}")
        if not 0 <= self.num_byzantine <= self.num_workers:
            raise ValueError(
                f"num_byzantine must be in 0..{self.num_workers}, got {self.num_byzantine}"
            )
        if self.holders and self.worker not in self.holders:
            raise ValueError(f"worker {self.worker} is not among the holders {self.holders}")
        if not self.fellows <= set(self.holders) or (
            self.holders and self.worker not in self.fellows
        ):
            raise ValueError("fellows must be holders, the worker among them")
        if self.honest_updates is not None and self.honest_updates.dim() != 2:
            raise ValueError(
                "honest_updates must be a (m, d) stack, "
                f"got shape {tuple(self.honest_updates.shape)}"
            )

    def generator(self) -> torch.Generator:
        """Return a fresh generator seeded from ``(seed, round, file)``.

        Every colluder on the same file and round draws the same numbers.
        """
        state = np.random.SeedSequence([self.seed, self.round, self.file]).generate_state(
            1, np.uint64
        )
        gen = torch.Generator()
        gen.manual_seed(int(state[0]))
        return gen

    def run_generator(self) -> torch.Generator:
        """Return a fresh generator seeded from the run's seed alone.

        Its numbers are the same in every round, for every file and every colluder:
        a direction drawn from it stays fixed for the whole run.
        """
        state = np.random.SeedSequence([self.seed, _RUN_STREAM]).generate_state(1, np.uint64)
        gen = torch.Generator()
        gen.manual_seed(int(state[0]))
        return gen

    @property
    def majority(self) -> bool:
        """Whether the adversaries hold a strict majority of the file's replicas."""
        return 2 * len(self.fellows) > len(self.holders) > 0


@runtime_checkable
class Attack(Protocol):
    """An update-level attack: forges the update an adversary sends for one file."""

    @property
    def name(self) -> str:
        """Registry name of the attack."""
        ...

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        """Return the malicious update replacing ``honest`` (same shape and dtype)."""
        ...


@runtime_checkable
class DataAttack(Protocol):
    """A data-level attack: poisons labels; the adversary then trains honestly on them."""

    @property
    def name(self) -> str:
        """Registry name of the attack."""
        ...

    def poison_labels(self, labels: Tensor, num_classes: int) -> Tensor:
        """Return the labels the adversary trains on instead of ``labels``."""
        ...


def forged_update(attack: Attack, honest: Tensor, ctx: AttackContext) -> Tensor:
    """Return the update ``attack`` forges for ``honest``, checked: a float of its shape.

    NaN or Inf pass (a Byzantine worker may send them; the coordinator refuses such
    a reply whole); a floating dtype other than ``honest``'s is cast to it.

    Raises
    ------
    ValueError
        When ``attack`` returns anything but a floating-point tensor shaped like
        ``honest`` (a plug-in's output is checked before it is encoded, as a data
        attack's labels are: a list failed inside the encoder, a shorter vector went
        out as a reply of the wrong length).
    """
    out = attack(honest, ctx)
    if not isinstance(out, Tensor) or out.shape != honest.shape or not out.is_floating_point():
        got = f"{out.dtype} {tuple(out.shape)}" if isinstance(out, Tensor) else type(out).__name__
        raise ValueError(
            f"attack {getattr(attack, 'name', type(attack).__name__)!r} must return a float "
            f"update shaped {tuple(honest.shape)}, got {got}"
        )
    return out.detach().to(device=honest.device, dtype=honest.dtype)
