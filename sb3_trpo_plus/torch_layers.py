"""Feature extractors and policies for small image observations (MinAtar) that SB3's NatureCNN cannot take."""

from typing import Any

import torch as th
from gymnasium import spaces
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn


class MinAtarCNN(BaseFeaturesExtractor):
    """
    The network of the MinAtar paper: one 3x3 convolution with 16 filters (stride 1, no padding), ReLU,
    then a linear layer. NatureCNN needs at least 36x36 pixels; MinAtar frames are 10x10 with one boolean
    channel per object type (4 to 10 channels depending on the game).

    Paper: https://arxiv.org/abs/1903.03176

    :param observation_space: Box of shape ``(height, width, channels)`` (``channels_last=True``, MinAtar's layout)
        or ``(channels, height, width)``; any dtype, observations are cast to float and not rescaled.
    :param features_dim: Number of features extracted (units of the linear layer)
    :param n_filters: Number of convolution filters
    :param channels_last: Whether the channel axis is the last one. MinAtar frames are channels-last; it is not
        guessed from the shape, because Seaquest (10x10x10) has as many channels as pixels per side.
    """

    def __init__(
        self,
        observation_space: spaces.Box,
        features_dim: int = 128,
        n_filters: int = 16,
        channels_last: bool = True,
    ) -> None:
        if not isinstance(observation_space, spaces.Box) or len(observation_space.shape) != 3:
            raise ValueError(f"MinAtarCNN needs a 3-dimensional Box observation space, got {observation_space}")
        super().__init__(observation_space, features_dim)
        self.channels_last = channels_last
        if channels_last:
            height, width, n_channels = observation_space.shape
        else:
            n_channels, height, width = observation_space.shape
        if height < 3 or width < 3:
            raise ValueError(f"MinAtarCNN needs frames of at least 3x3 pixels, got {height}x{width}")
        self.cnn = nn.Sequential(
            nn.Conv2d(n_channels, n_filters, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.linear = nn.Sequential(nn.Linear(n_filters * (height - 2) * (width - 2), features_dim), nn.ReLU())

    def forward(self, observations: th.Tensor) -> th.Tensor:
        if self.channels_last:
            observations = observations.permute(0, 3, 1, 2)
        return self.linear(self.cnn(observations.float()))


class MinAtarCnnPolicy(ActorCriticPolicy):
    """
    Actor-critic policy with :class:`MinAtarCNN` as default features extractor, so that a YAML file can name it
    (``policy: sb3_trpo_plus.torch_layers.MinAtarCnnPolicy``) without Python code in ``policy_kwargs``.
    All arguments are those of :class:`~stable_baselines3.common.policies.ActorCriticPolicy`.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("features_extractor_class", MinAtarCNN)
        super().__init__(*args, **kwargs)
