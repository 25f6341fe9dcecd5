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
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}  # type: ignore[dict-item]
        else:
            base[key] = value
    return RunConfig.model_validate(base)
