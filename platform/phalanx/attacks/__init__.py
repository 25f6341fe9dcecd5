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

One concept per module: :mod:`~phalanx.attacks.context` (`AttackContext`, the
`Attack` and `DataAttack` protocols, and `forged_update`, the check of an update
attack's output), :mod:`~phalanx.attacks.updates` (update-level attacks),
:mod:`~phalanx.attacks.labels` (the label flip, and the check of any data
attack's labels),
:mod:`~phalanx.attacks.loading` (`ATTACKS`, `load_attack`, `check_attack`),
:mod:`~phalanx.attacks.selection` (`select_adversaries`),
:mod:`~phalanx.attacks.distortion` (`distortion_plan`) and
:mod:`~phalanx.attacks.search` (the subset search both of those use). The plug-in
rules stay outside the package, in :mod:`phalanx.attack_plugins`, because the run
config uses their syntax checks and must import no torch.
"""

from phalanx.attacks.context import Attack, AttackContext, DataAttack, forged_update
from phalanx.attacks.distortion import disagreement_targets, distortion_plan
from phalanx.attacks.labels import LabelFlip, LabelPoison, poisoned_labels
from phalanx.attacks.loading import ATTACKS, check_attack, load_attack
from phalanx.attacks.search import EXACT_SEARCH_LIMIT
from phalanx.attacks.selection import majority_files, select_adversaries
from phalanx.attacks.updates import (
    ALittleIsEnough,
    Constant,
    Gaussian,
    InnerProductManipulation,
    Mimic,
    ReversedGradient,
    SignFlip,
    alie_z,
)

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
    "LabelPoison",
    "Mimic",
    "ReversedGradient",
    "SignFlip",
    "alie_z",
    "check_attack",
    "disagreement_targets",
    "distortion_plan",
    "forged_update",
    "load_attack",
    "majority_files",
    "poisoned_labels",
    "select_adversaries",
]
