"""The tests mirror the packages, and no module under tests/ imports a test module or a conftest.

The rule (README, "Tests"): ``tests/<package>/<path>/test_<module>[_<aspect>].py`` tests
``<package>/<path>/<module>.py``, or the subpackage ``<package>/<path>/<module>/``. Tests of
the system across packages live in ``tests/system/``; fixtures in ``tests/fixtures/``
(plugins loaded by ``tests/conftest.py``); helpers in ``tests/support/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The packages the tests mirror, and where each one's code lives.
PACKAGES = {
    "phalanx": Path("platform/phalanx"),
    "phalanx_api": Path("api/phalanx_api"),
    "phalanx_clients": Path("clients/phalanx_clients"),
    "phalanx_cli": Path("cli/phalanx_cli"),
    "benchmarks": Path("benchmarks"),
}
#: Tests of the whole system, across packages: the one folder that mirrors no package.
SYSTEM = "system"


def _modules(folder: Path) -> set[str]:
    """Names of the modules and subpackages of the package in ``folder``."""
    modules = {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
    return modules | {path.parent.name for path in folder.glob("*/__init__.py")}


def misplaced_tests(root: Path) -> list[str]:
    """Test modules under ``root/tests`` that name no module or subpackage of their package."""
    tests = root / "tests"
    problems = []
    for path in sorted(tests.rglob("test_*.py")):
        package, *folders = path.relative_to(tests).parts[:-1] or ("",)
        if package == SYSTEM:
            continue
        where = path.relative_to(root)
        if package not in PACKAGES:
            problems.append(f"{where}: tests/{package} mirrors none of {sorted(PACKAGES)}")
            continue
        code = PACKAGES[package].joinpath(*folders)
        if not (root / code / "__init__.py").is_file():
            problems.append(f"{where}: {code} is not a package")
            continue
        tested = path.stem.removeprefix("test_")
        if not any(tested == m or tested.startswith(f"{m}_") for m in _modules(root / code)):
            problems.append(f"{where}: no module or subpackage of {code} is named {tested!r}")
    return problems


def _imported(path: Path, tests: Path) -> set[str]:
    """Every module the file at ``path`` imports, and every name it imports from a module."""
    package = ".".join(("tests", *path.relative_to(tests).parts[:-1]))
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}".rstrip(".")
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def imported_test_modules(root: Path) -> list[str]:
    """Imports, anywhere under ``root/tests``, of a ``test_*`` module or a conftest."""
    tests = root / "tests"
    problems = []
    for path in sorted(tests.rglob("*.py")):
        offending = set()
        for module in _imported(path, tests):
            parts = module.split(".")
            for end, part in enumerate(parts[1:], start=2):
                if parts[0] == "tests" and (part == "conftest" or part.startswith("test_")):
                    offending.add(".".join(parts[:end]))
                    break
        problems += [f"{path.relative_to(root)} imports {module}" for module in sorted(offending)]
    return problems


def test_every_test_module_names_a_module_or_subpackage_of_the_package_it_mirrors() -> None:
    assert misplaced_tests(ROOT) == []


def test_no_module_under_tests_imports_a_test_module_or_a_conftest() -> None:
    assert imported_test_modules(ROOT) == []


def test_the_rule_refuses_tests_laid_out_by_kind(tmp_path: Path) -> None:
    for module in ("platform/phalanx/__init__.py", "platform/phalanx/channel.py"):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    files = {
        "tests/unit/codec/test_codec_channel.py": "",
        "tests/phalanx/test_channel_codec.py": "",
        "tests/phalanx/test_codec.py": "",
        "tests/integration/conftest.py": "",
        "tests/api/test_deps.py": "from tests.integration.conftest import WriteLock\n",
        "tests/phalanx/test_channel.py": "from tests.integration import test_migrations\n",
        "tests/system/test_compose.py": "from tests.support.configs import small_config\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    assert misplaced_tests(tmp_path) == [
        "tests/api/test_deps.py: tests/api mirrors none of "
        "['benchmarks', 'phalanx', 'phalanx_api', 'phalanx_cli', 'phalanx_clients']",
        "tests/phalanx/test_codec.py: no module or subpackage of platform/phalanx is named 'codec'",
        "tests/unit/codec/test_codec_channel.py: tests/unit mirrors none of "
        "['benchmarks', 'phalanx', 'phalanx_api', 'phalanx_cli', 'phalanx_clients']",
    ]
    assert imported_test_modules(tmp_path) == [
        "tests/api/test_deps.py imports tests.integration.conftest",
        "tests/phalanx/test_channel.py imports tests.integration.test_migrations",
    ]
