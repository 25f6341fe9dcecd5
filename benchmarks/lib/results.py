"""What every benchmark script does around its figures: the machine notes and the report files.

Each script phrases its own notes; the facts come from here, read one way:
:func:`machine` (CPU, cores, Python, system), :func:`version` (an installed
package's version, from its metadata) and :func:`load_average`. The reports
go where :func:`report_path` says (``benchmarks/results/`` by default; a
``--quick`` run writes ``NAME_quick.*`` so that it never overwrites the
committed full results) and are written by :func:`write_json` and
:func:`write_markdown`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"
"""Where the committed results live: ``benchmarks/results/``."""

_CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class Wall:
    """How long a benchmark's runs took as they ran, and how many ran at once.

    Known only to the process that timed them: a report rewritten from stored
    rows (`--report-only`, or a grid that adds rows to older ones) has the runs'
    own times but neither of these, and says so instead of guessing.
    """

    minutes: float
    jobs: int


@dataclass(frozen=True)
class Machine:
    """The host a benchmark runs on, as the reports describe it."""

    architecture: str
    """``platform.machine()``, e.g. ``x86_64``."""
    processor: str
    """``platform.processor()``; often empty on Linux."""
    cpu: str
    """The CPU's model name (``/proc/cpuinfo``), else ``processor``, else ``architecture``."""
    cores: int | None
    """Logical cores (``os.cpu_count()``); ``None`` when the system does not say."""
    python: str
    """``platform.python_version()``."""
    system: str
    """``platform.platform()``: kernel and C library."""


def hosts(cpus: Iterable[str | None]) -> str:
    """The CPUs rows ran on, each with its count of runs, most first ("not recorded": None)."""
    counts = Counter(cpu or "not recorded" for cpu in cpus)
    return ", ".join(f"{cpu} ({n} run{'s' if n != 1 else ''})" for cpu, n in counts.most_common())


def cpu_model(cpuinfo: str, fallback: str) -> str:
    """The first ``model name`` of a ``/proc/cpuinfo`` text, or ``fallback`` if it has none."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return fallback


def machine() -> Machine:
    """The host this process runs on."""
    architecture = platform.machine()
    processor = platform.processor()
    try:
        cpuinfo = _CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux, or /proc not mounted
        cpuinfo = ""
    return Machine(
        architecture=architecture,
        processor=processor,
        cpu=cpu_model(cpuinfo, processor or architecture),
        cores=os.cpu_count(),
        python=platform.python_version(),
        system=platform.platform(),
    )


def load_average() -> float:
    """The 1-minute load average: how busy other work keeps the shared machine."""
    return os.getloadavg()[0]


def version(distribution: str) -> str | None:
    """The installed version of ``distribution`` (its package metadata), or ``None``."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def report_stem(name: str, *, quick: bool = False) -> str:
    """The report's file name without suffix: ``NAME``, or ``NAME_quick`` for a ``--quick`` run."""
    return f"{name}_quick" if quick else name


def report_path(out: Path, name: str, suffix: str, *, quick: bool = False) -> Path:
    """``out/NAME.suffix``, or ``out/NAME_quick.suffix`` for a ``--quick`` run.

    Parameters
    ----------
    out : Path
        The results folder (``--out``).
    name : str
        The report's name, e.g. ``"robustness"``.
    suffix : str
        ``".json"``, ``".md"``, or a tail such as ``"_r1.png"``.
    quick : bool
        A reduced run, whose figures must not replace the full results.
    """
    return out / f"{report_stem(name, quick=quick)}{suffix}"


def write_json(path: Path, document: Any, *, indent: int = 2) -> None:
    """Write ``document`` as UTF-8 JSON with a final newline, creating the folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=indent) + "\n", encoding="utf-8")


def read_json(path: Path) -> Any:
    """The JSON document at ``path`` (a report written by :func:`write_json`)."""
    return json.loads(path.read_text(encoding="utf-8"))


def write_markdown(path: Path, text: str, *, echo: bool = True) -> None:
    """Write ``text`` as UTF-8, creating the folder if needed; with ``echo``, to stdout too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if echo:
        sys.stdout.write(text)
