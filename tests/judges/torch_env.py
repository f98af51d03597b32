"""The torch side's tests run in `.venv-torch` (Python 3.11 with torch on the CPU and sentence-transformers;
`scripts/ensure-torch`, run by `make test`): the app's own virtualenv has no torch.

    result = run_in_torch_env(SCRIPT, {"texts": [...]})     # the script reads JSON on stdin, prints JSON last

Skips, saying why, where `.venv-torch` is missing or lacks its packages.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TORCH_PYTHON = ROOT / ".venv-torch" / "bin" / "python"


def torch_python() -> Path:
    if not TORCH_PYTHON.exists():
        pytest.skip(f"no {TORCH_PYTHON.relative_to(ROOT)}: `make test` builds it (scripts/ensure-torch, Python 3.11)")
    check = subprocess.run([str(TORCH_PYTHON), "-c", "import torch, sentence_transformers, tokenizers"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        pytest.skip(f".venv-torch lacks torch or sentence-transformers: {check.stderr.strip().splitlines()[-1:]}")
    return TORCH_PYTHON


def run_in_torch_env(script: str, given: dict, *, timeout: float = 600, env: dict | None = None,
                     args: list[str] = ()) -> dict:
    """Run `script` with .venv-torch's Python in the repository root (2 torch threads; the code under test must
    keep itself offline), `given` as JSON on its stdin, `args` after it, `env` added; its last line of output,
    parsed as JSON."""
    env = {**(env or {}), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "2",
           "HOME": os.environ.get("HOME", "/tmp"), "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
           "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    result = subprocess.run([str(torch_python()), "-c", script, *args], input=json.dumps(given), capture_output=True,
                            text=True, cwd=ROOT, env=env, timeout=timeout)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
