"""What the benchmark scripts are built from: importable modules, no script among them.

Modules are named after the script they serve (``compression_*`` for
``eval_compression.py``, ``api_*`` for ``bench_api.py``, ...); ``results``
is shared by every script (the machine notes and the report files).
"""
