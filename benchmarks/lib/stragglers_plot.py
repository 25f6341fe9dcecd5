"""The plots of ``stragglers.md``: accuracy against simulated time, per profile and attack."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.lib.robustness_grid import NO_ATTACK
from benchmarks.lib.stragglers_goals import grid_rows
from benchmarks.lib.stragglers_grid import ATTACK, POLICIES, PROFILES, Q
from benchmarks.lib.stragglers_runs import Row


def plot(rows: Sequence[Row], workload: str, title: str, path: Path) -> bool:
    """Accuracy after each round against the simulated clock, one line per finished run.

    Panels: the profiles down, without and under attack across; the x axis is
    logarithmic (``all`` under a trace can take a hundred times longer than the
    fastest policy). A dotted line marks each scheme's target. Returns whether
    there was anything to plot.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [
        r
        for r in grid_rows(rows)
        if r.workload == workload and r.error is None and r.accuracy_by_round
    ]
    profiles = [p for p in PROFILES if any(r.profile == p.key for r in mine)]
    if not profiles:
        return False
    attacks = [a for a in (NO_ATTACK, ATTACK) if any(r.attack == a for r in mine)]
    figure, axes = plt.subplots(
        len(profiles),
        len(attacks),
        figsize=(6.5 * len(attacks), 3.6 * len(profiles) + 0.8),
        squeeze=False,
    )
    colors = plt.get_cmap("tab10")
    policy_index = {p.label: i for i, p in enumerate(POLICIES)}
    for i, profile in enumerate(profiles):
        for j, attack in enumerate(attacks):
            axis = axes[i][j]
            panel = [r for r in mine if r.profile == profile.key and r.attack == attack]
            schemes = list(dict.fromkeys(r.scheme for r in panel))
            for r in panel:
                axis.plot(
                    [max(t, 1e-3) for t in r.clock_by_round],
                    [100 * a for a in r.accuracy_by_round],
                    color=colors(policy_index.get(r.policy, 9) % 10),
                    linestyle="-" if schemes.index(r.scheme) == 0 else "--",
                    marker=".",
                    markersize=3,
                    linewidth=1.2,
                    label=f"{r.policy} ({r.scheme})",
                )
            for scheme in schemes:
                target = next(
                    (r.target_accuracy for r in panel if r.scheme == scheme and r.target_accuracy),
                    None,
                )
                if target is not None:
                    axis.axhline(100 * target, color="grey", linestyle=":", linewidth=0.8)
            axis.set_xscale("log")
            axis.set_title(
                f"{profile.label}, {'no attack' if attack == NO_ATTACK else f'{attack}, q = {Q}'}",
                fontsize=9,
            )
            axis.set_xlabel("simulated time (s)")
            axis.set_ylabel("test accuracy %")
            axis.grid(True, which="both", alpha=0.3)
            axis.legend(fontsize=6, loc="lower right")
    figure.suptitle(
        f"{title}: accuracy against simulated time (dotted: the target of each scheme, "
        "the accuracy `all` reaches at 80 % of its rounds)",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True
