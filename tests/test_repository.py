"""What the git repository tracks: no large files and no model checkpoints (a clone downloads every version of them)."""

import shutil
import subprocess
from pathlib import Path, PurePosixPath

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The largest file the repository may track (the biggest pictures under docs/images/ are about 0.4 MB)
MAX_FILE_BYTES = 2 * 1024 * 1024
#: Saved models and their VecNormalize statistics (``CheckpointCallback``: ``rl_model_*_steps.zip``,
#: ``rl_model_vecnormalize_*_steps.pkl``); torch state files
CHECKPOINT_SUFFIXES = (".zip", ".pkl", ".pt", ".pth")


def tracked_files() -> list[str]:
    """The files git tracks in this checkout, relative to its root; the test is skipped outside a git checkout."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    result = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0 or Path(result.stdout.strip()).resolve() != REPO_ROOT:
        pytest.skip("not a git checkout of the repository (an sdist, for example)")
    result = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "-z"], capture_output=True, text=True, check=True, timeout=60
    )
    return [path for path in result.stdout.split("\0") if path]


def is_checkpoint(path: str) -> bool:
    parts = PurePosixPath(path)
    return parts.suffix in CHECKPOINT_SUFFIXES or "checkpoints" in parts.parts[:-1]


def test_no_large_tracked_file():
    sizes = {}
    for path in tracked_files():
        file = REPO_ROOT / path
        # A tracked file deleted in the work tree (its removal not yet staged) has no size here
        if file.is_file() and not file.is_symlink():
            sizes[path] = file.stat().st_size
    too_large = sorted(f"{path} ({size / 1024**2:.1f} MB)" for path, size in sizes.items() if size > MAX_FILE_BYTES)
    assert not too_large, f"tracked files over {MAX_FILE_BYTES / 1024**2:.0f} MB: " + ", ".join(too_large)


def test_no_tracked_checkpoint_under_benchmarks():
    checkpoints = sorted(path for path in tracked_files() if path.startswith("benchmarks/") and is_checkpoint(path))
    assert not checkpoints, (
        "model checkpoints are tracked (runs keep them in benchmarks/results/tmp/, not committed): " + ", ".join(checkpoints)
    )


@pytest.mark.parametrize(
    "path, expected",
    [
        ("benchmarks/results/tmp/atari/qbert/ppo/seed0/checkpoints/rl_model_50000_steps.zip", True),
        ("benchmarks/results/x/checkpoints/rl_model_vecnormalize_50000_steps.pkl", True),
        ("benchmarks/results/x/checkpoints/notes.txt", True),
        ("benchmarks/results/atari/qbert/ppo/seed0.json", False),
        ("benchmarks/results/atari/atari5_rule.md", False),
    ],
)
def test_is_checkpoint(path, expected):
    assert is_checkpoint(path) is expected
