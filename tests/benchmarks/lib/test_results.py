"""The benchmarks' report helper (benchmarks/lib/results.py) and what it keeps reproducible."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from benchmarks import eval_robustness
from benchmarks.lib import results
from benchmarks.lib.compression_grid import Settings
from benchmarks.lib.compression_markdown import describe, markdown
from benchmarks.lib.compression_runs import Row
from benchmarks.lib.results import Machine

COMMITTED = results.RESULTS

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
processor\t: 1
model name\t: AMD EPYC 7B13
"""


def test_cpu_model_is_the_first_model_name_of_cpuinfo() -> None:
    assert results.cpu_model(CPUINFO, "x86_64") == "AMD EPYC 7B13"


def test_cpu_model_falls_back_when_cpuinfo_names_no_model() -> None:
    assert results.cpu_model("processor\t: 0\nmodel name\t:\n", "aarch64") == "aarch64"
    assert results.cpu_model("", "x86_64") == "x86_64"


def test_a_quick_run_writes_beside_the_full_results_not_over_them(tmp_path: Path) -> None:
    assert results.report_path(tmp_path, "codec", ".json") == tmp_path / "codec.json"
    assert results.report_path(tmp_path, "codec", ".md", quick=True) == tmp_path / "codec_quick.md"
    assert results.report_path(tmp_path, "compression", "_r1.png", quick=True) == (
        tmp_path / "compression_quick_r1.png"
    )
    assert results.report_stem("round", quick=True) == "round_quick"


def test_json_reports_end_with_a_newline_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "new" / "report.json"
    results.write_json(path, [{"accuracy": 0.5, "name": "—"}], indent=1)
    assert (
        path.read_text(encoding="utf-8")
        == '[\n {\n  "accuracy": 0.5,\n  "name": "\\u2014"\n }\n]\n'
    )
    assert results.read_json(path) == [{"accuracy": 0.5, "name": "—"}]


def test_markdown_reports_are_utf8_and_echoed_unless_told_not_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results.write_markdown(tmp_path / "a" / "r.md", "# r — 1\n")
    assert (tmp_path / "a" / "r.md").read_bytes() == "# r — 1\n".encode()
    assert capsys.readouterr().out == "# r — 1\n"
    results.write_markdown(tmp_path / "s.md", "quiet\n", echo=False)
    assert capsys.readouterr().out == ""


def test_versions_come_from_the_installed_metadata() -> None:
    assert results.version("numpy") == np.__version__
    assert results.version("phalanx-no-such-distribution") is None


def test_machine_describes_this_host() -> None:
    host = results.machine()
    assert host.cores is None or host.cores >= 1
    assert host.architecture and host.cpu and host.python.count(".") == 2


def test_robustness_report_rewritten_from_the_committed_json_is_the_committed_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--report-only` reproduces robustness.md byte for byte, given the machine it names.

    The report's first paragraph names the machine that writes it; the committed
    one was written on 2 cores, x86_64, torch 2.13.0+cpu. `--jobs` does not enter
    it: stored rows do not say how many ran at once.
    """
    shutil.copy(COMMITTED / "robustness.json", tmp_path / "robustness.json")
    host = Machine("x86_64", "", "x86_64", 2, "3.11.7", "Linux")
    monkeypatch.setattr(eval_robustness, "machine", lambda: host)
    monkeypatch.setattr(eval_robustness, "version", lambda name: "2.13.0+cpu")
    assert eval_robustness.main(["--report-only", "--jobs", "3", "--out", str(tmp_path)]) == 0
    rewritten = (tmp_path / "robustness.md").read_bytes()
    assert rewritten == (COMMITTED / "robustness.md").read_bytes()


def test_a_quick_report_only_run_reads_and_writes_the_quick_files(tmp_path: Path) -> None:
    shutil.copy(COMMITTED / "robustness.json", tmp_path / "robustness_quick.json")
    assert eval_robustness.main(["--quick", "--report-only", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "robustness_quick.json",
        "robustness_quick.md",
    ]


def test_compression_report_rewritten_from_the_committed_json_is_the_committed_report() -> None:
    """What `eval_compression.py --report-only` writes, but for the plots (same code path)."""
    rows = [Row(**x) for x in results.read_json(COMMITTED / "compression.json")]
    rounds, seeds = max(x.rounds for x in rows), len({x.seed for x in rows})
    settings = Settings(rounds, 5, 500, {1: 32, 3: 14}, seeds=seeds)
    host = Machine("x86_64", "", "x86_64", 2, "3.11.7", "Linux")
    minutes = sum(x.seconds for x in rows) / 60
    notes = describe(
        settings,
        rows,
        1,
        minutes,
        False,
        host=host,
        load=0.0,
        torch_version="2.13.0+cpu",
        rewritten=True,
    )
    text = markdown(rows, notes, rounds)
    assert text.encode() == (COMMITTED / "compression.md").read_bytes()
