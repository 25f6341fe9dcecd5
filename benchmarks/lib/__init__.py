"""What the benchmark scripts are built from: importable modules, no script among them.

- ``results``: every script's machine notes and report files (JSON, markdown).
- ``inprocess_sharing``: many federations in one process (``eval_robustness``,
  ``eval_compression``, ``eval_stragglers``).
- ``case_pool``: an evaluation's runs one after the other or in processes.
- ``robustness_*``: ``eval_robustness.py`` (grid, runs, goals, markdown).
- ``compression_*``: ``eval_compression.py`` (baselines, grid, runs, goals,
  markdown, plot).
- ``stragglers_*``: ``eval_stragglers.py`` (grid, runs, goals, markdown, plot).
- ``aggregation_*``: ``bench_aggregation.py`` (peers, cases, timing, memory,
  markdown).
- ``api_*``: ``bench_api.py`` (harness, seed, burst).
- ``round_timing``, ``fedavg_apps``: ``bench_round.py``.

``eval_distortion.py`` and ``bench_codec.py`` need nothing beyond ``results``.
"""
