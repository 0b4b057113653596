"""
Whether a trained MinAtar model's network has died (``minatar_k6_rule.md``, stage 1; the alive gate of
``minatar_5m_k8/rule.md``, from its ``--json`` record). On states from a random policy:
how many of its feature units (ReLU) are never active, how many units of the heads' hidden layers (``mlp_extractor``,
tanh) are saturated (``|tanh| > 0.999`` in every state), and how much its action probabilities and value vary over the
states. A dead network gives one action distribution and one value in every state (standard deviation 0), so a
deterministic evaluation plays one fixed action, while its entropy stays wherever its state-independent outputs leave
it. The model is a run's ``final_model.zip`` in its working folder (never committed)::

    RUN=benchmarks/results/keep_learning/minatar_k6/tmp/learning/trpo_plus/MinAtar-Seaquest-v1/seed100
    python -m benchmarks.experiments.dead_network $RUN/final_model.zip MinAtar/Seaquest-v1
"""

import argparse
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th

from sb3_trpo_plus import TRPOPlus


def random_states(env_id: str, n_states: int, seed: int = 0) -> np.ndarray:
    """``n_states`` observations of a uniformly random policy on ``env_id``, from ``seed``."""
    import minatar.gym  # (the MinAtar ids; the zoo's own runs register them on import of rl_zoo3)

    minatar.gym.register_envs()
    env = gym.make(env_id)
    rng = np.random.default_rng(seed)
    observations = []
    observation, _ = env.reset(seed=seed)
    for _ in range(n_states):
        observations.append(observation)
        observation, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        if terminated or truncated:
            observation, _ = env.reset()
    return np.array(observations)


def network_facts(model_path: str, env_id: str, n_states: int = 3000) -> dict[str, Any]:
    """
    On ``n_states`` states of a random policy: the share of feature units never active, per head the share of each
    hidden layer's units saturated in every state, and the action probabilities' and value's mean and spread over the
    states.
    """
    model = TRPOPlus.load(model_path, device="cpu")
    policy = model.policy
    if not policy.share_features_extractor:
        raise ValueError(f"{model_path}: its actor and critic have extractors of their own; this reads a shared one")
    observations = th.as_tensor(random_states(env_id, n_states), dtype=th.float32)
    with th.no_grad():
        features = policy.extract_features(observations, policy.pi_features_extractor)
        saturated = {}
        for name, net in (("policy", policy.mlp_extractor.policy_net), ("value", policy.mlp_extractor.value_net)):
            hidden, fractions = features, []
            for layer in net:
                hidden = layer(hidden)
                if isinstance(layer, th.nn.Tanh):
                    fractions.append(float((hidden.abs() > 0.999).all(dim=0).float().mean()))
            saturated[name] = fractions
        probabilities = policy.get_distribution(observations).distribution.probs
        values = policy.predict_values(observations).squeeze(-1)
    return {
        "model": str(model_path),
        "env_id": env_id,
        "n_states": n_states,
        "feature_units": features.shape[1],
        "never_active": float((features.max(dim=0).values <= 0).float().mean()),
        "saturated": saturated,
        "probabilities_mean": probabilities.mean(dim=0).tolist(),
        "probabilities_std": probabilities.std(dim=0).tolist(),
        "value_mean": float(values.mean()),
        "value_std": float(values.std()),
    }


def report(facts: dict[str, Any]) -> str:
    """``network_facts`` as text: feature units never active, saturated units, the heads' spread over the states."""
    return "\n".join(
        [
            f"{facts['model']} on {facts['n_states']} states of a random policy ({facts['env_id']}):",
            f"feature units never active: {facts['never_active']:.0%} of {facts['feature_units']}",
            *(
                f"{name} hidden layers, units saturated in every state: {', '.join(f'{f:.0%}' for f in fractions)}"
                for name, fractions in facts["saturated"].items()
            ),
            f"action probabilities, mean: {np.round(facts['probabilities_mean'], 3)}",
            f"action probabilities, std over states: {np.round(facts['probabilities_std'], 4)}",
            f"value: mean {facts['value_mean']:.4f}, std over states {facts['value_std']:.6f}",
        ]
    )


def dead_network(model_path: str, env_id: str, n_states: int = 3000) -> str:
    """The report of ``model_path``'s network on ``n_states`` states of a random policy on ``env_id``."""
    return report(network_facts(model_path, env_id, n_states))


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a run's final_model.zip")
    parser.add_argument("env_id", help="the MinAtar id it was trained on, e.g. MinAtar/Seaquest-v1")
    parser.add_argument("--states", type=int, default=3000)
    parser.add_argument("--json", type=Path, help="also write the facts to this file (a run's alive record)")
    args = parser.parse_args(argv)
    facts = network_facts(args.model, args.env_id, args.states)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(facts, indent=1) + "\n")
    text = report(facts)
    print(text)
    return text


if __name__ == "__main__":
    main()
