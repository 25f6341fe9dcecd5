"""Small, fast run configurations on scikit-learn's digits."""

from __future__ import annotations

from phalanx.config import RunConfig


def small_config(**overrides: object) -> RunConfig:
    """A 7-worker STS(7) run on digits with an MLP: seconds, not minutes."""
    base: dict[str, object] = {
        "name": "test",
        "seed": 7,
        "rounds": 3,
        "data": {"dataset": "digits", "model": "mlp", "samples_per_file": 16, "eval_samples": None},
        "assignment": {"scheme": "bibd", "num_workers": 7, "r": 3},
        "attack": {"name": "reversed_gradient", "q": 2, "selection": "weak"},
        "training": {"optimizer": "adam", "server_lr": 0.01},
    }
    return _merged(base, overrides)


def local_config(**overrides: object) -> RunConfig:
    """A 6-client run on local digits data (IID unless ``data.partition`` says), FedAvg's mean."""
    base: dict[str, object] = {
        "name": "local",
        "seed": 7,
        "rounds": 3,
        "data": {
            "dataset": "digits",
            "model": "mlp",
            "mode": "local",
            "eval_samples": None,
            "local": {"epochs": 1, "batch_size": 32, "lr": 0.1},
        },
        "assignment": {"scheme": "none", "num_workers": 6, "r": 1},
        "aggregation": {"rule": "mean"},
        # FedAvg: the server applies the weighted mean of the local updates as it is.
        "training": {"optimizer": "sgd", "server_lr": 1.0, "momentum": 0.0},
    }
    return _merged(base, overrides)


def _merged(base: dict[str, object], overrides: dict[str, object]) -> RunConfig:
    """``base`` with ``overrides``, a section's keys merged into it, validated."""
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}  # type: ignore[dict-item]
        else:
            base[key] = value
    return RunConfig.model_validate(base)
