"""Start-up costs of the engine: what importing it and running the command line load.

Each check runs in a fresh interpreter, since the test process has loaded everything already.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "trec_eval"


def fresh_python(code: str, **env: str) -> dict:
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_importing_the_package_or_its_errors_loads_neither_numpy_nor_pyarrow():
    loaded = fresh_python(
        "import json, sys\n"
        "import evaluation.engine\n"
        "from evaluation.engine import EngineInputError, UnknownMeasureError\n"
        "from evaluation.engine.errors import show\n"
        "print(json.dumps(sorted(m for m in ('numpy', 'pyarrow', 'pandas') if m in sys.modules)))\n")
    assert loaded == []


def test_the_package_names_load_their_module_on_first_use():
    names = fresh_python(
        "import json, evaluation.engine as engine\n"
        "import evaluation.engine.scoring\n"
        "from evaluation.engine import evaluate, read_run, Run, significance\n"
        "print(json.dumps([callable(evaluate), evaluate.__module__, Run.__module__, significance.__name__,\n"
        "                  all(hasattr(engine, n) for n in engine.__all__)]))\n")
    assert names == [True, "evaluation.engine.scoring", "evaluation.engine.data", "evaluation.engine.significance",
                     True]


RUN_CLI = (
    "import json, os, runpy, sys\n"
    f"sys.argv = ['evaluation.engine', '-m', 'map', {str(DATA / 'qrels.test')!r}, {str(DATA / 'results.test')!r}]\n"
    "out = sys.stdout\n"
    "sys.stdout = open(os.devnull, 'w')\n"
    "try:\n"
    "    runpy.run_module('evaluation.engine', run_name='__main__', alter_sys=True)\n"
    "except SystemExit as exit:\n"
    "    status = exit.code\n"
    "out.write(json.dumps([status, 'numpy' in sys.modules, os.environ['OPENBLAS_NUM_THREADS']]) + '\\n')\n"
)


def test_the_command_line_evaluates_without_an_openblas_thread_pool():
    assert fresh_python(RUN_CLI) == [0, True, "1"]


def test_the_command_line_keeps_the_callers_openblas_setting():
    assert fresh_python(RUN_CLI, OPENBLAS_NUM_THREADS="2")[-1] == "2"
