"""Adversary behaviours and adversary selection.

Three questions, three parts of this module:

* **What does an adversary send?** Update-level attacks turn the update an
  adversary would honestly have sent for one file into a malicious one. A
  data-level attack (label flip) poisons the training labels instead and then
  sends the honest result of training on them.
* **Who is an adversary?** :func:`select_adversaries` picks ``q`` of the ``K``
  workers, either at random (``weak``) or as an omniscient coalition that knows
  the assignment and takes the most file majorities (``strong``).
* **Which files does each adversary distort?** :func:`distortion_plan`
  implements the Aspis attack modes ``all``, ``only_majorities`` and
  ``fixed_disagreement``.

Writing your own attack
-----------------------
An update-level attack is any object with a ``name`` and a ``__call__`` that
satisfies :class:`Attack`::

    from dataclasses import dataclass
    from typing import ClassVar

    from torch import Tensor

    from phalanx.attacks import AttackContext


    @dataclass(frozen=True)
    class Shrink:
        name: ClassVar[str] = "shrink"
        factor: float = 0.5

        def __call__(self, honest: Tensor, ctx: AttackContext) -> Tensor:
            return honest * self.factor

and is loaded with ``load_attack("my_package.my_module:Shrink", factor=0.1)`` once the
host allows it: a distribution that declares it as an entry point of the
``phalanx.attacks`` group (then ``load_attack("shrink", ...)`` works too), or
``PHALANX_ATTACK_PLUGINS=my_package.my_module:Shrink``. See
:mod:`phalanx.attack_plugins` for what is checked before it runs.
A data-level attack satisfies :class:`DataAttack` instead: a ``name`` and
``poison_labels(labels, num_classes) -> Tensor``; the worker trains on the
poisoned labels and sends that update unchanged.

Rules every attack must keep:

* ``honest`` is the 1-D float update this adversary would have sent for
  ``ctx.file``; return a tensor of the same shape and dtype.
* ``ctx.honest_updates``, when not ``None``, is the ``(m, d)`` stack of this
  round's honest updates (omniscient attacks read it). When it is ``None`` an
  attack may use only ``honest``, or must raise ``ValueError`` if it cannot.
* **Collusion.** Adversaries that share a file must send the *same* vector for
  it, bit for bit, so that they agree with each other in the replica
  comparison. Honest replicas of a file are identical, so any deterministic
  function of ``honest`` and ``ctx.honest_updates`` already agrees. Randomness
  must come from ``ctx.generator()``, which is seeded from
  ``(ctx.seed, ctx.round, ctx.file)`` and never from ``ctx.worker``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from phalanx.assignment import Assignment
from phalanx.attack_plugins import AttackPluginError, build_attack
from phalanx.settings import get_settings

if TYPE_CHECKING:
    from phalanx.config import AttackConfig

__all__ = [
    "ATTACKS",
    "EXACT_SEARCH_LIMIT",
    "ALittleIsEnough",
    "Attack",
    "AttackContext",
    "Constant",
    "DataAttack",
    "Gaussian",
    "InnerProductManipulation",
    "LabelFlip",
    "Mimic",
    "ReversedGradient",
    "SignFlip",
    "alie_z",
    "check_attack",
    "disagreement_targets",
    "distortion_plan",
    "load_attack",
    "majority_files",
    "select_adversaries",
]

EXACT_SEARCH_LIMIT = 20_000
"""Largest number of candidate sets that the strong adversary searches exhaustively."""


# --------------------------------------------------------------------------- context


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
        or ``None`` when the adversary knows only its own update.
    seed : int
        Run-level seed, ``>= 0``; with ``round`` and ``file`` it seeds
        :meth:`generator`.
    """

    round: int
    file: int
    worker: int
    num_workers: int
    num_byzantine: int
    honest_updates: Tensor | None = None
    seed: int = 0

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


# --------------------------------------------------------------------------- protocols


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


# --------------------------------------------------------------------------- update-level attacks


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


# --------------------------------------------------------------------------- data-level attacks


@dataclass(frozen=True)
class LabelFlip:
    """Train on flipped labels ``y -> num_classes - 1 - y``; send that update honestly."""

    name: ClassVar[str] = "label_flip"

    def poison_labels(self, labels: Tensor, num_classes: int) -> Tensor:
        """Return ``num_classes - 1 - labels``."""
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
            raise ValueError(f"labels must lie in 0..{num_classes - 1}")
        return (num_classes - 1) - labels


