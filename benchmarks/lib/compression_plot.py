"""The plots of ``compression.md``: accuracy against cumulative uplink bytes and against rounds."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from benchmarks.lib.compression_grid import IN_PROCESS, SEED, K
from benchmarks.lib.compression_runs import Row


def plot(rows: Sequence[Row], r: int, path: Path, full_rounds: int) -> None:
    """Accuracy against cumulative uplink bytes (log scale) and against rounds, one line a run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [
        x
        for x in rows
        if x.r == r
        and x.transport == IN_PROCESS
        and x.rounds == full_rounds
        and x.error is None
        and x.seed == SEED
    ]
    if not mine:
        return
    # The labels spell out every setting: two legend columns below, as tall as they need.
    legend_height = 0.18 * math.ceil(len(mine) / 2) + 0.3
    figure, (by_bytes, by_round) = plt.subplots(1, 2, figsize=(14, 6.0 + legend_height))
    cmap = plt.get_cmap("tab20")
    for i, x in enumerate(mine):
        cumulative = [sum(x.uplink_by_round[: t + 1]) for t in range(x.rounds)]
        style = {
            "color": cmap(i % 20),
            "linestyle": "-" if x.method == "predictive coding" else "--",
            "marker": "o" if x.method == "predictive coding" else ".",
            "markersize": 3,
            "linewidth": 1.4,
            "label": x.label,
        }
        by_bytes.plot(cumulative, [100 * a for a in x.accuracy_by_round], **style)
        by_round.plot(range(1, x.rounds + 1), [100 * a for a in x.accuracy_by_round], **style)
    by_bytes.set_xscale("log")
    by_bytes.set_xlabel("cumulative uplink bytes (all workers)")
    by_round.set_xlabel("round")
    for axis in (by_bytes, by_round):
        axis.set_ylabel("test accuracy %")
        axis.grid(True, which="both", alpha=0.3)
    handles, labels = by_round.get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=2, fontsize=7)
    scheme = "none" if r == 1 else "bibd, STS(15)"
    figure.suptitle(
        f"Fashion-MNIST CNN, K = {K}, r = {r} ({scheme}): accuracy on the evaluation subset "
        "each round, on the full test set at the last round"
    )
    figure.tight_layout(rect=(0, legend_height / (6.0 + legend_height), 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)
