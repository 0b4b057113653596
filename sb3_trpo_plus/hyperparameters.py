"""
What the rl_zoo3 registration (:mod:`sb3_trpo_plus.zoo`) and the tuning tools (:mod:`sb3_trpo_plus.tuning`) both read:
the algorithm's name in the zoo, the shipped hyperparameter file, and the conversion of an Optuna trial's sampled
values into TRPOPlus's arguments.

This module uses nothing else of ``sb3_trpo_plus``, and imports rl_zoo3 only inside :func:`convert_trpo_plus_params`.
"""

from pathlib import Path
from typing import Any

ALGO_NAME = "trpo_plus"
#: The hyperparameters used when ``-conf`` is not given (shipped inside the package)
HYPERPARAMS_PATH = Path(__file__).parent / "hyperparams" / f"{ALGO_NAME}.yml"


def convert_trpo_plus_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """
    Turn sampled values (as stored in an Optuna study) into TRPOPlus keyword arguments; used by the sampler and by
    ``--storage ... --study-name ... --trial-id`` (rl_zoo3's ``HYPERPARAMS_CONVERTER``).

    :param sampled_params: the trial's parameters (``n_steps_pow``, ``one_minus_gamma``, ``min_ent_coef_fraction``, ...)
    :return: keyword arguments for ``TRPOPlus``
    """
    from rl_zoo3.hyperparams_opt import convert_onpolicy_params

    params = dict(sampled_params)
    if "min_ent_coef_fraction" in params:
        params["min_ent_coef"] = params.get("ent_coef", 0.0) * params.pop("min_ent_coef_fraction")
    return convert_onpolicy_params(params)
