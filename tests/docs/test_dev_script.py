"""`./dev sh CMD` runs CMD in the caller's folder: a relative `--root lake` lands where the user is, not in the checkout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def test_dev_sh_runs_its_command_in_the_callers_folder(tmp_path):
    done = subprocess.run(
        [str(CHECKOUT / "dev"), "sh", "lakelog", "init", "--root", "readme-dev-root"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    in_checkout = CHECKOUT / "readme-dev-root"
    landed_in_checkout = in_checkout.exists()
    shutil.rmtree(in_checkout, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    assert not landed_in_checkout
    assert (tmp_path / "readme-dev-root").is_dir()
    where = subprocess.run([str(CHECKOUT / "dev"), "sh", "pwd"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert where.stdout.strip() == str(tmp_path)
