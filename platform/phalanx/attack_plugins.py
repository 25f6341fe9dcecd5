"""Where an attack's code may come from, and the checks it passes before it runs.

An attack named in a run config runs on the coordinator's host and on every
simulated worker, and a run config may arrive in a request. So a run config
never chooses what is imported; the host does. An attack is one of:

* a **built-in** (``alie``, ``ipm``, ...: :data:`phalanx.attacks.ATTACKS`);
* an **installed plug-in**: the name of an entry point of the
  ``phalanx.attacks`` group (:data:`ENTRY_POINT_GROUP`) that a distribution
  installed on the host declares, e.g. in its ``pyproject.toml``::

      [project.entry-points."phalanx.attacks"]
      shrink = "redteam.attacks:Shrink"

* an **allowed reference** ``"package.module:Name"``: one the host lists in
  ``PHALANX_ATTACK_PLUGINS`` (comma-separated), or the target of an installed
  entry point of the group.

Anything else is refused before anything is imported. What is imported must
then be a class that declares one of the two protocols on the class itself, a
``name`` string attribute and either ``__call__(self, honest, ctx)`` or
``poison_labels(self, labels, num_classes)`` defined as functions; this is
checked with :mod:`inspect`, without calling anything. The run config's
parameters must be JSON scalars that the constructor's signature accepts by
keyword, of the annotated types. Only then is the class instantiated.

Built-in names are reserved: an entry point with a built-in's name is never
used for it.

This module imports neither torch nor the attacks: the built-ins come in as an
argument, so that :mod:`phalanx.config` and :mod:`phalanx.settings` can use its
syntax checks.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
from collections.abc import Callable, Collection, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal

from pydantic import ConfigDict, TypeAdapter, ValidationError

__all__ = [
    "ALLOW_LIST_SETTING",
    "ENTRY_POINT_GROUP",
    "AttackPluginError",
    "attack_parameters",
    "build_attack",
    "check_attack_class",
    "installed_attacks",
    "is_reference",
    "resolve_attack_class",
]

ENTRY_POINT_GROUP = "phalanx.attacks"
"""Entry-point group under which installed distributions register attacks."""

ALLOW_LIST_SETTING = "PHALANX_ATTACK_PLUGINS"
"""Environment variable listing the ``package.module:Name`` references a host allows."""

_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_REFERENCE = re.compile(rf"({_DOTTED}):({_DOTTED})")
_SCALARS = (bool, int, float, str)
_PROTOCOL_METHODS: dict[str, tuple[str, ...]] = {
    "__call__": ("honest", "ctx"),
    "poison_labels": ("labels", "num_classes"),
}


class AttackPluginError(ValueError):
    """An attack that cannot be used: unknown, not allowed, not an attack, or bad parameters.

    Parameters
    ----------
    message : str
        What is wrong and how to fix it, in one line.
    field : {"name", "params"}
        The field of the attack config at fault.
    """

    def __init__(self, message: str, *, field: Literal["name", "params"] = "name") -> None:
        super().__init__(message)
        self.field = field


def is_reference(text: str) -> bool:
    """Return whether ``text`` is a well-formed ``"package.module:Name"`` reference."""
    return _REFERENCE.fullmatch(text) is not None


def installed_attacks() -> dict[str, list[EntryPoint]]:
    """Return the entry points of :data:`ENTRY_POINT_GROUP` by name (metadata only).

    Nothing is imported. A name two distributions declare has two entries.
    """
    found: dict[str, list[EntryPoint]] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(point.name, []).append(point)
    return found


def resolve_attack_class(
    spec: str, *, builtins: Mapping[str, type], allowed: Collection[str]
) -> type:
    """Return the attack class ``spec`` names, imported only if the host allows it.

    Parameters
    ----------
    spec : str
        A built-in name, an installed plug-in's entry-point name, or a
        ``"package.module:Name"`` reference.
    builtins : Mapping[str, type]
        The built-in attacks by name.
    allowed : Collection[str]
        The references the host allows (``PHALANX_ATTACK_PLUGINS``).

    Returns
    -------
    type
        The class, checked by :func:`check_attack_class`.

    Raises
    ------
    AttackPluginError
        When ``spec`` is unknown or not allowed (then nothing was imported), its
        module cannot be imported, or it is not an attack class.
    """
    if spec in builtins:
        return check_attack_class(spec, builtins[spec])
    match = _REFERENCE.fullmatch(spec)
    if match is not None:
        module, attr = match.groups()
        if spec not in allowed and not _installed_target(module, attr):
            raise AttackPluginError(
                f"attack plug-in {spec!r} is not allowed on this host (nothing was imported): "
                f"list it in {ALLOW_LIST_SETTING} or install it as an entry point of the "
                f"{ENTRY_POINT_GROUP!r} group"
            )
        return check_attack_class(spec, _load(spec, module, attr))
    if ":" in spec:
        raise AttackPluginError(f"attack plug-in {spec!r} must look like 'package.module:Name'")
    points = installed_attacks().get(spec, [])
    targets = sorted({f"{p.module}:{p.attr}" for p in points})
    if not targets:
        installed = sorted(set(installed_attacks()) - set(builtins)) or ["none"]
        raise AttackPluginError(
            f"unknown attack {spec!r}; use a built-in ({', '.join(sorted(builtins))}), "
            f"an installed plug-in ({', '.join(installed)}), or a 'package.module:Name' "
            f"listed in {ALLOW_LIST_SETTING}"
        )
    if len(targets) > 1:
        raise AttackPluginError(
            f"attack plug-in {spec!r} is ambiguous: installed distributions register it as "
            f"{', '.join(targets)}; name one of them as 'package.module:Name'"
        )
    module, _, attr = targets[0].partition(":")
    return check_attack_class(spec, _load(spec, module, attr))


def _installed_target(module: str, attr: str) -> bool:
    return any((p.module, p.attr) == (module, attr) for p in entry_points(group=ENTRY_POINT_GROUP))


def _load(spec: str, module_name: str, attr: str) -> object:
    try:
        target: object = importlib.import_module(module_name)
    except Exception as err:  # the plug-in's own import code: whatever it raises
        raise AttackPluginError(
            f"attack plug-in {spec!r}: cannot import {module_name!r}: {type(err).__name__}: {err}"
        ) from err
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AttackPluginError(
                f"attack plug-in {spec!r}: {module_name!r} has no {attr!r}"
            ) from None
    return target


def check_attack_class(spec: str, obj: object) -> type:
    """Check, without calling anything, that ``obj`` is a class declaring an attack protocol.

    The class (or a base other than ``object``) must define ``name`` as a
    string attribute, and ``__call__(self, honest, ctx)`` (an update-level
    attack) or ``poison_labels(self, labels, num_classes)`` (a data-level one)
    as plain functions.

    Parameters
    ----------
    spec : str
        How the attack was named, for messages.
    obj : object
        What ``spec`` resolved to.

    Returns
    -------
    type
        ``obj``.

    Raises
    ------
    AttackPluginError
        Naming what is missing.
    """
    if not inspect.isclass(obj):
        raise AttackPluginError(f"attack {spec!r} must name a class, got {type(obj).__name__}")
    declared = _declared(obj, "name")
    if not isinstance(declared, str):
        raise AttackPluginError(
            f"attack {spec!r} is not an attack: {obj.__qualname__} must declare the class "
            "attribute `name: ClassVar[str]`"
        )
    methods = {m: _declared(obj, m) for m in _PROTOCOL_METHODS}
    functions = {m: f for m, f in methods.items() if inspect.isfunction(f)}
    if not functions:
        raise AttackPluginError(
            f"attack {spec!r} satisfies neither protocol: an Attack defines "
            "`__call__(self, honest, ctx) -> Tensor`, a DataAttack defines "
            "`poison_labels(self, labels, num_classes) -> Tensor`"
        )
    for method, function in functions.items():
        _check_arity(spec, method, function)
    return obj


def _declared(cls: type, attr: str) -> object:
    """Return ``attr`` as the class or a base (not ``object``) defines it; no descriptor runs."""
    for klass in cls.__mro__:
        if klass is not object and attr in vars(klass):
            return vars(klass)[attr]
    return None


def _check_arity(spec: str, method: str, function: Callable[..., Any]) -> None:
    arguments = _PROTOCOL_METHODS[method]
    try:
        inspect.signature(function).bind(None, *arguments)
    except (TypeError, ValueError) as err:
        raise AttackPluginError(
            f"attack {spec!r}: {method} must take (self, {', '.join(arguments)}): {err}"
        ) from None


def attack_parameters(spec: str, cls: type, params: Mapping[str, object]) -> dict[str, object]:
    """Check ``params`` against the constructor of ``cls`` and return them typed.

    Parameters
    ----------
    spec : str
        How the attack was named, for messages.
    cls : type
        The attack class, already checked by :func:`check_attack_class`.
    params : Mapping[str, object]
        The run config's ``attack.params``.

    Returns
    -------
    dict of str to object
        The parameters, each validated (strictly: no text to number) against
        its annotation in the constructor when it has one.

    Raises
    ------
    AttackPluginError
        When a value is not a finite JSON scalar, a name is not a keyword
        parameter of the constructor, a required one is missing, or a value
        does not have the annotated type.
    """
    for key, value in params.items():
        if not key.isidentifier() or key.startswith("_"):
            raise AttackPluginError(
                f"attack {spec!r}: {key!r} is not a parameter name", field="params"
            )
        if not isinstance(value, _SCALARS) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            raise AttackPluginError(
                f"attack {spec!r}: parameter {key!r} must be a finite number, text or a boolean",
                field="params",
            )
    signature = _constructor_signature(spec, cls)
    try:
        signature.bind(**params)
    except TypeError as err:
        accepted = [
            p.name
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        raise AttackPluginError(
            f"attack {spec!r} rejected parameters {sorted(params)}: {err} "
            f"(it takes {', '.join(accepted) or 'none'})",
            field="params",
        ) from None
    typed: dict[str, object] = {}
    for key, value in params.items():
        parameter = signature.parameters.get(key)
        hint = parameter.annotation if parameter is not None else inspect.Parameter.empty
        adapter = (
            None if hint is inspect.Parameter.empty or isinstance(hint, str) else _adapter(hint)
        )
        if adapter is None:
            typed[key] = value
            continue
        try:
            typed[key] = adapter.validate_python(value, strict=True)
        except ValidationError as err:
            reason = err.errors()[0]["msg"]
            raise AttackPluginError(
                f"attack {spec!r}: parameter {key!r}={value!r}: {reason}", field="params"
            ) from None
    return typed


def _constructor_signature(spec: str, cls: type) -> inspect.Signature:
    """Return the constructor's signature, its annotations resolved where they can be."""
    try:
        return inspect.signature(cls, eval_str=True)
    except Exception:  # e.g. an annotation imported only for type checkers: left unresolved
        pass
    try:
        return inspect.signature(cls)
    except (TypeError, ValueError) as err:
        raise AttackPluginError(f"attack {spec!r}: cannot read its constructor: {err}") from None


