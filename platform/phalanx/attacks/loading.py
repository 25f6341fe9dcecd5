"""The built-in attacks by name, and loading an attack by name, plug-in or allowed reference."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from phalanx.attack_plugins import AttackPluginError, build_attack
from phalanx.attacks.context import Attack, DataAttack
from phalanx.attacks.labels import LabelFlip
from phalanx.attacks.updates import (
    ALittleIsEnough,
    Constant,
    Gaussian,
    InnerProductManipulation,
    Mimic,
    ReversedGradient,
    SignFlip,
)
from phalanx.settings import get_settings

if TYPE_CHECKING:
    from phalanx.config import AttackConfig

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
