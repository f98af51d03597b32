"""The judges are pure logic: importing every module of the package loads no Django."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "judgments" / "judges"


def test_importing_every_judges_module_loads_no_django():
    modules = [f"judgments.judges.{path.stem}" for path in PACKAGE.glob("*.py") if path.stem != "__init__"]
    code = ("import sys, importlib\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "assert not [n for n in sys.modules if n == 'django' or n.startswith('django.')], 'django imported'\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert len(modules) >= 7
