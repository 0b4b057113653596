"""
Train TRPOPlus on a small task and print its evaluation: ``python -m sb3_trpo_plus.quickstart``.
"""

import argparse
import time

from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_trpo_plus import TRPOPlus


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", default="CartPole-v1", help="Gymnasium environment id")
    parser.add_argument("--timesteps", type=int, default=50_000, help="training budget (environment steps)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-eval-episodes", type=int, default=20)
    args = parser.parse_args(argv)

    env = make_vec_env(args.env, n_envs=1, seed=args.seed)
    model = TRPOPlus("MlpPolicy", env, ent_coef=0.01, ent_coef_decay=0.99, seed=args.seed, verbose=0)
    start = time.perf_counter()
    model.learn(args.timesteps)
    elapsed = time.perf_counter() - start
    eval_env = make_vec_env(args.env, n_envs=1, seed=args.seed + 1000)
    mean_reward, std_reward = evaluate_policy(model, eval_env, n_eval_episodes=args.n_eval_episodes, deterministic=True)
    last = model.last_update
    print(f"TRPOPlus on {args.env}: {args.timesteps} steps in {elapsed:.1f}s ({args.timesteps / elapsed:.0f} steps/s)")
    print(f"evaluation over {args.n_eval_episodes} episodes: mean reward {mean_reward:.1f} +/- {std_reward:.1f}")
    if last is not None:
        print(
            f"last update #{last.n_updates}: line search {'accepted' if last.line_search_success else 'failed'}, "
            f"KL {last.kl:.4f}, step fraction {last.step_fraction:.3f}, ent_coef {last.ent_coef:.4f}"
        )


if __name__ == "__main__":
    main()
