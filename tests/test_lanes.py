"""benchmarks/lanes.sh, the lane loop behind the Atari and MuJoCo campaigns: every run once, a held run left alone."""

import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path

LANES = Path(__file__).resolve().parents[1] / "benchmarks" / "lanes.sh"

# A campaign of N runs named r0..r{N-1}: each run logs "lane run" to $ROOT/log, sleeps $NAP and writes its record
CAMPAIGN = """
set -u
source "{lanes}"
lane=$1
queue() {{ for i in $(seq 0 $((N - 1))); do echo "r$i"; done; }}
record() {{ echo "$ROOT/records/$1.json"; }}
workdir() {{ echo "$ROOT/work/$1"; }}
run_one() {{
    echo "$lane $1" >> "$ROOT/log"
    sleep "$NAP"
    mkdir -p "$ROOT/records" && touch "$(record "$1")"
}}
case ${{2:-loop}} in
    loop) lane_loop ;;
    held) held "$3" && echo held || echo free ;;
esac
"""


def _campaign(tmp_path, n_runs, nap):
    script = tmp_path / "campaign.sh"
    script.write_text(CAMPAIGN.format(lanes=LANES))
    env = {**os.environ, "ROOT": str(tmp_path), "N": str(n_runs), "NAP": str(nap)}
    return script, env


def _taken(tmp_path):
    return sorted(line.split()[1] for line in (tmp_path / "log").read_text().splitlines())


def test_lanes_started_together_take_each_run_once(tmp_path):
    # Four lanes started in the same instant over twelve runs: no run is taken twice, none is left out, every lane stops
    script, env = _campaign(tmp_path, 12, 0.2)
    lanes = [
        subprocess.Popen(["bash", str(script), str(lane)], env=env, stdout=subprocess.PIPE, text=True) for lane in range(1, 5)
    ]
    outputs = [lane.communicate(timeout=60)[0] for lane in lanes]
    assert _taken(tmp_path) == sorted(f"r{i}" for i in range(12))
    assert all(output.rstrip().endswith("nothing left") for output in outputs)
    assert sorted(p.name for p in (tmp_path / "records").iterdir()) == sorted(f"r{i}.json" for i in range(12))


def test_a_held_run_is_left_to_its_holder_and_freed_when_it_dies(tmp_path):
    script, env = _campaign(tmp_path, 3, 0)

    def state(run):
        return subprocess.run(
            ["bash", str(script), "0", "held", str(tmp_path / "work" / run)], env=env, capture_output=True, text=True
        ).stdout.strip()

    # Another process holds r1 (as a lane does while its run is alive): the lane takes r0 and r2 only
    (tmp_path / "work").mkdir()
    with open(tmp_path / "work" / "r1.lane", "w") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        subprocess.run(["bash", str(script), "1"], env=env, check=True, capture_output=True, timeout=60)
        assert _taken(tmp_path) == ["r0", "r2"]
        assert state("r1") == "held"
    # Its holder gone, r1 is free again, and the next lane takes it
    assert state("r1") == "free"
    subprocess.run(["bash", str(script), "2"], env=env, check=True, capture_output=True, timeout=60)
    assert _taken(tmp_path) == ["r0", "r1", "r2"]


def test_a_killed_lane_leaves_no_stale_lock(tmp_path):
    # A lane killed (with its run) in the middle of a run: the run is neither finished nor held, so a new lane takes it
    script, env = _campaign(tmp_path, 1, 60)
    lane = subprocess.Popen(["bash", str(script), "1"], env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "log").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _taken(tmp_path) == ["r0"]
    os.killpg(lane.pid, signal.SIGKILL)
    lane.wait()
    env["NAP"] = "0"
    subprocess.run(["bash", str(script), "2"], env=env, check=True, capture_output=True, timeout=60)
    assert (tmp_path / "log").read_text().splitlines() == ["1 r0", "2 r0"]
