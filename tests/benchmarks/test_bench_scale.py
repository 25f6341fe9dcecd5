"""bench_scale.py: its cases, the merge of rows across runs, and the committed report."""

from __future__ import annotations

import shutil
from pathlib import Path

from benchmarks import bench_scale
from benchmarks.lib import results
from benchmarks.lib.scale_runs import FLOWER, IN_PROCESS, TRANSPORTS


def test_flower_is_not_run_at_the_in_process_only_sizes() -> None:
    cases = bench_scale.cases((100, 10_000), TRANSPORTS, (1, 3))
    assert {(c.transport, c.workers) for c in cases} == {
        (IN_PROCESS, 100),
        (IN_PROCESS, 10_000),
        (FLOWER, 100),
    }
    assert {c.scheme for c in cases} == {"none", "random"}


def test_a_later_run_replaces_its_own_cases_and_keeps_the_others() -> None:
    old = [
        {"transport": FLOWER, "r": 1, "K": 100, "round_s": 1.0},
        {"transport": FLOWER, "r": 1, "K": 300, "round_s": 3.0},
    ]
    new = [{"transport": FLOWER, "r": 1, "K": 300, "round_s": 2.5}]
    assert bench_scale.merged(old, new) == [old[0], new[0]]


def test_the_committed_report_is_what_the_committed_json_renders(tmp_path: Path) -> None:
    shutil.copy(results.RESULTS / "scale.json", tmp_path / "scale.json")
    assert bench_scale.main(["--render-only", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "scale.md").read_bytes() == (results.RESULTS / "scale.md").read_bytes()


def test_the_report_names_the_cpu_of_every_row_not_the_one_that_writes_it() -> None:
    document = results.read_json(results.RESULTS / "scale.json")
    document["rows"][0]["host"] = "AMD EPYC"
    del document["rows"][1]["host"]
    text = bench_scale.markdown(document, quick=False)
    others = len(document["rows"]) - 2
    assert f"(rows on Intel(R) Xeon(R) Processor ({others} runs), AMD EPYC (1 run), " in text
    assert "not recorded (1 run);" in text