def _adapter(hint: Any) -> TypeAdapter[Any] | None:
    try:
        return TypeAdapter(hint, config=ConfigDict(arbitrary_types_allowed=True))
    except Exception:  # a type pydantic cannot build a validator for: left to the constructor
        return None


def build_attack(
    spec: str,
    params: Mapping[str, object],
    *,
    builtins: Mapping[str, type],
    allowed: Collection[str],
) -> object:
    """Resolve, check and instantiate the attack ``spec`` with ``params``.

    Parameters
    ----------
    spec : str
        See :func:`resolve_attack_class`.
    params : Mapping[str, object]
        Keyword parameters of its constructor (JSON scalars).
    builtins : Mapping[str, type]
        The built-in attacks by name.
    allowed : Collection[str]
        The references the host allows.

    Returns
    -------
    object
        The attack; its ``name`` is a string.

    Raises
    ------
    AttackPluginError
        When any check fails or the constructor raises.
    """
    cls = resolve_attack_class(spec, builtins=builtins, allowed=allowed)
    values = attack_parameters(spec, cls, params)
    try:
        attack = cls(**values)
    except Exception as err:  # the attack's own validation, whatever it raises
        raise AttackPluginError(
            f"attack {spec!r} rejected parameters {sorted(params)}: {type(err).__name__}: {err}",
            field="params",
        ) from err
    if not isinstance(getattr(attack, "name", None), str):
        raise AttackPluginError(f"attack {spec!r}: its instances have no str `name`")
    return attack
