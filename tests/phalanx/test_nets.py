from __future__ import annotations

import hashlib

import pytest
import torch
from torch import nn

from phalanx.nets import (
    MLP,
    SmallCNN,
    build_model,
    flatten_params,
    init_model,
    layer_shapes,
    load_flat_,
    model_digest,
    num_params,
)


@pytest.mark.parametrize("name", ["cnn", "mlp"])
@pytest.mark.parametrize(("channels", "side"), [(1, 28), (1, 8), (3, 12)])
def test_models_map_images_to_one_logit_per_class(name: str, channels: int, side: int) -> None:
    model = build_model(name, in_channels=channels, image_size=side, num_classes=7)  # type: ignore[arg-type]
    assert model(torch.zeros(5, channels, side, side)).shape == (5, 7)


def test_build_model_returns_the_named_architecture() -> None:
    assert isinstance(build_model("cnn", in_channels=1, image_size=28, num_classes=10), SmallCNN)
    assert isinstance(build_model("mlp", in_channels=1, image_size=8, num_classes=10), MLP)


def test_small_cnn_on_fashion_mnist_has_the_documented_size() -> None:
    assert num_params(SmallCNN(1, 28, 10)) == 421_642


def test_build_model_rejects_unknown_names_and_too_small_images() -> None:
    with pytest.raises(ValueError, match=r"unknown model 'resnet'"):
        build_model("resnet", in_channels=1, image_size=28, num_classes=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"image_size must be >= 4"):
        build_model("cnn", in_channels=1, image_size=3, num_classes=10)


def test_init_model_depends_only_on_the_seed() -> None:
    kwargs = {"in_channels": 1, "image_size": 8, "num_classes": 10}
    torch.manual_seed(1)
    a = init_model("cnn", seed=42, **kwargs)
    torch.manual_seed(2)
    b = init_model("cnn", seed=42, **kwargs)
    c = init_model("cnn", seed=43, **kwargs)
    assert model_digest(a) == model_digest(b) != model_digest(c)


def test_init_model_leaves_the_global_generator_untouched() -> None:
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=0)
    assert torch.equal(torch.rand(3), expected)


def test_init_model_biases_stay_within_the_default_bound() -> None:
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=0)
    first = next(m for m in model.modules() if isinstance(m, nn.Linear))
    assert first.in_features == 64
    assert float(first.bias.detach().abs().max()) <= 1 / 8  # 1 / sqrt(fan_in = 64)


def test_flatten_and_load_round_trip_exactly() -> None:
    source = init_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=1)
    target = init_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=2)
    vector = flatten_params(source)
    assert vector.dtype == torch.float32 and vector.shape == (num_params(source),)
    load_flat_(target, vector)
    assert torch.equal(flatten_params(target), vector)
    for (_, p), (_, q) in zip(source.named_parameters(), target.named_parameters(), strict=True):
        assert torch.equal(p, q)


def test_flatten_params_returns_a_copy() -> None:
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=0)
    before = model_digest(model)
    flatten_params(model).zero_()
    assert model_digest(model) == before


def test_load_flat_rejects_a_vector_of_the_wrong_size() -> None:
    model = nn.Linear(3, 2)
    with pytest.raises(ValueError, match=r"1-D with 8 elements, got shape \(9,\)"):
        load_flat_(model, torch.zeros(9))
    with pytest.raises(ValueError, match=r"1-D with 8 elements"):
        load_flat_(model, torch.zeros(2, 4))


def test_layer_shapes_follow_parameter_order_and_cover_the_vector() -> None:
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
    shapes = layer_shapes(model)
    assert shapes == [
        ("0.weight", (2, 3)),
        ("0.bias", (2,)),
        ("2.weight", (1, 2)),
        ("2.bias", (1,)),
    ]
    assert sum(torch.Size(s).numel() for _, s in shapes) == num_params(model)


def test_model_digest_is_sha256_of_little_endian_float32_bytes() -> None:
    vector = torch.tensor([1.0, -2.5, 0.0], dtype=torch.float32)
    expected = hashlib.sha256(b"\x00\x00\x80\x3f" + b"\x00\x00\x20\xc0" + b"\x00" * 4).hexdigest()
    assert model_digest(vector) == expected


def test_model_digest_is_the_same_for_a_model_and_its_vector() -> None:
    model = init_model("cnn", in_channels=1, image_size=8, num_classes=10, seed=3)
    assert model_digest(model) == model_digest(flatten_params(model))


def test_model_digest_changes_when_one_parameter_changes() -> None:
    model = init_model("mlp", in_channels=1, image_size=8, num_classes=10, seed=3)
    before = model_digest(model)
    with torch.no_grad():
        next(model.parameters())[0, 0] += 1e-6
    assert model_digest(model) != before


def test_model_digest_refuses_other_dtypes_instead_of_casting() -> None:
    with pytest.raises(ValueError, match=r"1-D float32"):
        model_digest(torch.zeros(3, dtype=torch.float64))
