"""
The rollout as one batch, for an update that takes means over all of it.

This module uses nothing else of ``sb3_trpo_plus``.
"""

from collections.abc import Callable

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer
from stable_baselines3.common.preprocessing import is_image_space, is_image_space_channels_first
from stable_baselines3.common.type_aliases import DictRolloutBufferSamples, RolloutBufferSamples

#: The buffer classes read directly, and how their samples are built (any other class goes through its own ``get``)
_SAMPLES: dict[type[RolloutBuffer], Callable[..., RolloutBufferSamples | DictRolloutBufferSamples]] = {
    RolloutBuffer: RolloutBufferSamples,
    DictRolloutBuffer: DictRolloutBufferSamples,
}


def is_channels_first_image(space: spaces.Space) -> bool:
    """
    Whether observations of ``space`` are images in SB3's sense (``is_image_space``: a ``uint8`` Box of 3 dimensions)
    with the channels first, as ``VecTransposeImage`` makes them: the observations that SB3's CNNs take as they are.
    Other 3-dimensional observations (MinAtar's boolean height x width x channels frames) are not.
    """
    return is_image_space(space, check_channels=False) and is_image_space_channels_first(space)  # type: ignore[arg-type]


def scaled_images(observations: th.Tensor, in_place: bool = False) -> th.Tensor:
    """
    ``uint8`` images scaled to ``[0, 1]``: ``preprocess_obs``'s ``obs.float() / 255.0``, bit for bit, with the
    division done in place on the ``float32`` copy (on 2048 Atari frames, one 230 MB allocation fewer). The memory
    format (``channels_last``) is kept.

    :param observations: the images
    :param in_place: when they are ``float32`` already (as SB3's rollout buffers store them), divide these very
        tensors, without any copy: only for a tensor the caller owns (see :func:`owns_copies`)
    :return: the scaled images (``observations`` itself with ``in_place``, else a new ``float32`` tensor)
    """
    if in_place and observations.dtype == th.float32:
        return observations.div_(255.0)
    return observations.to(th.float32, copy=True).div_(255.0)


def flattened(array: np.ndarray, device: th.device | str, channels_last: bool = False) -> th.Tensor:
    """
    A buffer array of shape ``(n_steps, n_envs, *shape)`` as a tensor of shape ``(n_envs * n_steps, *shape)``, env by
    env (``BaseBuffer.swap_and_flatten``'s order), in one copy.

    :param array: the buffer array
    :param device: where the tensor goes
    :param channels_last: write a batch of channels-first images (``shape`` of length 3) in ``channels_last``, the
        memory format of TRPOPlus's convolution weights
    :return: the flattened tensor
    """
    source = th.as_tensor(array, device=device)
    n_steps, n_envs, *shape = source.shape
    memory_format = th.channels_last if channels_last and len(shape) == 3 else th.contiguous_format
    out = th.empty((n_envs * n_steps, *shape), dtype=source.dtype, device=source.device, memory_format=memory_format)
    out.view(n_envs, n_steps, *shape).copy_(source.transpose(0, 1))
    return out


def whole_rollout(buffer: RolloutBuffer) -> RolloutBufferSamples | DictRolloutBufferSamples:
    """
    The whole rollout as one batch: what ``next(buffer.get(batch_size=None))`` returns, without its shuffle.

    ``get`` flattens every array, gathers it in a random order and copies it into a tensor: on 2048 Atari frames
    (230 MB of ``float32`` observations) three passes over the observations, and a fourth where the update wants them
    in ``channels_last``. A trust-region update takes means over the whole batch, whose order does not change them,
    and draws its own random sub-samples; here every array is copied once (channels-first images, see
    :func:`is_channels_first_image`, in ``channels_last``), and the buffer is left as it is. A buffer
    already flattened by ``get``, or of another class (which may sample in its own way), goes through ``get``.

    :param buffer: a full rollout buffer
    :return: the samples, env by env
    """
    samples = _SAMPLES.get(type(buffer))
    if samples is None or buffer.generator_ready:
        return next(buffer.get(batch_size=None))
    device = buffer.device
    observations = buffer.observations
    per_step = (buffer.values, buffer.log_probs, buffer.advantages, buffer.returns)
    space = buffer.observation_space
    return samples(
        {
            key: flattened(value, device, is_channels_first_image(space[key]))  # type: ignore[index]
            for key, value in observations.items()
        }
        if isinstance(observations, dict)
        else flattened(observations, device, is_channels_first_image(space)),
        flattened(buffer.actions.astype(np.float32, copy=False), device),
        *(flattened(array, device).flatten() for array in per_step),
    )


def owns_copies(buffer: RolloutBuffer) -> bool:
    """
    Whether the tensors that :func:`whole_rollout` returns for ``buffer`` are new copies, which the caller may change
    in place without touching the buffer: for the classes it reads directly (its own copies; and SB3's ``get``, once
    the buffer is flattened, copies too). Another class's ``get`` may return views of its storage.
    """
    return type(buffer) in _SAMPLES
