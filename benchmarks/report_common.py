"""
The shared pieces of the report's text (``benchmarks.report``): the template's blocks and how they are filled, the
number formats (``Interval``, ``Shown``), the targets (``Target``: rules checked against the results), the words of
the computed sentences, and the provenance of a measurement (its command and machine).
"""

import functools
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

TEMPLATE_PATH = Path(__file__).resolve().parent / "report_template.md"
#: A cell of an algorithm without runs
NOT_RUN = "not run yet"
#: Words of the computed sentences
VERDICT = {True: "met", False: "missed"}
OVERLAP = {True: "overlap", False: "do not overlap"}


# --- the template --------------------------------------------------------------------------------------------------

_BLOCK = re.compile(r"^<!-- block: ([\w.-]+) -->$", re.MULTILINE)


@functools.cache
def template_blocks(path: Path = TEMPLATE_PATH) -> dict[str, str]:
    """``{name: text}`` of the template's blocks (from each marker to the next; surrounding blank lines dropped)."""
    parts = _BLOCK.split(path.read_text())
    return {name: body.strip("\n") for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def fill(block: str, **fields: Any) -> str:
    """The template's ``block`` with its ``{fields}`` filled in."""
    blocks = template_blocks()
    if block not in blocks:
        raise KeyError(f"{TEMPLATE_PATH} has no block {block!r}")
    return blocks[block].format(**fields)


def fill_each(block: str, items: Iterable[dict[str, Any]], separator: str = "\n") -> str:
    """``block`` filled once per item, joined (table rows, list items)."""
    return separator.join(fill(block, **item) for item in items)


def paragraphs(*parts: str) -> str:
    """The non-empty parts as markdown paragraphs (a blank line between them)."""
    return "\n\n".join(part for part in parts if part)


def sentences(*parts: str) -> str:
    """The non-empty parts as one paragraph."""
    return " ".join(part for part in parts if part)


#: Words for ``Interval.place``: where an estimate sits against a reference's interval
PLACE = {1: "ahead", 0: "level", -1: "behind"}


class Interval(NamedTuple):
    """A point estimate and its 95% interval; formatted as ``point [low, high]`` (``{iqm:.1f}``)."""

    point: float
    low: float
    high: float

    def __format__(self, spec: str) -> str:
        return f"{self.point:{spec}} [{self.low:{spec}}, {self.high:{spec}}]"

    def overlaps(self, other: "Interval") -> bool:
        return bool(self.low <= other.high and other.low <= self.high)

    def place(self, reference: "Interval") -> int:
        """1 when this point estimate is above the reference's interval, -1 below it, 0 inside it."""
        return 1 if self.point > reference.high else -1 if self.point < reference.low else 0

    def ratio_to(self, other: "Interval") -> float:
        """The ratio of the point estimates (NaN against 0)."""
        return self.point / other.point if other.point else float("nan")


@dataclass(frozen=True)
class Shown:
    """A number that may be missing: ``n/a`` then, and with a ``g`` format no decimals from 1,000 on."""

    value: float | None

    def __format__(self, spec: str) -> str:
        value = self.value
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "n/a"
        if spec.endswith("g") and abs(value) >= 1000:
            return f"{value:,.0f}"
        return format(value, spec)


# --- targets: rules checked against the results ---------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """
    One of the project's targets: ``what`` is met when ``met(value(data))``; ``evidence`` shows the measured value
    (``{value}`` and the data's fields). A ``value`` of ``None`` (not measured) leaves the target out.
    """

    what: str
    value: Callable[[dict[str, Any]], float | None]
    met: Callable[[float], bool]
    evidence: str


def check_targets(targets: Iterable[Target], data: dict[str, Any]) -> str:
    checks = []
    for target in targets:
        value = target.value(data)
        if value is not None:
            evidence = target.evidence.format(**data, value=value)
            checks.append(fill("target", what=target.what, verdict=VERDICT[bool(target.met(value))], evidence=evidence))
    return "; ".join(checks)


# --- reading the results --------------------------------------------------------------------------------------------


def read_json(path: Path) -> Any:
    """The JSON file at ``path``, ``None`` when there is none."""
    return json.loads(path.read_text()) if path.is_file() else None


def machine_text(machine: dict[str, Any] | None, when: str = "at start") -> str:
    if not machine:
        return fill("machine.missing")
    load = machine.get("load_average")
    return fill(
        "machine",
        cpu_model=machine.get("cpu_model"),
        cores=machine.get("cpu_affinity") or machine.get("cpu_count"),
        torch=machine.get("torch"),
        threads=machine.get("torch_threads"),
        when=when,
        load=load[0] if load else "n/a",
        date=machine.get("date"),
    )


def provenance(command: str, machine: dict[str, Any] | None, load_after: Any) -> str:
    """The command and the machine of a measurement."""
    return fill("provenance", command=command, machine=machine_text(machine), load_after=load_after)


def image_link(image: Path, docs_dir: Path) -> str:
    """The link to ``image`` from a page in ``docs_dir``."""
    return image.relative_to(docs_dir).as_posix()
