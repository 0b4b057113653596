"""Per-update diagnostics of TRPOPlus, exposed so that callbacks never have to scrape the logger."""

import math
import warnings
from collections import deque
from dataclasses import dataclass

import numpy as np

#: Failure reasons of updates that did not run at all (no line search): the rollout held NaN or inf, a value the
#: update would use was unusable, or a ``target_kl`` schedule closed the trust region. They say nothing about the
#: trust region, which callbacks leave alone.
SKIPPED_UPDATE_REASONS = (
    "non_finite_input",
    "closed_trust_region",
    "invalid_target_kl",
    "invalid_cg_damping",
    "invalid_ent_coef",
    "invalid_learning_rate",
)


@dataclass(frozen=True)
class UpdateDiagnostics:
    """
    What one policy update did. ``model.last_update`` holds the latest one.

    :param n_updates: number of updates done, this one included (1 for the first)
    :param line_search_success: whether a step was accepted
    :param line_search_iters: candidate steps evaluated by the backtracking line search
        (0 when the update stopped before the search, e.g. on a non-finite gradient)
    :param step_fraction: accepted step length / full natural-gradient step length (0.0 on failure)
    :param kl: ``KL(old || new)`` of the accepted step, NaN on failure (a rejected update is never reported as 0)
    :param policy_objective: objective (surrogate + ent_coef * entropy) after the update (the old one on failure)
    :param improvement: new minus old objective (0.0 on failure)
    :param entropy: mean entropy of the policy on the batch before the update
    :param ent_coef: entropy coefficient used by this update
    :param target_kl: trust-region radius used by this update
    :param cg_damping: conjugate-gradient damping used by this update
    :param failure_reason: ``None`` on success, else one of ``"line_search_exhausted"``, ``"non_finite_gradient"``,
        ``"non_finite_direction"``, ``"non_positive_curvature"`` (the step failed), or, for an update skipped as a
        whole (see :attr:`skipped`), ``"non_finite_input"`` (the rollout held NaN or inf), ``"invalid_target_kl"``,
        ``"invalid_cg_damping"``, ``"invalid_ent_coef"``, ``"invalid_learning_rate"`` (an unusable value reached the
        update), ``"closed_trust_region"`` (a ``target_kl`` schedule reached 0)
    :param update_kl: ``KL(rollout's policy || policy after the update)`` on the batch: how far the whole update moved
        the policy. The accepted step's ``kl`` on success; on failure, what the update kept without a step: 0, or with
        ``critic_kl_fraction > 0`` the critic's kept change of the shared features extractor (``train/critic_kl``)
    """

    n_updates: int
    line_search_success: bool
    line_search_iters: int
    step_fraction: float
    kl: float
    policy_objective: float
    improvement: float
    entropy: float
    ent_coef: float
    target_kl: float
    cg_damping: float
    failure_reason: str | None = None
    update_kl: float = math.nan

    @property
    def skipped(self) -> bool:
        """True when the update did not run (bad data or an unusable setting): no weight changed, no line search ran."""
        return self.failure_reason in SKIPPED_UPDATE_REASONS

    @property
    def is_full_step(self) -> bool:
        """True when the full natural-gradient step was accepted at the first try."""
        return self.line_search_success and math.isclose(self.step_fraction, 1.0)


@dataclass(frozen=True)
class UpdateSettings:
    """
    The settings one policy update uses, read once at its start; :meth:`record` is the one place that builds its
    :class:`UpdateDiagnostics`.

    :param n_updates: the number of the update (1 for the first)
    :param ent_coef: its entropy coefficient (schedule, decay and floor applied)
    :param target_kl: its trust-region radius
    :param cg_damping: its conjugate-gradient damping
    """

    n_updates: int
    ent_coef: float
    target_kl: float
    cg_damping: float

    def record(
        self,
        *,
        failure_reason: str | None = None,
        line_search_iters: int = 0,
        step_fraction: float = 0.0,
        kl: float = math.nan,
        policy_objective: float = math.nan,
        improvement: float = 0.0,
        entropy: float = math.nan,
    ) -> UpdateDiagnostics:
        """
        The diagnostics of the update: a success when ``failure_reason`` is ``None``, else a failure, whose KL is NaN
        and whose step and improvement are 0 whatever is passed (its ``update_kl`` 0: the step moved nothing).

        :param failure_reason: see :class:`UpdateDiagnostics`
        :param line_search_iters: candidate steps evaluated
        :param step_fraction: accepted step length / full step length
        :param kl: ``KL(old || new)`` of the accepted step
        :param policy_objective: the objective after the update (the old one on failure, NaN if never computed)
        :param improvement: new minus old objective
        :param entropy: mean entropy on the batch before the update (NaN if never computed)
        """
        success = failure_reason is None
        return UpdateDiagnostics(
            n_updates=self.n_updates,
            line_search_success=success,
            line_search_iters=line_search_iters,
            step_fraction=step_fraction if success else 0.0,
            kl=kl if success else math.nan,
            policy_objective=policy_objective,
            improvement=improvement if success else 0.0,
            entropy=entropy,
            ent_coef=self.ent_coef,
            target_kl=self.target_kl,
            cg_damping=self.cg_damping,
            failure_reason=failure_reason,
            update_kl=kl if success else 0.0,
        )


#: Rolling line-search health: warn when the success rate or the mean accepted step fraction stays this low
LINE_SEARCH_MIN_SUCCESS_RATE = 0.3
LINE_SEARCH_MIN_STEP_FRACTION = 0.05


def line_search_health(
    window: deque[tuple[bool, float]], diagnostics: UpdateDiagnostics, warned: bool
) -> dict[str, float] | None:
    """
    Add an update's line search to the rolling ``window`` and judge its health: the success rate, the mean step
    fraction and whether they are too low (a ``RuntimeWarning`` when that starts, ``warned`` saying whether it was
    already so). A skipped update (bad data or an unusable setting) ran no line search and is not counted.

    :return: ``line_search_success_rate``, ``step_fraction_mean`` and ``line_search_warning`` (0 or 1), or ``None``
        while the window is empty
    """
    if not diagnostics.skipped:
        window.append((diagnostics.line_search_success, diagnostics.step_fraction))
    if not window:
        return None
    success_rate = float(np.mean([success for success, _ in window]))
    step_fraction_mean = float(np.mean([fraction for _, fraction in window]))
    # Judge the health only once the window holds enough updates to mean something
    enough = len(window) >= min(10, window.maxlen or 10)
    in_trouble = enough and (success_rate < LINE_SEARCH_MIN_SUCCESS_RATE or step_fraction_mean < LINE_SEARCH_MIN_STEP_FRACTION)
    if in_trouble and not warned:
        warnings.warn(
            f"TRPOPlus line search unhealthy over the last {len(window)} updates: "
            f"success rate {success_rate:.0%}, mean step fraction {step_fraction_mean:.3f}. "
            "The policy is barely changing. What usually helps: a smaller target_kl or a larger cg_damping "
            "(or sb3_trpo_plus.callbacks.AdaptiveTrustRegionCallback, which adapts both), more line-search "
            "iterations, or a lower ent_coef.",
            RuntimeWarning,
        )
    return {
        "line_search_success_rate": success_rate,
        "step_fraction_mean": step_fraction_mean,
        "line_search_warning": float(in_trouble),
    }
