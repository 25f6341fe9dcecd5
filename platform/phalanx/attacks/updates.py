"""Update-level attacks: what an adversary sends instead of its honest update for a file."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import ClassVar

import torch
from torch import Tensor

from phalanx.attacks.context import AttackContext


def _honest_stack(ctx: AttackContext, attack: str, honest: Tensor) -> Tensor:
    if ctx.honest_updates is None:
        raise ValueError(
            f"{attack} is omniscient: pass this round's honest updates as ctx.honest_updates"
        )
    if ctx.honest_updates.shape[0] == 0 or ctx.honest_updates.shape[1] != honest.numel():
        raise ValueError(
            f"{attack} needs a non-empty (m, {honest.numel()}) honest_updates stack, "
            f"got shape {tuple(ctx.honest_updates.shape)}"
        )
    return ctx.honest_updates.to(honest.dtype)


@dataclass(frozen=True)
class ReversedGradient:
    """Send ``scale * honest`` (ByzShield and DETOX use ``scale = -100``)."""

    name: ClassVar[str] = "reversed_gradient"
    scale: float = -100.0

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        """Return ``scale * honest``."""
        return honest * self.scale


@dataclass(frozen=True)
class Constant:
    """Send a vector with ``value`` in every coordinate (ByzShield: ``-100``)."""

    name: ClassVar[str] = "constant"
    value: float = -100.0

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        """Return ``value`` broadcast to the shape of ``honest``."""
        return torch.full_like(honest, self.value)


@dataclass(frozen=True)
class SignFlip:
    """Send ``-honest``: the reversed gradient with scale ``-1``.

    ByzFL's "sign flipping" negates the *mean* of the honest updates instead;
    that is :class:`InnerProductManipulation` with ``epsilon = 1``.
    """

    name: ClassVar[str] = "sign_flip"

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        """Return ``-honest``."""
        return -honest


@dataclass(frozen=True)
class Gaussian:
    """Send noise drawn from ``N(mean, std^2)`` in every coordinate, ignoring ``honest``.

    The noise comes from ``ctx.generator()``, so colluders on a file agree.
    """

    name: ClassVar[str] = "gaussian"
    std: float = 1.0
    mean: float = 0.0

    def __post_init__(self) -> None:
        if self.std < 0:
            raise ValueError(f"gaussian std must be >= 0, got {self.std}")

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        """Return a draw of ``N(mean, std^2)`` shaped like ``honest``."""
        noise = torch.randn(honest.shape, generator=ctx.generator(), dtype=honest.dtype)
        return noise * self.std + self.mean


def alie_z(num_workers: int, num_byzantine: int) -> float:
    """Return ``z_max`` of "A Little Is Enough" (Baruch et al., NeurIPS 2019).

    With ``s = floor(n / 2 + 1) - f`` workers the attack must win over,
    ``z_max = Phi^{-1}((n - s) / n)`` where ``Phi`` is the standard normal CDF.

    Parameters
    ----------
    num_workers : int
        ``n``.
    num_byzantine : int
        ``f``.

    Returns
    -------
    float
        The largest shift, in standard deviations, that stays inside the bulk.
    """
    s = (num_workers // 2 + 1) - num_byzantine
    if num_workers < 1 or not 0 < s < num_workers:
        raise ValueError(
            f"ALIE's z is undefined for n={num_workers}, f={num_byzantine} "
            "(needs 1 <= n and 0 < floor(n/2 + 1) - f < n); pass z explicitly"
        )
    return NormalDist().inv_cdf((num_workers - s) / num_workers)


@dataclass(frozen=True)
class ALittleIsEnough:
    """Send ``mean + z * std`` of the honest updates, coordinate-wise (omniscient).

    ``std`` is the population standard deviation (``ddof = 0``, as ByzShield's
    ``np.std``). ``z = None`` uses :func:`alie_z` of ``ctx.num_workers`` and
    ``ctx.num_byzantine``; ByzShield fixes ``z = 1.0``.
    """

    name: ClassVar[str] = "alie"
    z: float | None = None

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        """Return ``mean + z * std`` over ``ctx.honest_updates``."""
        stack = _honest_stack(ctx, "alie", honest)
        z = alie_z(ctx.num_workers, ctx.num_byzantine) if self.z is None else self.z
        std, mean = torch.std_mean(stack, dim=0, correction=0)
        return (mean + z * std).reshape(honest.shape)


@dataclass(frozen=True)
class InnerProductManipulation:
    """Send ``-epsilon * mean(honest_updates)`` ("Fall of Empires", Xie et al., 2019).

    ByzShield uses ``epsilon = 100``. Without ``ctx.honest_updates`` the mean
    is taken over the adversary's own update, i.e. ``-epsilon * honest``.
    """

    name: ClassVar[str] = "ipm"
    epsilon: float = 100.0

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        """Return ``-epsilon`` times the mean honest update."""
        if ctx.honest_updates is None:
            return honest * -self.epsilon
        mean = _honest_stack(ctx, "ipm", honest).mean(dim=0)
        return (mean * -self.epsilon).reshape(honest.shape)


@dataclass(frozen=True)
class Mimic:
    """Send a copy of honest update ``index`` of ``ctx.honest_updates`` (omniscient).

    Karimireddy et al. (2022): every adversary copies one honest worker, which
    over-weights that worker's data under heterogeneity.
    """

    name: ClassVar[str] = "mimic"
    index: int = 0

    def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
        """Return a copy of row ``index`` of the honest stack."""
        stack = _honest_stack(ctx, "mimic", honest)
        if not 0 <= self.index < stack.shape[0]:
            raise ValueError(f"mimic index {self.index} is outside 0..{stack.shape[0] - 1}")
        return stack[self.index].clone().reshape(honest.shape)