# --------------------------------------------------------------------------- registry

ATTACKS: dict[str, type[Attack] | type[DataAttack]] = {
    cls.name: cls
    for cls in (
        ReversedGradient,
        Constant,
        SignFlip,
        Gaussian,
        ALittleIsEnough,
        InnerProductManipulation,
        Mimic,
        LabelFlip,
    )
}
"""Built-in attacks by name."""


def load_attack(spec: str, /, **params: Any) -> Attack | DataAttack:
    """Build an attack from a built-in name, an installed plug-in, or an allowed reference.

    What may be loaded, and the checks it passes before anything of it is
    called, are those of :mod:`phalanx.attack_plugins`; the allowed
    ``"package.module:Name"`` references are this host's
    ``PHALANX_ATTACK_PLUGINS``.

    Parameters
    ----------
    spec : str
        A key of :data:`ATTACKS`, the name of an entry point of the
        ``phalanx.attacks`` group, or an allowed ``"package.module:Name"``.
    **params
        Keyword arguments for the attack's constructor (JSON scalars).

    Returns
    -------
    Attack or DataAttack
        The instantiated attack.

    Raises
    ------
    AttackPluginError
        (a ``ValueError``) Unknown or disallowed name, a module that cannot be
        imported, a class that satisfies neither protocol, or bad parameters.
    """
    return _build(spec, params, get_settings().attack_plugins)


def check_attack(spec: AttackConfig, *, allowed: Collection[str] | None = None) -> None:
    """Check that the attack of a run config loads, before the run is queued or executed.

    The CLI, the API's launch and the coordinator call this, so a bad attack
    is refused up front rather than failing every worker. The attack is built
    (its constructor's own checks run) and dropped.

    Parameters
    ----------
    spec : AttackConfig
        The run config's ``attack`` section; nothing is checked without a name.
    allowed : Collection[str], optional
        The allowed references; this host's ``PHALANX_ATTACK_PLUGINS`` when
        omitted.

    Raises
    ------
    AttackPluginError
        As :func:`load_attack`; its ``field`` says whether ``name`` or
        ``params`` is at fault.
    """
    if spec.name is None:
        return
    _build(spec.name, spec.params, get_settings().attack_plugins if allowed is None else allowed)


def _build(
    spec: str, params: Mapping[str, object], allowed: Collection[str]
) -> Attack | DataAttack:
    attack = build_attack(spec, params, builtins=ATTACKS, allowed=allowed)
    if not isinstance(attack, Attack | DataAttack):  # check_attack_class already made sure
        raise AttackPluginError(f"attack {spec!r} satisfies neither protocol")
    return attack


# --------------------------------------------------------------------------- adversary selection

_IntArray = npt.NDArray[np.int64]
_Key = Callable[[_IntArray], _IntArray]


def _replicas_per_worker(assignment: Assignment) -> _IntArray:
    """``(K, F)`` incidence: 1 where the worker computes the file."""
    incidence = np.zeros((assignment.num_workers, assignment.num_files), dtype=np.int64)
    for f, workers in enumerate(assignment.files):
        incidence[list(workers), f] = 1
    return incidence


def _replication(assignment: Assignment) -> _IntArray:
    return np.array([len(w) for w in assignment.files], dtype=np.int64)


def _count(assignment: Assignment, workers: Collection[int]) -> _IntArray:
    """Per file, how many of ``workers`` compute it."""
    chosen = set(workers)
    return np.array([sum(w in chosen for w in ws) for ws in assignment.files], dtype=np.int64)


def _exact_best(pool: _IntArray, k: int, incidence: _IntArray, key: _Key) -> list[int]:
    best_key, best = -1, list(range(k))
    combos = itertools.combinations(range(len(pool)), k)
    while chunk := list(itertools.islice(combos, 2048)):
        members = pool[np.array(chunk, dtype=np.int64)]
        counts = incidence[members[:, 0]]
        for j in range(1, k):
            counts = counts + incidence[members[:, j]]
        keys = key(counts)
        i = int(np.argmax(keys))
        if keys[i] > best_key:
            best_key, best = int(keys[i]), list(chunk[i])
    return best


