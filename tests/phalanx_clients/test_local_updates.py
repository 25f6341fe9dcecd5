"""A client's update on its own data: the run's local settings, seeded by run, round and file."""

from __future__ import annotations

import torch

from phalanx.attacks import LabelFlip
from phalanx.data import load_digits
from phalanx.data_mode import LocalTrainingConfig
from phalanx.local_data import model_shape
from phalanx.local_training import train_locally
from phalanx.nets import flatten_params
from phalanx.training import derive_seed
from phalanx_clients.local_updates import compute_local_update, local_model
from tests.support.configs import local_config


def test_a_local_update_is_local_training_with_the_run_s_settings_and_seed() -> None:
    config = local_config()
    data = load_digits("train").subset(torch.arange(120))
    model = local_model(config, model_shape(data))
    params = flatten_params(model)
    settings = config.data.local or LocalTrainingConfig()

    update = compute_local_update(config, model, data, 3, 5, params)
    flipped = compute_local_update(
        config, model, data, 3, 5, params, poison_labels=LabelFlip().poison_labels
    )

    expected = train_locally(model, params, data, settings, seed=derive_seed(config.seed, 3, 5))
    assert torch.equal(update.update, expected.update)
    assert update.num_samples == flipped.num_samples == 120
    assert not torch.equal(flipped.update, update.update)
    other_file = compute_local_update(config, model, data, 3, 4, params)
    assert not torch.equal(other_file.update, update.update)
