import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from helpers import tiny_images
from stable_baselines3.common.buffers import DictRolloutBuffer, RolloutBuffer

from sb3_trpo_plus import trpo_plus as trpo_plus_module
from sb3_trpo_plus.rollout import owns_copies, scaled_images, whole_rollout

N_STEPS, N_ENVS = 6, 3


def filled(buffer_class, observation_space):
    """A full buffer of random data (``compute_returns_and_advantage`` applied)."""
    rng = np.random.default_rng(0)
    buffer = buffer_class(N_STEPS, observation_space, spaces.Box(-1, 1, (2,)), n_envs=N_ENVS)
    for _ in range(N_STEPS):
        sample = observation_space.sample()
        obs = (
            {key: np.stack([value] * N_ENVS) for key, value in sample.items()}
            if isinstance(sample, dict)
            else np.stack([observation_space.sample() for _ in range(N_ENVS)])
        )
        buffer.add(
            obs,
            rng.normal(size=(N_ENVS, 2)).astype(np.float32),
            rng.normal(size=N_ENVS),
            np.zeros(N_ENVS, dtype=bool),
            th.as_tensor(rng.normal(size=N_ENVS)),
            th.as_tensor(rng.normal(size=N_ENVS)),
        )
    buffer.compute_returns_and_advantage(th.as_tensor(rng.normal(size=N_ENVS)), np.zeros(N_ENVS, dtype=bool))
    return buffer


def assert_same(whole, shuffled, permutation):
    for name, tensor in whole._asdict().items():
        reference = getattr(shuffled, name)
        if isinstance(tensor, dict):
            for key, value in tensor.items():
                assert th.equal(value[permutation], reference[key]), f"{name}[{key}]"
        else:
            assert th.equal(tensor[permutation], reference), name


@pytest.mark.parametrize(
    "buffer_class, observation_space",
    [
        (RolloutBuffer, spaces.Box(0, 255, (2, 5, 5), np.uint8)),
        # MinAtar's frames: height x width x channels booleans, not an image in SB3's sense
        (RolloutBuffer, spaces.Box(0, 1, (5, 5, 3), bool)),
        (RolloutBuffer, spaces.Box(-1, 1, (4,))),
        (DictRolloutBuffer, spaces.Dict({"image": spaces.Box(0, 255, (1, 4, 4), np.uint8), "vec": spaces.Box(-1, 1, (3,))})),
    ],
)
def test_whole_rollout(buffer_class, observation_space):
    # The samples of `get(batch_size=None)`, without its shuffle, and the buffer left as it is
    buffer = filled(buffer_class, observation_space)
    raw = {name: np.copy(value) for name, value in vars(buffer).items() if isinstance(value, np.ndarray)}
    whole = whole_rollout(buffer)
    assert not buffer.generator_ready
    assert all(np.array_equal(vars(buffer)[name], value) for name, value in raw.items())
    # channels-first images in channels_last (the convolution weights' format), anything else contiguous
    observations = whole.observations if isinstance(whole.observations, dict) else {None: whole.observations}
    for key, tensor in observations.items():
        space = observation_space if key is None else observation_space[key]
        image = space.dtype == np.uint8 and len(space.shape) == 3
        assert tensor.is_contiguous(memory_format=th.channels_last if image else th.contiguous_format), key
    np.random.seed(0)
    permutation = th.as_tensor(np.random.permutation(N_STEPS * N_ENVS))
    np.random.seed(0)
    assert_same(whole, next(buffer.get(batch_size=None)), permutation)
    # once `get` has flattened the buffer, its own path
    np.random.seed(1)
    permutation = th.as_tensor(np.random.permutation(N_STEPS * N_ENVS))
    np.random.seed(1)
    assert_same(whole, whole_rollout(buffer), permutation)


def test_whole_rollout_of_another_buffer_class():
    # a subclass may sample in its own way: its `get` is used, and its tensors may be views of its storage
    class OwnSampling(RolloutBuffer):
        def get(self, batch_size=None):
            yield "own samples"

    buffer = filled(OwnSampling, spaces.Box(-1, 1, (4,)))
    assert whole_rollout(buffer) == "own samples"
    assert not owns_copies(buffer)


@pytest.mark.parametrize("flattened_by_get", [False, True])
def test_owns_copies(flattened_by_get):
    # Changing whole_rollout's tensors in place leaves the buffer's arrays as they were
    buffer = filled(RolloutBuffer, spaces.Box(0, 255, (2, 5, 5), np.uint8))
    if flattened_by_get:
        next(buffer.get(batch_size=None))
    assert owns_copies(buffer)
    raw = np.copy(buffer.observations)
    scaled = scaled_images(whole_rollout(buffer).observations, in_place=True)
    assert scaled.max() <= 1.0
    np.testing.assert_array_equal(buffer.observations, raw)


def test_scaled_images_in_place_is_exact():
    images = th.randint(0, 256, (3, 2, 5, 5)).float().contiguous(memory_format=th.channels_last)
    expected = scaled_images(images)
    scaled = scaled_images(images, in_place=True)
    assert scaled is images and th.equal(scaled, expected)
    assert scaled.is_contiguous(memory_format=th.channels_last)


def test_update_on_the_whole_rollout_is_the_shuffled_one():
    # Means over the batch do not depend on its order: the update equals the one on `get`'s shuffled batch (up to
    # float32 summation order)
    def train(monkeypatch=None):
        model = tiny_images(False, 16, n_steps=64, batch_size=64, n_critic_updates=1, ent_coef=0.01)
        model.learn(64)
        if monkeypatch is not None:
            with monkeypatch.context() as patch:
                patch.setattr(trpo_plus_module, "whole_rollout", lambda buffer: next(buffer.get(batch_size=None)))
                model.train()
        else:
            model.train()
        assert model.last_update.line_search_success
        return model

    with pytest.MonkeyPatch.context() as monkeypatch:
        reference = train(monkeypatch)
    model = train()
    for (name, param), ref in zip(model.policy.named_parameters(), reference.policy.parameters(), strict=True):
        assert th.allclose(param, ref, rtol=1e-4, atol=1e-6), name