def _greedy_best(pool: _IntArray, k: int, incidence: _IntArray, key: _Key) -> list[int]:
    rows = incidence[pool]
    chosen: list[int] = []
    counts = np.zeros(incidence.shape[1], dtype=np.int64)
    for _ in range(k):
        free = np.setdiff1d(np.arange(len(pool)), chosen)
        i = int(np.argmax(key(counts + rows[free])))
        chosen.append(int(free[i]))
        counts = counts + rows[free[i]]
    current = int(key(counts[None, :])[0])
    while True:  # best-improvement single swaps until none helps; the key strictly rises
        free = np.setdiff1d(np.arange(len(pool)), chosen)
        move: tuple[int, int] | None = None
        for slot, pos in enumerate(chosen if len(free) else []):
            keys = key(counts - rows[pos] + rows[free])
            j = int(np.argmax(keys))
            if keys[j] > current:
                current, move = int(keys[j]), (slot, int(free[j]))
        if move is None:
            return chosen
        slot, pos = move
        counts = counts - rows[chosen[slot]] + rows[pos]
        chosen[slot] = pos


def _best_subset(
    candidates: Collection[int],
    k: int,
    incidence: _IntArray,
    key: _Key,
    *,
    seed: int,
    exact_limit: int,
) -> frozenset[int]:
    """Return the ``k`` candidates with the largest ``key`` of their per-file counts.

    Exhaustive when ``C(len(candidates), k) <= exact_limit``, else greedy plus
    single swaps. Ties go to the first set in a seed-shuffled candidate order.
    """
    rng = np.random.default_rng(seed)
    pool = rng.permutation(np.array(sorted(candidates), dtype=np.int64))
    if k == 0:
        return frozenset()
    search = _exact_best if math.comb(len(pool), k) <= exact_limit else _greedy_best
    return frozenset(int(pool[p]) for p in search(pool, k, incidence, key))


def _lexicographic(primary: _IntArray, secondary: _IntArray, bound: int) -> _IntArray:
    return primary * (bound + 1) + secondary


def majority_files(assignment: Assignment, adversaries: Collection[int]) -> frozenset[int]:
    """Files on which ``adversaries`` hold a strict majority of the replicas.

    Parameters
    ----------
    assignment : Assignment
        Which workers compute which file.
    adversaries : collection of int
        The adversarial workers.

    Returns
    -------
    frozenset of int
        Files ``f`` with more than ``len(assignment.workers_of(f)) / 2``
        adversarial replicas; a majority vote accepts the adversaries' value.
    """
    counts = _count(assignment, adversaries)
    return frozenset(np.flatnonzero(2 * counts > _replication(assignment)).tolist())


def select_adversaries(
    assignment: Assignment,
    q: int,
    *,
    mode: Literal["weak", "strong"],
    seed: int = 0,
    exact_limit: int = EXACT_SEARCH_LIMIT,
) -> frozenset[int]:
    """Choose which ``q`` of the ``K`` workers are adversarial.

    Parameters
    ----------
    assignment : Assignment
        Which workers compute which file.
    q : int
        Number of adversaries, ``0 <= q <= K``.
    mode : {"weak", "strong"}
        ``weak``: ``q`` workers uniformly at random. ``strong``: the omniscient
        worst case of ByzShield ("max distortion"): the ``q`` workers that own
        the most file majorities (see :func:`majority_files`). Exhaustive over
        all ``C(K, q)`` sets when that is at most ``exact_limit``, otherwise
        greedy followed by single-swap local search. Ties go to the set with
        more adversarial replicas short of a majority, then to the first set
        in a seed-shuffled worker order.
    seed : int
        Seed for the random choice and the tie-break order.
    exact_limit : int
        Largest ``C(K, q)`` searched exhaustively.

    Returns
    -------
    frozenset of int
        The adversarial workers.
    """
    K = assignment.num_workers
    if not 0 <= q <= K:
        raise ValueError(f"q must be in 0..{K}, got {q}")
    if mode == "weak":
        chosen = np.random.default_rng(seed).choice(K, size=q, replace=False)
        return frozenset(int(w) for w in chosen)
    if mode != "strong":
        raise ValueError(f"mode must be 'weak' or 'strong', got {mode!r}")
    r = _replication(assignment)
    need = r // 2 + 1

    def key(counts: _IntArray) -> _IntArray:
        majorities = (counts >= need).sum(axis=1)
        partial = np.minimum(counts, need).sum(axis=1)
        return _lexicographic(majorities, partial, int(need.sum()))

    incidence = _replicas_per_worker(assignment)
    return _best_subset(range(K), q, incidence, key, seed=seed, exact_limit=exact_limit)


# --------------------------------------------------------------------------- distortion plans


