"""Redundant assignment: which worker computes which file.

The data type is :class:`~phalanx.assignment.incidence.Assignment`; the schemes
(``none``, ``groups``, ``subsets``, ``bibd``, ``mols``, ``random``) are built by
:func:`make_assignment` (:mod:`~phalanx.assignment.schemes`, with the block designs in
:mod:`~phalanx.assignment.designs`), checked without being built by :func:`count_files`,
and relabelled every round by :func:`relabel` (:mod:`~phalanx.assignment.relabelling`).
"""

from phalanx.assignment.designs import bibd_assignment, mols_assignment
from phalanx.assignment.incidence import Assignment
from phalanx.assignment.parameters import MAX_FILES, MAX_SUBSET_FILES, SCHEMES
from phalanx.assignment.relabelling import relabel, round_seed
from phalanx.assignment.schemes import (
    count_files,
    groups_assignment,
    make_assignment,
    none_assignment,
    random_assignment,
    subsets_assignment,
)

__all__ = [
    "MAX_FILES",
    "MAX_SUBSET_FILES",
    "SCHEMES",
    "Assignment",
    "bibd_assignment",
    "count_files",
    "groups_assignment",
    "make_assignment",
    "mols_assignment",
    "none_assignment",
    "random_assignment",
    "relabel",
    "round_seed",
    "subsets_assignment",
]
