"""`pip install .` into a clean virtualenv ships schema.sql inside the wheel and `mkt init` works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.engine_neutral]  # touches no database: run once
REPO = Path(__file__).resolve().parents[2]


def test_wheel_install_in_clean_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(REPO)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    site = subprocess.run([str(python), "-c", "import marketing_cli, os; print(os.path.dirname(marketing_cli.__file__))"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, check=True).stdout.strip()
    assert str(REPO) not in site  # a real install, not the source tree
    assert (Path(site) / "schema.sql").is_file()

    db = tmp_path / "from-wheel.db"
    out = subprocess.run([str(venv / "bin" / "mkt"), "--db", str(db), "init", "--name", "Wheel", "--json"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["workspace"]["name"] == "Wheel"
    module = subprocess.run([str(python), "-m", "marketing_cli", "--db", str(db), "workspace", "show", "--json"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert module.returncode == 0 and json.loads(module.stdout)["workspace"]["name"] == "Wheel"
    # The /docs renderer is vendored inside the package, and `mkt openapi` works from the wheel.
    assert (Path(site) / "api" / "static" / "redoc.standalone.js").is_file()
    document = subprocess.run([str(venv / "bin" / "mkt"), "openapi"], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120)
    assert document.returncode == 0 and json.loads(document.stdout)["openapi"].startswith("3.1.")
    # The SMS quiet-hours rules are data files inside the package; the wheel reads its own.
    assert (Path(site) / "services" / "sms" / "quiet_hours.csv").is_file()
    assert (Path(site) / "services" / "sms" / "regions.csv").is_file()
    built_in = {k: v for k, v in env.items() if k != "MKT_SMS_QUIET_HOURS"}
    shown = subprocess.run([str(venv / "bin" / "mkt"), "--db", str(db), "sms", "quiet-hours", "show", "--json"],
                           capture_output=True, text=True, env=built_in, cwd=tmp_path, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["table"] == "built-in" and json.loads(shown.stdout)["rules"]
