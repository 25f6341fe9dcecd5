"""Peak resident memory of one aggregation call, measured in a fresh process (Linux ``/proc``).

The child resets the kernel's resident high-water mark, makes one call, and
reports ``VmHWM`` minus the resident size just before the call: every page
torch, NumPy or BLAS touched, which ``tracemalloc`` would miss.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.lib.aggregation_cases import build_cases, make_updates
from benchmarks.lib.aggregation_peers import flower_setup, load_byzfl


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} missing from /proc/self/status")


def _reset_high_water_mark() -> None:
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def memory_child(spec: dict[str, Any]) -> dict[str, float]:
    """Peak resident memory (MiB above the resident size before the call) of each case."""
    n, d, impl = spec["n"], spec["d"], spec["impl"]
    byzfl = load_byzfl() if impl == "byzfl" else None
    fl = flower_setup() if impl == "flower" else None
    limit = spec["nnm_limit_bytes"]
    for case in build_cases(make_updates(n, 512), [impl], spec["aggregators"], byzfl, fl, limit):
        case.run(case.prepare())  # warm-up: lazy imports, thread pools, BLAS buffers
    gc.collect()
    gc.freeze()  # see main()
    x = make_updates(n, d)
    peaks: dict[str, float] = {}
    for case in build_cases(x, [impl], spec["aggregators"], byzfl, fl, limit):
        state = case.prepare()
        gc.collect()
        before = _status_kib("VmRSS")
        _reset_high_water_mark()
        out = case.run(state)
        peak = _status_kib("VmHWM")
        peaks[case.aggregator] = max(0, peak - before) / 1024
        del out, state
        gc.collect()
    return peaks


def measure_memory(
    n: int,
    d: int,
    impl: str,
    aggregators: Sequence[str],
    nnm_limit_bytes: float,
    one_process_per_rule: bool,
    script: Path,
) -> dict[str, float]:
    """Peak MiB of each rule, measured by ``script --memory-child`` (:func:`memory_child`)."""
    env = dict(os.environ)
    if not one_process_per_rule:
        env["MALLOC_MMAP_THRESHOLD_"] = str(1 << 17)
    batches = [[a] for a in aggregators] if one_process_per_rule else [list(aggregators)]
    peaks: dict[str, float] = {}
    for batch in batches:
        spec = {
            "n": n,
            "d": d,
            "impl": impl,
            "aggregators": batch,
            "nnm_limit_bytes": nnm_limit_bytes,
        }
        done = subprocess.run(
            [sys.executable, str(script), "--memory-child", json.dumps(spec)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"memory child failed for {spec}:\n{done.stderr[-2000:]}")
        peaks.update(json.loads(done.stdout.strip().splitlines()[-1]))
    return peaks
