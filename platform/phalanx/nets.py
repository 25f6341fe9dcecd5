"""The model zoo, and the flat-vector view of a model that updates travel in.

Every update, aggregate and digest in Phalanx is a 1-D float32 vector holding
a model's parameters in ``model.parameters()`` order. Buffers (for example
batch-norm running statistics) are not part of it; the models here have none.
"""

from __future__ import annotations

import hashlib
import math
from typing import Literal

import torch
from torch import Tensor, nn

ModelName = Literal["cnn", "mlp"]


class SmallCNN(nn.Module):
    """Two 3x3 convolutions (32 then 64 channels, each with ReLU and 2x2 max-pool), FC 128, FC out.

    On 28x28 Fashion-MNIST it has 421,642 parameters; it also runs on images
    as small as 4x4 (8x8 digits pool down to 2x2).

    Parameters
    ----------
    in_channels : int
        Image channels.
    image_size : int
        Side of the square input images, ``>= 4``.
    num_classes : int
        Number of output logits.
    """

    def __init__(self, in_channels: int, image_size: int, num_classes: int) -> None:
        super().__init__()
        if image_size < 4:
            raise ValueError(
                f"SmallCNN pools twice by 2, so image_size must be >= 4, got {image_size}"
            )
        side = image_size // 2 // 2
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64 * side * side, 128),
            nn.ReLU(),
            nn.Linear(128, num_classes),
        )

    def forward(self, x: Tensor) -> Tensor:
        """Map images ``(N, C, H, H)`` to logits ``(N, num_classes)``."""
        out: Tensor = self.classifier(self.features(x))
        return out


class MLP(nn.Module):
    """Flatten, then fully connected layers with ReLU between them.

    Parameters
    ----------
    in_features : int
        ``C * H * W`` of the input images.
    num_classes : int
        Number of output logits.
    hidden : tuple of int
        Widths of the hidden layers.
    """

    def __init__(
        self, in_features: int, num_classes: int, hidden: tuple[int, ...] = (256, 128)
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = in_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        """Map images ``(N, C, H, W)`` to logits ``(N, num_classes)``."""
        out: Tensor = self.layers(x)
        return out


def build_model(
    name: ModelName, *, in_channels: int, image_size: int, num_classes: int
) -> nn.Module:
    """Build a model from the zoo, initialised from torch's global generator.

    Use :func:`init_model` for an initialisation that depends only on a seed.

    Parameters
    ----------
    name : {"cnn", "mlp"}
        :class:`SmallCNN` or :class:`MLP`; both accept 28x28 and 8x8 images.
    in_channels, image_size, num_classes : int
        Input channels, side of the square images, output classes.
    """
    for label, value in (
        ("in_channels", in_channels),
        ("image_size", image_size),
        ("num_classes", num_classes),
    ):
        if value < 1:
            raise ValueError(f"{label} must be >= 1, got {value}")
    if name == "cnn":
        return SmallCNN(in_channels, image_size, num_classes)
    if name == "mlp":
        return MLP(in_channels * image_size * image_size, num_classes)
    raise ValueError(f"unknown model {name!r}; use 'cnn' or 'mlp'")


def init_model(
    name: ModelName, *, in_channels: int, image_size: int, num_classes: int, seed: int
) -> nn.Module:
    """Build a model whose initial parameters depend only on ``seed``.

    Every convolution and linear layer is re-initialised, in module order, as
    torch does by default (Kaiming-uniform weights with ``a = sqrt(5)``,
    biases uniform in ``+-1 / sqrt(fan_in)``), but drawn from a private
    ``torch.Generator`` seeded with ``seed``; torch's global generator is
    neither used nor advanced.
    """
    with torch.random.fork_rng(devices=[]):
        model = build_model(
            name, in_channels=in_channels, image_size=image_size, num_classes=num_classes
        )
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear | nn.Conv2d):
                nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5), generator=generator)
                if module.bias is not None:
                    bound = 1.0 / math.sqrt(module.weight[0].numel())
                    nn.init.uniform_(module.bias, -bound, bound, generator=generator)
    return model


def flatten_params(model: nn.Module) -> Tensor:
    """Return a 1-D float32 copy of the model's parameters, in ``parameters()`` order."""
    params = [p.detach().reshape(-1).to(torch.float32) for p in model.parameters()]
    if not params:
        raise ValueError("the model has no parameters")
    return torch.cat(params)


def num_params(model: nn.Module) -> int:
    """Count the scalar parameters: the length of :func:`flatten_params`."""
    return sum(p.numel() for p in model.parameters())


def load_flat_(model: nn.Module, vector: Tensor) -> nn.Module:
    """Copy a flat vector into the model's parameters, in place.

    Parameters
    ----------
    model : nn.Module
        The model to overwrite.
    vector : Tensor
        1-D, floating point, ``num_params(model)`` long.

    Returns
    -------
    nn.Module
        ``model`` itself.
    """
    expected = num_params(model)
    if vector.dim() != 1 or vector.shape[0] != expected:
        raise ValueError(
            f"vector must be 1-D with {expected} elements, got shape {tuple(vector.shape)}"
        )
    if not vector.is_floating_point():
        raise ValueError(f"vector must be floating point, got {vector.dtype}")
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            n = p.numel()
            p.copy_(vector[offset : offset + n].view_as(p))
            offset += n
    return model


def layer_shapes(model: nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    """List the name and shape of every parameter, in the order of the flat vector."""
    return [(name, tuple(p.shape)) for name, p in model.named_parameters()]


def model_digest(model_or_vector: nn.Module | Tensor) -> str:
    """Hex SHA-256 of a model's parameters as little-endian float32 bytes, in parameter order.

    Parameters
    ----------
    model_or_vector : nn.Module or Tensor
        A model, or its flat vector (1-D float32, as :func:`flatten_params`
        returns). A model and its flat vector have the same digest.
    """
    if isinstance(model_or_vector, nn.Module):
        vector = flatten_params(model_or_vector)
    else:
        vector = model_or_vector
        if vector.dim() != 1 or vector.dtype != torch.float32:
            raise ValueError(
                f"digest needs a 1-D float32 vector, got {vector.dtype} {tuple(vector.shape)}"
            )
    data = vector.detach().cpu().contiguous().numpy().astype("<f4", copy=False)
    return hashlib.sha256(data.tobytes()).hexdigest()
