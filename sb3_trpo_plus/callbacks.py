"""Callbacks that act on the per-update diagnostics of :class:`~sb3_trpo_plus.TRPOPlus`."""

import math
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any

from stable_baselines3.common.callbacks import BaseCallback

if TYPE_CHECKING:
    from sb3_trpo_plus.diagnostics import UpdateDiagnostics
    from sb3_trpo_plus.trpo_plus import TRPOPlus


def _check_real(name: str, value: Any) -> float:
    """Return ``value`` as a finite float, or raise ``ValueError`` naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"`{name}` must be a finite number, got {value!r}")
    return float(value)


def _check_int(name: str, value: Any, minimum: int) -> int:
    """Return ``value`` as an int, or raise ``ValueError`` naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}, got {value!r}")
    return int(value)


class _UpdateCallback(BaseCallback):
    """
    Base of the callbacks that react once per TRPOPlus policy update to ``model.last_update``: at the start of the
    next rollout (SB3 starts one after each ``train()``), and at the end of training for the last update. An update
    is handled once however many rollout starts or callbacks see it, and the update a loaded model carries from
    before its save is never handled.

    :param verbose: Verbosity level: 0 for no output, 1 for a message at each change
    """

    model: "TRPOPlus"
    #: Attributes a model must have (a TRPOPlus model has them all)
    required_attributes: tuple[str, ...] = ("last_update",)

    def __init__(self, verbose: int = 0):
        super().__init__(verbose=verbose)
        # ``n_updates`` of the last diagnostics this callback reacted to
        self._last_seen_update: int | None = None

    def _init_callback(self) -> None:
        for attribute in self.required_attributes:
            if not hasattr(self.model, attribute):
                raise TypeError(
                    f"{type(self).__name__} needs a TRPOPlus model (missing `model.{attribute}`), "
                    f"got {type(self.model).__name__}"
                )
        self._check_model()
        # Only react to updates done from now on (a loaded model may carry the diagnostics of an old update)
        last_update = self.model.last_update
        self._last_seen_update = None if last_update is None else last_update.n_updates

    def _check_model(self) -> None:
        """Raise a ``ValueError`` when the model's settings do not fit the callback's (called when training starts)."""

    def _on_rollout_start(self) -> None:
        # SB3 starts a rollout after each call to ``train()``: the diagnostics of that update are ready
        self._check_for_new_update()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        # The last update of ``learn()`` is not followed by a rollout
        self._check_for_new_update()

    def _check_for_new_update(self) -> None:
        diagnostics = self.model.last_update
        if diagnostics is None or diagnostics.n_updates == self._last_seen_update:
            return
        self._last_seen_update = diagnostics.n_updates
        self._on_update(diagnostics)

    def _on_update(self, diagnostics: "UpdateDiagnostics") -> bool:
        """
        React to one policy update.

        :param diagnostics: Diagnostics of the update
        :return: Whether a setting of the model was changed
        """
        raise NotImplementedError


