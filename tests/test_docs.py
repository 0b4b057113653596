"""
The documentation site: the Sphinx build with warnings as errors (a broken cross-reference, link, image or autodoc
import fails it), and every Python example of the pages and of the README run on a tiny budget.

Deselect with ``-m "not docs"``.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docs

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"
#: The pages whose examples run: the README (its quick start is the site's getting-started example) and every page
PAGES = [REPO_ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
#: Environment steps given to every ``learn(...)`` call of an example: one rollout and one update
TINY_BUDGET = 64

FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
LEARN_BUDGET = re.compile(r"\.learn\(\s*[0-9_.eE]+")


def python_blocks(path: Path) -> list[str]:
    """The fenced ```python blocks of a markdown page, in order."""
    return FENCE.findall(path.read_text(encoding="utf-8"))


def tiny(code: str) -> str:
    """The example with every ``model.learn(N, ...)`` budget replaced by ``TINY_BUDGET``."""
    return LEARN_BUDGET.sub(f".learn({TINY_BUDGET}", code)


EXAMPLES = [
    pytest.param(path, index, id=f"{path.relative_to(REPO_ROOT)}:{index}")
    for path in PAGES
    for index in range(len(python_blocks(path)))
]


def run_example(code: str, cwd: Path, python: str = sys.executable, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``code`` as a script in ``cwd`` (one torch thread), returning the finished process."""
    script = cwd / "example.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run(
        [python, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_docs_build(tmp_path):
    """``make docs``: sphinx-build with warnings as errors (``-W --keep-going``: every warning is listed)."""
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    pytest.importorskip("sphinx_rtd_theme")
    out = tmp_path / "html"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)]
    result = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, f"sphinx-build failed:\n{result.stdout}\n{result.stderr}"
    for page in ("index", "installation", "getting_started", "trpo_plus", "callbacks", "diagnostics", "zoo",
                 "benchmarks", "architecture", "changelog"):  # fmt: skip
        assert (out / f"{page}.html").is_file(), page
    trpo_plus = (out / "trpo_plus.html").read_text(encoding="utf-8")
    # The parameters come from the class docstring (autodoc), every one of them
    for parameter in (
        "target_kl",
        "ent_coef_decay",
        "min_ent_coef",
        "entropy_floor",
        "cg_sub_sampling_factor",
        "critic_kl_fraction",
        "actor_trains_features",
        "critic_policy_coef",
        "critic_policy_clip_range",
    ):
        assert f"<strong>{parameter}</strong>" in trpo_plus, parameter
    # The README's quick start is the getting-started example
    assert "evaluate_policy" in (out / "getting_started.html").read_text(encoding="utf-8")


def test_every_argument_described_where_declared():
    """
    Each constructor argument has one ``:param`` in the class docstring, in the signature's order, of a sentence or
    two; and the Parameters section of trpo_plus.md says what each checked argument allows.
    """
    import inspect

    from sb3_trpo_plus import TRPOPlus, arguments

    described = re.findall(r":param (\w+):(.*?)(?=\n\s*:param|\Z)", TRPOPlus.__doc__, re.DOTALL)
    signature = list(inspect.signature(TRPOPlus.__init__).parameters)[1:]
    assert [name for name, _ in described] == signature
    for name, text in described:
        sentences = [part for part in re.split(r"(?<=[.)])\s+(?=[A-Z])", " ".join(text.split())) if part]
        assert 1 <= len(sentences) <= 3, (name, sentences)
    page = (DOCS / "trpo_plus.md").read_text(encoding="utf-8")
    parameters = page[page.index("## Parameters") : page.index("### Class reference")]
    for name in arguments.CHECKED_ARGUMENTS:
        assert f"`{name}`" in parameters, name


def test_every_page_is_in_the_site():
    """Each markdown page of docs/ is in a toctree (Sphinx would warn), and there are examples to run."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in DOCS.glob("*.md"):
        if page.stem != "index":
            assert re.search(rf"^{re.escape(page.stem)}$", index, re.MULTILINE), f"{page.name} is not in the toctree"
    assert len(EXAMPLES) >= 5


def test_tiny_budget_substitution():
    assert tiny("model.learn(1_000_000, callback=cb)") == f"model.learn({TINY_BUDGET}, callback=cb)"
    assert tiny("model.learn( 5e4)") == f"model.learn({TINY_BUDGET})"
    assert tiny("model.learn(total_timesteps=10)") == "model.learn(total_timesteps=10)"


@pytest.mark.parametrize("path, index", EXAMPLES)
def test_doc_example_runs(path, index, tmp_path):
    """The example, as written on the page but for its training budget, runs in an empty folder."""
    code = python_blocks(path)[index]
    if "ale_py" in code:
        pytest.importorskip("ale_py")
    result = run_example(tiny(code), tmp_path)
    assert result.returncode == 0, f"{path.name} example {index} failed:\n{tiny(code)}\n{result.stdout}\n{result.stderr}"
