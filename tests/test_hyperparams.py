import copy

import pytest
import yaml

from benchmarks._common import EXTRA_HYPERPARAMS_PATH
from sb3_trpo_plus.zoo import HYPERPARAMS_PATH

MINATAR_GAMES = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
TIME_LIMIT = "gymnasium.wrappers.TimeLimit"


@pytest.mark.parametrize(
    "entries",
    [
        pytest.param(lambda: yaml.safe_load(HYPERPARAMS_PATH.read_text()), id="trpo_plus"),
        pytest.param(lambda: yaml.safe_load(EXTRA_HYPERPARAMS_PATH.read_text())["ppo"], id="ppo"),
        pytest.param(lambda: yaml.safe_load(EXTRA_HYPERPARAMS_PATH.read_text())["trpo"], id="trpo"),
    ],
)
def test_minatar_entries_shared(entries):
    # One configuration for all five MinAtar games, per algorithm: the benchmark compares one set of values, not five
    entries = entries()
    configs = [entries[f"MinAtar/{game}-v1"] for game in MINATAR_GAMES]
    assert all(config == configs[0] for config in configs[1:])
    assert configs[0]["policy"] == "sb3_trpo_plus.torch_layers.MinAtarCnnPolicy"


@pytest.mark.parametrize("algo", ["trpo_plus", "ppo", "trpo"])
def test_minatar_time_limit_is_counted_as_an_episode(algo):
    # The zoo wraps its own Monitor *under* the entry's env_wrapper list; an episode cut by the time limit must still
    # reach info["episode"] (what evaluate_policy and the ep_rew_mean log count), or an evaluation of a policy that
    # survives never ends
    pytest.importorskip("minatar")
    import numpy as np
    from rl_zoo3.utils import get_wrapper_class
    from stable_baselines3.common.env_util import make_vec_env

    from benchmarks._common import register_envs

    register_envs()
    entries = yaml.safe_load(HYPERPARAMS_PATH.read_text())
    if algo != "trpo_plus":
        entries = yaml.safe_load(EXTRA_HYPERPARAMS_PATH.read_text())[algo]
    entry = copy.deepcopy(entries["MinAtar/Breakout-v1"])
    limits = [wrapper for wrapper in entry["env_wrapper"] if isinstance(wrapper, dict) and TIME_LIMIT in wrapper]
    assert [limit[TIME_LIMIT]["max_episode_steps"] for limit in limits] == [10_000]
    limits[0][TIME_LIMIT]["max_episode_steps"] = 5  # (a Breakout episode lasts longer than 5 steps)
    # built as rl_zoo3's ExperimentManager.create_envs builds it: Monitor first, then the env_wrapper list
    env = make_vec_env("MinAtar/Breakout-v1", n_envs=1, seed=0, wrapper_class=get_wrapper_class(entry))
    env.reset()
    for _ in range(5):
        _, _, dones, infos = env.step(np.array([0]))
    assert dones[0] and infos[0]["TimeLimit.truncated"]
    assert infos[0]["episode"]["l"] == 5
