"""
Timing pieces shared by the benchmark scripts: the best of several timed calls, and the time split of an update
(marks at the boundaries of its parts, counted calls, wrappers that add them to methods and module functions without
changing library code).
"""

import contextlib
import functools
import gc
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

Wrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


def best_time(fn: Callable[[], object], repeats: int, warmup: bool = True, collect: bool = False) -> float:
    """
    Best wall-clock time of ``repeats`` calls of ``fn``, in seconds.

    :param warmup: one untimed call first
    :param collect: one garbage collection before the timed calls (not between them: a collection costs tens of
        milliseconds, more than a whole MLP solve)
    """
    if warmup:
        fn()
    if collect:
        gc.collect()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


class PhaseTimer:
    """
    Mixin of an SB3 algorithm that records, per update (``train()``), when each of its parts starts and ends
    (``mark``), and how many Fisher-vector products it computed and in how long (``fvp_calls``, ``fvp_s``).

    Put it before the algorithm class (``class Timed(PhaseTimer, TRPO)``); ``phase_log`` holds one dict of marks per
    update, which :func:`phase_split` turns into seconds per part with the subclass's ``spans``.
    """

    #: ``{part: (start mark, end mark)}``: the parts of an update, in the order of the split
    spans: ClassVar[dict[str, tuple[str, str]]] = {}
    phase_log: list[dict[str, float]]
    _marks: dict[str, float]

    def mark(self, name: str, once: bool = True) -> None:
        """The time of ``name`` in this update (the first one, unless ``once`` is false)."""
        if not (once and name in self._marks):
            self._marks[name] = time.perf_counter()

    def marked(self, part: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` between the marks ``<part>_start`` and ``<part>_end``."""
        self.mark(f"{part}_start")
        try:
            return fn(*args, **kwargs)
        finally:
            self.mark(f"{part}_end")

    def counted(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` counted as one Fisher-vector product, its time added to the update's."""
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self._marks["fvp_calls"] += 1
            self._marks["fvp_s"] += time.perf_counter() - start

    def train(self) -> None:
        self._marks = {"fvp_calls": 0.0, "fvp_s": 0.0}
        self.mark("train_start")
        super().train()  # type: ignore[misc]
        self.mark("train_end")
        self.phase_log.append(self._marks)


def marking(timer: PhaseTimer, part: str) -> Wrapper:
    """A wrapper that runs the wrapped function between the marks of ``part`` (see :meth:`PhaseTimer.marked`)."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return timer.marked(part, original, *args, **kwargs)

        return wrapper

    return wrap


def marking_start(timer: PhaseTimer, name: str, after: str | None = None) -> Wrapper:
    """
    A wrapper that marks ``name`` when the wrapped function is first called in an update.

    :param after: count only the calls made once this mark is set in the update (a function called in several
        parts of an update marks the start of the later part)
    """

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if after is None or after in timer._marks:
                timer.mark(name)
            return original(*args, **kwargs)

        return wrapper

    return wrap


def counting(timer: PhaseTimer) -> Wrapper:
    """A wrapper that counts the wrapped function's calls as Fisher-vector products (see :meth:`PhaseTimer.counted`)."""

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return timer.counted(original, *args, **kwargs)

        return wrapper

    return wrap


@contextlib.contextmanager
def patched(owner: Any, name: str, wrap: Wrapper) -> Iterator[None]:
    """``owner.name`` replaced by ``wrap(owner.name)`` inside the block (a module function, a class's method)."""
    original = getattr(owner, name)
    setattr(owner, name, wrap(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def span(marks: dict[str, float], start: str, end: str) -> float:
    """Seconds from mark ``start`` to mark ``end``, NaN when one of them was not reached."""
    return marks[end] - marks[start] if start in marks and end in marks else float("nan")


def phase_split(marks: dict[str, float], spans: dict[str, tuple[str, str]]) -> dict[str, float]:
    """Seconds of one update in each part of ``spans``, and its Fisher-vector products (count, mean seconds)."""
    split = {part: span(marks, start, end) for part, (start, end) in spans.items()}
    split["fvp_calls"] = marks["fvp_calls"]
    split["fvp_mean"] = marks["fvp_s"] / max(marks["fvp_calls"], 1.0)
    if "line_search_iters" in marks:
        split["line_search_iters"] = marks["line_search_iters"]
    return split
