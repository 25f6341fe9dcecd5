"""How many rounds the evidence across rounds needs to prove every colluder, and who else it proves.

Combinatorial: no training. For each scheme (K = 15, r = 3), colluding strategy, q and seed,
the adversaries are chosen as the grid's strong attack chooses them, every round's assignment is
relabelled as a run relabels it, and the attack's distortion plan for that round
(:func:`phalanx.attacks.distortion_plan`, as ``phalanx_clients.behaviour`` computes it) says who
lies on which file. A lying replica disagrees with every truthful replica of its file, colluders
on a file agree (they send the same value), honest replicas agree: those are the round's
disputes, fed to :class:`phalanx.detection.disputes.LiarsAcrossRounds` exactly as the
coordinator feeds the verdict's conflicts. Reported: the round by which every adversary is
proven ("never" within the rounds), and whether any honest worker ever was (it never may: the
rule's false-positive bound is zero). Each cell runs at the default bound ((K - 1) // 2) and at
the bound an operator defending against q would state (q).

Writes ``benchmarks/results/proofs.json`` and ``proofs.md`` (``proofs_quick.*`` with
``--quick``). Seconds on two cores; the figures are exact and move only if the assignment,
relabelling or attack code changes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if not __package__:  # run as `python benchmarks/NAME.py`: import `benchmarks` from this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.lib.results import RESULTS, report_path, write_json, write_markdown
from phalanx.attacks import distortion_plan
from phalanx.config import RunConfig
from phalanx.detection.disputes import LiarsAcrossRounds
from phalanx.plan import adversaries, base_assignment, round_assignment

SCHEMES = ("bibd", "mols", "subsets")
STRATEGIES = ("only_majorities", "fixed_disagreement")
K = 15


def rounds_to_prove(
    scheme: str, strategy: str, q: int, seed: int, bound: int, rounds: int
) -> tuple[int | None, list[int]]:
    """Return the round by which every adversary is proven (``None``: never), and honest proven."""
    config = RunConfig.model_validate(
        {
            "seed": seed,
            "rounds": rounds,
            "assignment": {"scheme": scheme, "num_workers": K, "r": 3, "relabel": True},
            "attack": {
                "name": "reversed_gradient",
                "q": q,
                "strategy": strategy,
                "selection": "strong",
            },
        }
    )
    base, liars = base_assignment(config), adversaries(config)
    across = LiarsAcrossRounds(bound)
    done: int | None = None
    for t in range(1, rounds + 1):
        assignment = round_assignment(config, t, base)
        plan = distortion_plan(assignment, liars, strategy=strategy, seed=seed)  # type: ignore[arg-type]
        disputes = set()
        for f, workers in enumerate(assignment.files):
            lying = [w for w in workers if f in plan.get(w, ())]
            disputes |= {(a, b) for a in lying for b in workers if b not in lying}
        across.observe(t, disputes)
        if done is None and liars <= across.proven:
            done = t
    return done, sorted(across.proven - liars)


def main() -> None:
    """Run the grid and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="bibd only, one seed")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    schemes = ("bibd",) if args.quick else SCHEMES
    seeds = (1,) if args.quick else (1, 2, 3)
    rows: list[dict[str, Any]] = []
    for scheme in schemes:
        for strategy in STRATEGIES:
            for q in range(1, 6):
                for bound in sorted({(K - 1) // 2, q}, reverse=True):
                    cells = [
                        rounds_to_prove(scheme, strategy, q, seed, bound, args.rounds)
                        for seed in seeds
                    ]
                    rows.append(
                        {
                            "scheme": scheme,
                            "strategy": strategy,
                            "q": q,
                            "bound": bound,
                            "seeds": list(seeds),
                            "rounds_to_prove_all": [done for done, _ in cells],
                            "honest_proven": sorted({w for _, wrong in cells for w in wrong}),
                        }
                    )
    write_json(report_path(RESULTS, "proofs", ".json", quick=args.quick), {"rows": rows})
    lines = [
        "# Rounds until the evidence across rounds proves every colluder (K = 15, r = 3)",
        "",
        f"Written by `benchmarks/eval_proofs.py` (see its docstring): relabelling on, strong "
        f"selection, seeds {', '.join(map(str, seeds))}, at most {args.rounds} rounds. "
        "*never*: not every colluder proven within the rounds. q = 1 with these strategies never "
        "lies (no majority to win, no tie to make), so nothing is there to prove.",
        "",
        "| scheme | strategy | q | bound | rounds until all proven (per seed) | honest proven |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        done = ", ".join("never" if d is None else str(d) for d in r["rounds_to_prove_all"])
        honest = ", ".join(map(str, r["honest_proven"])) or "none"
        lines.append(
            f"| {r['scheme']} | {r['strategy']} | {r['q']} | {r['bound']} | {done} | {honest} |"
        )
    write_markdown(report_path(RESULTS, "proofs", ".md", quick=args.quick), "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
