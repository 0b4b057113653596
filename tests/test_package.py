"""
The package as it would be published: the sdist and the wheel built from the checkout (``python -m build``: the wheel
is built from the sdist), checked by ``twine check --strict``, then the wheel installed with its ``zoo`` extra into a
fresh virtual environment, where the quick start and ``python -m rl_zoo3.train --algo trpo_plus`` run.

Needs ``build`` and ``twine`` (the ``tests`` extra) and access to the package index (pip's cache makes it fast).
Deselect with ``-m "not package"``.
"""

import email
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from test_docs import python_blocks, run_example, tiny

pytestmark = pytest.mark.package

REPO_ROOT = Path(__file__).resolve().parent.parent
#: Files the sdist must hold for its tests and its documentation
SDIST_FILES = [
    "LICENSE",
    "README.md",
    "CHANGELOG.md",
    "constraints.txt",
    "MANIFEST.in",
    "_sb3_trpo_plus_zoo_hook.py",
    "setup.py",
    "hyperparams/trpo_plus.yml",
    "sb3_trpo_plus/hyperparams/trpo_plus.yml",
    "docs/conf.py",
    "docs/index.md",
    "docs/trpo_plus.md",
    "docs/images/diagnostics.png",
    "tests/conftest.py",
    "tests/test_docs.py",
    "tests/test_zoo.py",
    "benchmarks/report.py",
    "benchmarks/report_template.md",
    "benchmarks/hyperparams.yml",
]

#: One thread, no evaluation, a fixed seed, logs in the working folder
ZOO_FLAGS = ["--eval-freq", "-1", "--num-threads", "1", "--seed", "0", "-f", "logs"]


def _run(cmd: list[str], cwd: Path, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    env.pop("PYTHONPATH", None)  # the fresh environment must import the installed wheel, nothing of the checkout
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-5000:]}\n{result.stderr[-5000:]}"
    return result


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> tuple[Path, Path, str]:
    """The sdist and the wheel (built from the sdist), and the build's output."""
    pytest.importorskip("build")
    out = tmp_path_factory.mktemp("dist")
    result = _run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO_ROOT)], cwd=out)
    (sdist,) = out.glob("sb3_trpo_plus-*.tar.gz")
    (wheel,) = out.glob("sb3_trpo_plus-*-py3-none-any.whl")
    return sdist, wheel, result.stdout + result.stderr


def test_build_has_no_setuptools_warnings(dists):
    *_, log = dists
    warnings = [
        line
        for line in log.splitlines()
        # (byte-compiling is disabled when PYTHONDONTWRITEBYTECODE is set: the environment's choice, not the package's)
        if re.search(r"warning", line, re.IGNORECASE) and "byte-compiling is disabled" not in line
    ]
    assert not warnings, "\n".join(warnings)


def test_twine_check(dists):
    pytest.importorskip("twine")
    sdist, wheel, _ = dists
    result = _run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)], cwd=sdist.parent)
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_sdist_holds_tests_and_docs(dists):
    sdist, _, _ = dists
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    missing = [name for name in SDIST_FILES if name not in names]
    assert not missing, missing
    committed_images = {f"docs/images/{path.name}" for path in (REPO_ROOT / "docs" / "images").glob("*.png")}
    assert committed_images <= names
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    assert not any(name.startswith("benchmarks/results") for name in names)


def test_wheel_metadata(dists):
    _, wheel, _ = dists
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = email.message_from_bytes(archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))))
    assert "sb3_trpo_plus/hyperparams/trpo_plus.yml" in names
    assert "sb3_trpo_plus_zoo.pth" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert not any(name.startswith(("tests/", "benchmarks/", "docs/")) for name in names)
    assert metadata["License"] == "MIT"
    assert metadata.get_all("Project-URL")
    # Each extra is written once: the composite ones name the others
    requires = metadata.get_all("Requires-Dist")
    assert 'sb3-trpo-plus[atari]; extra == "zoo"' in requires
    assert sum("ale-py" in requirement for requirement in requires) == 1
    # The long description renders on a package index: no relative link, which would point nowhere there
    description = metadata.get_payload()
    assert "TRPOPlus" in description
    targets = re.findall(r"\]\(([^)\s]+)\)", description)
    assert targets
    relative = [target for target in targets if not re.match(r"^https?://", target)]
    assert not relative, relative


def test_wheel_installs_and_runs(dists, tmp_path):
    """A fresh virtual environment, the wheel with its zoo extra: the quick start and the zoo's train command."""
    _, wheel, _ = dists
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    python = str(venv / "bin" / "python")
    _run(
        [python, "-m", "pip", "install", "-q", "-c", str(REPO_ROOT / "constraints.txt"), f"{wheel}[zoo]"],
        cwd=tmp_path,
        timeout=900,
    )
    work = tmp_path / "work"  # outside the checkout: only the installed package can be imported
    work.mkdir()
    where = _run([python, "-c", "import sb3_trpo_plus; print(sb3_trpo_plus.__file__)"], cwd=work).stdout.strip()
    assert Path(where).is_relative_to(venv), where

    result = _run([python, "-m", "sb3_trpo_plus.quickstart", "--timesteps", "2048", "--n-eval-episodes", "2"], cwd=work)
    assert "evaluation over 2 episodes" in result.stdout, result.stdout

    # The README's quick start, as written but for its budget
    (quick_start,) = python_blocks(REPO_ROOT / "README.md")[:1]
    result = run_example(tiny(quick_start), work, python=python)
    assert result.returncode == 0, result.stderr
    assert "evaluation over 20 episodes" in result.stdout, result.stdout

    _run(
        [python, "-m", "rl_zoo3.train", "--algo", "trpo_plus", "--env", "CartPole-v1", "-n", "1000", *ZOO_FLAGS],
        cwd=work,
    )
    assert (work / "logs" / "trpo_plus" / "CartPole-v1_1" / "CartPole-v1.zip").is_file()
