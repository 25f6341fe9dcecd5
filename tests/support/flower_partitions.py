"""Partitions made by Flower Datasets 0.6.1 itself, for the same labels, parameters and seeds.

``flwr-datasets`` is not a dependency (its partitioners need Hugging Face
``datasets``, ``pyarrow``, ``matplotlib`` and ``seaborn``), so its output is kept
here. It was made in a separate virtual environment (``pip install
flwr-datasets==0.6.1``: datasets 4.8.5, NumPy 2.4.6), offline, by giving each
partitioner ``datasets.Dataset.from_dict({"label": LABELS, "idx": range(48)})``
and reading the ``idx`` column of every ``load_partition(c)``:

- ``iid``: ``IidPartitioner(num_clients)`` on ``dataset.shuffle(seed=seed)`` (what
  ``FederatedDataset(shuffle=True, seed=seed)`` does);
- ``dirichlet``: ``DirichletPartitioner(num_clients, "label", alpha,
  min_partition_size=..., self_balancing=..., seed=seed)``;
- ``pathological``: ``PathologicalPartitioner(num_clients, "label", labels_per_client,
  class_assignment_mode=assignment, seed=seed)``;
- ``sized``: ``SizePartitioner(sizes)`` on ``dataset.shuffle(seed=seed)``.

``LABELS`` is ``numpy.random.default_rng(7).integers(0, 4, 48)``.
"""

from __future__ import annotations

from typing import Any

LABELS: list[int] = [
    3,
    2,
    2,
    3,
    2,
    3,
    3,
    0,
    0,
    1,
    1,
    3,
    3,
    0,
    1,
    3,
    0,
    3,
    0,
    1,
    3,
    1,
    1,
    1,
    2,
    1,
    3,
    1,
    1,
    2,
    2,
    2,
    2,
    3,
    3,
    3,
    2,
    2,
    1,
    3,
    1,
    0,
    3,
    0,
    3,
    2,
    0,
    0,
]
CASES: list[tuple[str, dict[str, Any], list[list[int]]]] = [
    (
        "iid",
        {"num_clients": 5, "seed": 3},
        [
            [22, 39, 24, 11, 31, 18, 23, 37, 4, 3],
            [17, 25, 41, 28, 2, 46, 47, 12, 40, 13],
            [35, 21, 20, 30, 0, 44, 38, 43, 10, 1],
            [15, 32, 42, 27, 29, 8, 9, 6, 33],
            [26, 34, 45, 16, 14, 36, 7, 5, 19],
        ],
    ),
    (
        "dirichlet",
        {
            "num_clients": 4,
            "alpha": 0.5,
            "min_partition_size": 2,
            "self_balancing": False,
            "seed": 11,
        },
        [
            [21, 22, 7, 3, 10, 0, 5, 2, 1, 9, 4, 14, 19, 23],
            [18, 43, 8, 46, 13, 41, 16],
            [12, 17, 15, 26, 20, 6, 11, 33],
            [36, 39, 38, 30, 29, 45, 42, 32, 25, 31, 34, 28, 44, 35, 40, 24, 47, 37, 27],
        ],
    ),
    (
        "dirichlet",
        {
            "num_clients": 4,
            "alpha": 0.3,
            "min_partition_size": 0,
            "self_balancing": True,
            "seed": 5,
        },
        [
            [41, 18, 11, 0, 17, 3, 15, 8, 1, 12, 5, 16, 20, 7, 13, 6],
            [2, 46, 29, 32, 26, 31, 30, 43, 24, 4],
            [14, 9, 27, 38, 22, 21, 10, 36, 25, 28, 23, 37, 19],
            [35, 44, 42, 47, 39, 40, 34, 45, 33],
        ],
    ),
    (
        "pathological",
        {"num_clients": 5, "labels_per_client": 2, "assignment": "random", "seed": 9},
        [
            [40, 22, 10, 25, 23, 28, 19, 14, 9, 27, 3, 21, 5, 6, 0, 38],
            [41, 7, 13, 8, 12, 16, 47, 18, 46, 15, 43, 11],
            [24, 17, 1, 20, 4, 26, 2],
            [31, 29, 32, 30, 34, 33, 35],
            [45, 37, 36, 44, 42, 39],
        ],
    ),
    (
        "pathological",
        {"num_clients": 5, "labels_per_client": 2, "assignment": "deterministic", "seed": 9},
        [
            [9, 19, 14, 13, 10, 7, 8],
            [22, 25, 4, 30, 1, 23, 24, 29, 21, 2],
            [15, 11, 36, 32, 45, 0, 3, 37, 17, 5, 31, 6, 12],
            [33, 16, 41, 18, 39, 20, 34, 44, 26, 35, 42],
            [27, 28, 43, 38, 47, 40, 46],
        ],
    ),
    (
        "pathological",
        {"num_clients": 5, "labels_per_client": 2, "assignment": "first-deterministic", "seed": 9},
        [
            [14, 13, 10, 7, 18, 16, 9, 8, 19],
            [11, 22, 3, 25, 12, 5, 21, 23, 0, 6],
            [33, 4, 26, 1, 17, 2, 20, 24, 15, 29, 30],
            [35, 28, 27, 38, 44, 34, 40, 39, 42],
            [31, 47, 32, 41, 45, 46, 36, 43, 37],
        ],
    ),
    (
        "sized",
        {"sizes": [5, 10, 7], "seed": 4},
        [[16, 36, 46, 47, 11], [19, 34, 45, 18, 43, 35, 8, 13, 39, 24], [1, 42, 7, 32, 23, 10, 29]],
    ),
]
