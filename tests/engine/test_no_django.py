"""The engine must stay framework-free: no module under evaluation/engine imports Django."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "evaluation" / "engine"


def test_no_engine_module_mentions_django_in_an_import():
    offenders = []
    for path in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "django"]
    assert offenders == []


def test_importing_every_engine_module_loads_no_django():
    modules = [f"evaluation.engine.{p.stem}" for p in ENGINE.glob("*.py") if p.stem not in ("__init__", "__main__")]
    code = ("import sys, importlib\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "import evaluation.engine\n"
            "assert not any(n == 'django' or n.startswith('django.') for n in sys.modules), 'django imported'\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
