import pytest
import yaml

from benchmarks._common import EXTRA_HYPERPARAMS_PATH
from sb3_trpo_plus.zoo import HYPERPARAMS_PATH

MINATAR_GAMES = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]


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
