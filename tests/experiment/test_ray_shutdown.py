"""After `ray.shutdown()` in a notebook, no process that the Ray backend started lives on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.ray
def test_no_ray_process_outlives_a_shutdown_from_a_notebook() -> None:
    root = str(HERE.parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(HERE / "ray_notebook_driver.py"), "20"],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["statuses"] == ["finished"] * 3
    assert found["started"] >= 2  # Ray's own processes were there to end
    assert found["alive"] == {}