def _check_adversaries(assignment: Assignment, adversaries: Collection[int]) -> frozenset[int]:
    chosen = frozenset(adversaries)
    outside = sorted(w for w in chosen if not 0 <= w < assignment.num_workers)
    if outside:
        raise ValueError(f"adversaries {outside} are outside 0..{assignment.num_workers - 1}")
    return chosen


def disagreement_targets(
    assignment: Assignment,
    adversaries: Collection[int],
    *,
    seed: int = 0,
    exact_limit: int = EXACT_SEARCH_LIMIT,
) -> frozenset[int]:
    """Choose the fixed set ``T`` of honest workers that ``fixed_disagreement`` targets.

    ``T`` holds ``min(q, K - q)`` honest workers chosen to maximise the number
    of distorted files, i.e. files with at least one adversary whose honest
    replicas all lie in ``T`` (see :func:`distortion_plan`). The search is
    that of :func:`select_adversaries` (exhaustive up to ``exact_limit``
    candidate sets); ties go to the first set in a seed-shuffled order.

    Parameters
    ----------
    assignment : Assignment
        Which workers compute which file.
    adversaries : collection of int
        The adversarial workers.
    seed : int
        Seed for the tie-break order.
    exact_limit : int
        Largest number of candidate sets searched exhaustively.

    Returns
    -------
    frozenset of int
        The targeted honest workers.
    """
    adv = _check_adversaries(assignment, adversaries)
    honest = [w for w in range(assignment.num_workers) if w not in adv]
    size = min(len(adv), len(honest))
    adv_counts = _count(assignment, adv)
    touched = adv_counts > 0
    honest_replicas = _replication(assignment) - adv_counts

    def key(counts: _IntArray) -> _IntArray:
        distorted = (touched & (counts == honest_replicas)).sum(axis=1)
        covered = (counts * touched).sum(axis=1)
        return _lexicographic(distorted, covered, int(honest_replicas.sum()))

    incidence = _replicas_per_worker(assignment)
    return _best_subset(honest, size, incidence, key, seed=seed, exact_limit=exact_limit)


def distortion_plan(
    assignment: Assignment,
    adversaries: Collection[int],
    *,
    strategy: Literal["all", "only_majorities", "fixed_disagreement"],
    seed: int = 0,
    targets: Collection[int] | None = None,
) -> dict[int, frozenset[int]]:
    """For each adversary, the files it sends a malicious value for (Aspis attack modes).

    Parameters
    ----------
    assignment : Assignment
        Which workers compute which file.
    adversaries : collection of int
        The adversarial workers ``A`` (``q = |A|``).
    strategy : {"all", "only_majorities", "fixed_disagreement"}
        ``all`` (Aspis' weak attack): every adversary distorts every file it
        computes. ``only_majorities``: only the files of
        :func:`majority_files`. ``fixed_disagreement``: fix a set ``T`` of
        honest workers (``targets``, or :func:`disagreement_targets`); a file is
        distorted, by every adversary on it, exactly when it has at least one
        adversarial replica and all of its honest replicas lie in ``T``.
        Adversaries then disagree only with workers of ``T`` and agree with
        each other and with every honest worker outside ``T``, so ``A`` plus
        the ``K - 2q`` honest workers outside ``T`` form a clique as large as
        the honest one.
    seed : int
        Tie-break seed for :func:`disagreement_targets`.
    targets : collection of int, optional
        ``T`` for ``fixed_disagreement``; honest workers only.

    Returns
    -------
    dict of int to frozenset of int
        Adversary -> files it distorts. Every adversary is a key.
    """
    adv = _check_adversaries(assignment, adversaries)
    if strategy == "all":
        distorted = frozenset(range(assignment.num_files))
    elif strategy == "only_majorities":
        distorted = majority_files(assignment, adv)
    elif strategy == "fixed_disagreement":
        if targets is None:
            fixed = disagreement_targets(assignment, adv, seed=seed)
        else:
            fixed = _check_adversaries(assignment, targets)
            if fixed & adv:
                raise ValueError(f"targets must be honest, got adversaries {sorted(fixed & adv)}")
        distorted = frozenset(
            f
            for f, workers in enumerate(assignment.files)
            if any(w in adv for w in workers) and all(w in adv or w in fixed for w in workers)
        )
    else:
        raise ValueError(
            f"strategy must be 'all', 'only_majorities' or 'fixed_disagreement', got {strategy!r}"
        )
    return {a: frozenset(assignment.files_of(a)) & distorted for a in sorted(adv)}
