"""Write devices-100.csv: a made-up device-capacity trace of 100 heterogeneous workers.

Run from the repository root: ``python examples/traces/generate.py``. The
output depends only on :data:`SEED`, so running it again rewrites the same
bytes (a test checks this). The devices are not measurements: log-normal
compute speeds around 2 ms per sample, a tenth of the devices ten times
slower (old phones), uplinks of 0.1 to 10 MB/s with downlinks ten times
faster, and latencies of 10 to 300 ms. Workers 0..14 are the K = 15 slice.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

SEED = 20240518
NUM_WORKERS = 100
PATH = Path(__file__).with_name("devices-100.csv")


def trace_text(seed: int = SEED, num_workers: int = NUM_WORKERS) -> str:
    """Return the CSV text of the example trace."""
    rng = np.random.default_rng(seed)
    speed = 0.002 * np.exp(0.5 * rng.standard_normal(num_workers))
    speed[rng.random(num_workers) < 0.1] *= 10.0
    up = 10.0 ** rng.uniform(5.0, 7.0, num_workers)
    latency = 10.0 ** rng.uniform(-2.0, np.log10(0.3), num_workers)
    lines = [
        f"# Made-up devices for simulation, written by examples/traces/generate.py (seed {seed}).",
        "worker,seconds_per_sample,up_bytes_per_s,down_bytes_per_s,latency_s",
    ]
    lines += [
        f"{w},{speed[w]:.6g},{up[w]:.6g},{10.0 * up[w]:.6g},{latency[w]:.4g}"
        for w in range(num_workers)
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    PATH.write_text(trace_text())
    sys.stdout.write(f"wrote {PATH}\n")
