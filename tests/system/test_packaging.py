"""What pyproject.toml declares: every imported package, and no server stack for the core."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

from phalanx_cli.errors import SERVER_MODULES as SERVER_ONLY

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("platform", "clients", "api", "cli")
OURS = {"phalanx", "phalanx_api", "phalanx_clients", "phalanx_cli"}


def project() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]  # type: ignore[no-any-return]


def names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower().replace("_", "-") for r in requirements}


def imported_top_levels() -> set[str]:
    found = set()
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.partition(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.partition(".")[0])
    return found - OURS - set(sys.stdlib_module_names) - {"__future__"}


def test_every_imported_package_is_declared_in_the_base_or_the_server_extra() -> None:
    meta = project()
    declared = names(meta["dependencies"]) | names(meta["optional-dependencies"]["server"])  # type: ignore[index]
    distributions = packages_distributions()
    undeclared = {
        module: distributions.get(module)
        for module in imported_top_levels()
        if not {d.lower().replace("_", "-") for d in distributions.get(module, [module])} & declared
    }
    assert undeclared == {}


BLOCKED_IMPORTS = """
import importlib.abc
import sys

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Blocker())
import phalanx.config, phalanx.coordinator, phalanx.flower.strategy, phalanx_clients.app
"""


def test_the_core_the_strategy_and_the_clientapp_import_without_the_server_extra() -> None:
    script = f"BLOCKED = {set(SERVER_ONLY)!r}\n{BLOCKED_IMPORTS}"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_server_stack_is_an_extra_not_a_base_dependency() -> None:
    meta = project()
    base = names(meta["dependencies"])  # type: ignore[arg-type]
    for server_only in ("psycopg", "prometheus-client", "jinja2", "itsdangerous", "psutil"):
        assert server_only not in base
        assert server_only in names(meta["optional-dependencies"]["server"])  # type: ignore[index]


def test_every_core_module_is_under_the_core_contract() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    core = next(c for c in contracts["contracts"] if c["type"] == "forbidden")
    layers = {"flower", "runs", "store"}
    modules = {
        f"phalanx.{path.stem}"
        for path in (ROOT / "platform" / "phalanx").iterdir()
        if path.stem not in layers | {"__init__", "py"}
        and (path.suffix == ".py" or (path / "__init__.py").exists())
    }
    assert modules - set(core["source_modules"]) == set()
