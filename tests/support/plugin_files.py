"""Attack plug-ins written to disk the way a host installs them, for the plug-in tests.

A plug-in is a module in a folder on ``sys.path``; an installed one also has a
distribution (a ``*.dist-info`` folder with ``entry_points.txt``) that
``importlib.metadata`` finds there, as pip leaves it in ``site-packages``.
Hostile plug-ins touch :attr:`PluginFiles.marker` when imported or called, so
a test proves they were not by the file's absence.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest

#: A well-behaved update-level attack: sends ``factor * honest``.
SHRINK = """
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Shrink:
    name: ClassVar[str] = "shrink"
    factor: float = 0.5

    def __call__(self, honest, ctx):
        return honest * self.factor
"""

#: A module whose import alone leaves the marker behind.
TOUCH_ON_IMPORT = """
from pathlib import Path

Path({marker!r}).write_text("imported")


class Attack:
    name = "evil"

    def __call__(self, honest, ctx):
        return honest
"""

#: Classes whose constructor leaves the marker behind, but which are not attacks.
TOUCH_ON_INIT = """
from pathlib import Path


class NoName:
    def __init__(self, **kwargs):
        Path({marker!r}).write_text("constructed")

    def __call__(self, honest, ctx):
        return honest


class NoMethod:
    name = "no_method"

    def __init__(self, **kwargs):
        Path({marker!r}).write_text("constructed")


class NameProperty:
    @property
    def name(self):
        Path({marker!r}).write_text("name read")
        return "name_property"

    def __call__(self, honest, ctx):
        return honest


class WrongArity:
    name = "wrong_arity"

    def __init__(self, **kwargs):
        Path({marker!r}).write_text("constructed")

    def __call__(self, honest):
        return honest
"""

#: An attack with a required parameter and one that validates itself.
STRICT = """
from typing import ClassVar


class Scaled:
    name: ClassVar[str] = "scaled"

    def __init__(self, scale: float, mode: str = "plain") -> None:
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {{scale}}")
        self.scale = scale
        self.mode = mode

    def __call__(self, honest, ctx):
        return honest * self.scale
"""


class PluginFiles:
    """A folder on ``sys.path`` holding plug-in modules and distributions.

    Parameters
    ----------
    root : Path
        The folder.
    monkeypatch : pytest.MonkeyPatch
        Puts the folder on ``sys.path`` for one test.
    """

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.marker = root / "spawned"
        self.modules: list[str] = []
        root.mkdir(parents=True, exist_ok=True)
        monkeypatch.syspath_prepend(str(root))

    def module(self, source: str) -> str:
        """Write a module (``{marker}`` in ``source`` is this folder's marker); return its name."""
        name = f"phalanx_test_plugin_{uuid.uuid4().hex[:12]}"
        (self.root / f"{name}.py").write_text(source.format(marker=str(self.marker)))
        self.modules.append(name)
        return name

    def distribution(self, entry_points: Mapping[str, str]) -> str:
        """Install a distribution declaring ``entry_points`` in the ``phalanx.attacks`` group."""
        name = f"phalanx_test_dist_{uuid.uuid4().hex[:12]}"
        info = self.root / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        lines = [f"{key} = {value}" for key, value in entry_points.items()]
        (info / "entry_points.txt").write_text("[phalanx.attacks]\n" + "\n".join(lines) + "\n")
        return name

    def forget(self) -> None:
        """Drop the written modules from ``sys.modules``."""
        for name in self.modules:
            sys.modules.pop(name, None)
