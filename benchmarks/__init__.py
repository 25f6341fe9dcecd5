"""Phalanx's evaluations and benchmarks.

Every ``benchmarks/*.py`` is a script, run from the repository root as
``python benchmarks/NAME.py`` (see ``make bench``); it writes its figures to
``benchmarks/results/``. The code the scripts share, and the parts the tests
import, live in :mod:`benchmarks.lib`.
"""
