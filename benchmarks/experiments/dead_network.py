"""
Whether a trained MinAtar model's network has died (``minatar_k6_rule.md``, stage 1). On states from a random policy:
how many of its feature units (ReLU) are never active, how many units of the heads' hidden layers (``mlp_extractor``,
tanh) are saturated (``|tanh| > 0.999`` in every state), and how much its action probabilities and value vary over the
states. A dead network gives one action distribution and one value in every state (standard deviation 0), so a
deterministic evaluation plays one fixed action, while its entropy stays wherever its state-independent outputs leave
it. The model is a run's ``final_model.zip`` in its working folder (never committed)::

    RUN=benchmarks/results/keep_learning/minatar_k6/tmp/learning/trpo_plus/MinAtar-Seaquest-v1/seed100
    python -m benchmarks.experiments.dead_network $RUN/final_model.zip MinAtar/Seaquest-v1
"""

import argparse

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


def dead_network(model_path: str, env_id: str, n_states: int = 3000) -> str:
    """The report: feature units never active, action probabilities' and value's spread over the states."""
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
    never_active = float((features.max(dim=0).values <= 0).float().mean())
    return "\n".join(
        [
            f"{model_path} on {n_states} states of a random policy ({env_id}):",
            f"feature units never active: {never_active:.0%} of {features.shape[1]}",
            *(
                f"{name} hidden layers, units saturated in every state: {', '.join(f'{f:.0%}' for f in fractions)}"
                for name, fractions in saturated.items()
            ),
            f"action probabilities, mean: {np.round(probabilities.mean(dim=0).numpy(), 3)}",
            f"action probabilities, std over states: {np.round(probabilities.std(dim=0).numpy(), 4)}",
            f"value: mean {values.mean():.4f}, std over states {values.std():.6f}",
        ]
    )


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a run's final_model.zip")
    parser.add_argument("env_id", help="the MinAtar id it was trained on, e.g. MinAtar/Seaquest-v1")
    parser.add_argument("--states", type=int, default=3000)
    args = parser.parse_args(argv)
    text = dead_network(args.model, args.env_id, args.states)
    print(text)
    return text


if __name__ == "__main__":
    main()