class AdaptiveTrustRegionCallback(_UpdateCallback):
    """
    Adaptive trust region for TRPOPlus: shrink the KL radius and raise the conjugate-gradient damping
    when the line search keeps failing, and (optionally) move them back once full steps are accepted again.

    The callback reads ``model.last_update`` (an :class:`~sb3_trpo_plus.diagnostics.UpdateDiagnostics`),
    reacts once per policy update (at the start of the next rollout, and at the end of training for the
    last update) and writes the new values to ``model.target_kl`` and ``model.cg_damping``.
    Those values live in the model, so they are saved by ``model.save()`` and restored by ``load()``.

    After ``ls_fail_threshold`` consecutive failed line searches:

    - ``target_kl <- max(min_max_kl, target_kl * max_kl_decay)``
    - ``cg_damping <- min(max_damping, cg_damping * damping_growth)``

    and the count starts again from zero. A successful line search resets the count. An update skipped as a whole
    (``diagnostics.skipped``: the rollout held NaN or inf, or an unusable setting reached the update) is not a line
    search: it changes neither the counts nor the trust region.

    With ``recovery_window`` set, after ``recovery_window`` consecutive updates whose full natural-gradient
    step was accepted at the first try (step fraction 1.0), the inverse move is made, never past the values
    the model was built with (``model.initial_target_kl``, ``model.initial_cg_damping``):

    - ``target_kl <- min(initial_target_kl, target_kl / max_kl_decay)``
    - ``cg_damping <- max(initial_cg_damping, cg_damping / damping_growth)``

    :param ls_fail_threshold: Number of consecutive failed line searches that triggers a shrink (>= 1)
    :param max_kl_decay: Factor in (0, 1) applied to ``target_kl`` at each shrink
    :param min_max_kl: Lower bound for ``target_kl`` (> 0, and not above the model's ``target_kl``)
    :param damping_growth: Factor > 1 applied to ``cg_damping`` at each shrink
    :param max_damping: Upper bound for ``cg_damping`` (> 0, and not below the model's ``cg_damping``)
    :param recovery_window: Number of consecutive full-step updates after which the trust region moves one step
        back toward its initial values. ``None`` (default) disables the recovery.
    :param verbose: Verbosity level: 0 for no output, 1 for a message at each change of the trust region
    """

    required_attributes = ("last_update", "target_kl", "cg_damping", "initial_target_kl", "initial_cg_damping")

    def __init__(
        self,
        ls_fail_threshold: int = 20,
        max_kl_decay: float = 0.8,
        min_max_kl: float = 0.005,
        damping_growth: float = 1.2,
        max_damping: float = 0.2,
        recovery_window: int | None = None,
        verbose: int = 0,
    ):
        super().__init__(verbose=verbose)
        self.ls_fail_threshold = _check_int("ls_fail_threshold", ls_fail_threshold, minimum=1)
        self.max_kl_decay = _check_real("max_kl_decay", max_kl_decay)
        if not 0.0 < self.max_kl_decay < 1.0:
            raise ValueError(f"`max_kl_decay` must be in (0, 1), got {max_kl_decay!r}")
        self.min_max_kl = _check_real("min_max_kl", min_max_kl)
        if self.min_max_kl <= 0.0:
            raise ValueError(f"`min_max_kl` must be > 0, got {min_max_kl!r}")
        self.damping_growth = _check_real("damping_growth", damping_growth)
        if self.damping_growth <= 1.0:
            raise ValueError(f"`damping_growth` must be > 1, got {damping_growth!r}")
        self.max_damping = _check_real("max_damping", max_damping)
        if self.max_damping <= 0.0:
            raise ValueError(f"`max_damping` must be > 0, got {max_damping!r}")
        self.recovery_window = None if recovery_window is None else _check_int("recovery_window", recovery_window, minimum=1)

        # Consecutive failed line searches since the last shrink or success
        self.n_consecutive_failures = 0
        # Consecutive updates whose full step was accepted at once (only used with a recovery window)
        self.n_consecutive_full_steps = 0
        # Number of times the trust region was shrunk / moved back
        self.n_shrinks = 0
        self.n_recoveries = 0

    def _check_model(self) -> None:
        if callable(self.model.target_kl):
            raise ValueError(
                "AdaptiveTrustRegionCallback adapts a constant target_kl, but the model's target_kl is a schedule: "
                "give the model a number, or leave the callback out (the schedule already sets the radius)"
            )
        if self.min_max_kl > self.model.target_kl:
            raise ValueError(
                f"`min_max_kl` ({self.min_max_kl}) must not be above the model's current target_kl ({self.model.target_kl})"
            )
        if self.max_damping < self.model.cg_damping:
            raise ValueError(
                f"`max_damping` ({self.max_damping}) must not be below the model's current "
                f"cg_damping ({self.model.cg_damping})"
            )

    def _on_update(self, diagnostics: "UpdateDiagnostics") -> bool:
        """
        React to one policy update.

        :param diagnostics: Diagnostics of the update
        :return: Whether ``target_kl`` or ``cg_damping`` was changed
        """
        before = (self.model.target_kl, self.model.cg_damping)
        shrink, recover = False, False
        if diagnostics.skipped:
            pass  # bad data or an unusable setting says nothing about the trust region
        elif not diagnostics.line_search_success:
            self.n_consecutive_failures += 1
            self.n_consecutive_full_steps = 0
            if self.n_consecutive_failures >= self.ls_fail_threshold:
                self.n_consecutive_failures = 0
                shrink = True
                self._shrink()
        else:
            self.n_consecutive_failures = 0
            if self.recovery_window is not None:
                if diagnostics.is_full_step:
                    self.n_consecutive_full_steps += 1
                else:
                    self.n_consecutive_full_steps = 0
                if self.n_consecutive_full_steps >= self.recovery_window:
                    self.n_consecutive_full_steps = 0
                    recover = self._recover()

        self.logger.record("trust_region/consecutive_failures", self.n_consecutive_failures)
        self.logger.record("trust_region/shrink", float(shrink))
        self.logger.record("trust_region/n_shrinks", self.n_shrinks)
        if self.recovery_window is not None:
            self.logger.record("trust_region/consecutive_full_steps", self.n_consecutive_full_steps)
            self.logger.record("trust_region/recover", float(recover))
            self.logger.record("trust_region/n_recoveries", self.n_recoveries)
        # Values the next update will use (``train/target_kl`` and ``train/cg_damping`` are those of this update)
        self.logger.record("trust_region/target_kl", self.model.target_kl)
        self.logger.record("trust_region/cg_damping", self.model.cg_damping)
        return (self.model.target_kl, self.model.cg_damping) != before

    def _set_trust_region(self, target_kl: float, cg_damping: float) -> None:
        """
        Write both values to the model, or neither: a value that is not a finite number (> 0 for ``target_kl``,
        >= 0 for ``cg_damping``) raises a ``ValueError`` before anything is written.

        :param target_kl: the new radius
        :param cg_damping: the new damping
        """
        try:
            self.model.set_trust_region(target_kl, cg_damping)
        except ValueError as error:
            raise ValueError(f"{type(self).__name__} computed {error}; the model was left unchanged") from error

    def _shrink(self) -> None:
        old_target_kl, old_cg_damping = self.model.target_kl, self.model.cg_damping
        self._set_trust_region(
            max(self.min_max_kl, old_target_kl * self.max_kl_decay),
            min(self.max_damping, old_cg_damping * self.damping_growth),
        )
        self.n_shrinks += 1
        if self.verbose >= 1:
            at_bounds = (
                " (both at their bounds)"
                if self.model.target_kl == self.min_max_kl and self.model.cg_damping == self.max_damping
                else ""
            )
            print(
                f"{type(self).__name__}: {self.ls_fail_threshold} failed line searches in a row (update "
                f"{self._last_seen_update}): target_kl {old_target_kl:.4g} -> {self.model.target_kl:.4g}, "
                f"cg_damping {old_cg_damping:.4g} -> {self.model.cg_damping:.4g}{at_bounds}"
            )

    def _recover(self) -> bool:
        old_target_kl, old_cg_damping = self.model.target_kl, self.model.cg_damping
        initial_target_kl, initial_cg_damping = self.model.initial_target_kl, self.model.initial_cg_damping
        # Move toward the initial values, never past them (and never away from them)
        target_kl, cg_damping = old_target_kl, old_cg_damping
        if old_target_kl < initial_target_kl:
            target_kl = min(initial_target_kl, old_target_kl / self.max_kl_decay)
        if old_cg_damping > initial_cg_damping:
            cg_damping = max(initial_cg_damping, old_cg_damping / self.damping_growth)
        self._set_trust_region(target_kl, cg_damping)
        changed = (self.model.target_kl, self.model.cg_damping) != (old_target_kl, old_cg_damping)
        if changed:
            self.n_recoveries += 1
            if self.verbose >= 1:
                print(
                    f"{type(self).__name__}: {self.recovery_window} full steps in a row (update {self._last_seen_update}): "
                    f"target_kl {old_target_kl:.4g} -> {self.model.target_kl:.4g}, "
                    f"cg_damping {old_cg_damping:.4g} -> {self.model.cg_damping:.4g}"
                )
        return changed
