import pytest
import torch as th


@pytest.fixture(autouse=True)
def _single_thread():
    # CI machines have 2 cores and pytest-xdist runs 2 workers: one torch thread each
    th.set_num_threads(1)


@pytest.fixture(autouse=True, scope="session")
def _sb3_logdir(tmp_path_factory):
    # SB3's default logger makes a folder per run (``SB3-<date>`` in the system temp dir): keep them in pytest's
    # temporary directory instead (subprocesses inherit the variable)
    import os

    previous = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3_logs"))
    yield
    if previous is None:
        os.environ.pop("SB3_LOGDIR", None)
    else:
        os.environ["SB3_LOGDIR"] = previous
