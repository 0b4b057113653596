import pytest
import torch as th


@pytest.fixture(autouse=True)
def _single_thread():
    # CI machines have 2 cores and pytest-xdist runs 2 workers: one torch thread each
    th.set_num_threads(1)
