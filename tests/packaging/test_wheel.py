"""The wheel (pyproject.toml) built from this repository, installed in a fresh virtual environment: its console
scripts answer as the docs say, `verdict-eval` prints trec_eval 10.0's output byte for byte (out.test; out.test.aq
from a run on standard input), and it holds the engine and the client only, under the package `verdict`.

One test: the build, the venv and the install of numpy, pyarrow and scipy (from pip's cache after the first run)
take most of its time."""

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from evaluation.engine import __version__

ROOT = Path(__file__).resolve().parents[2]
TREC = ROOT / "tests" / "data" / "trec_eval"
# What importing the installed engine must not bring in: Django, the app's packages, a checkout's package names.
FOREIGN = ("django", "judgments", "evaluation", "clients", "api", "config", "numpy", "pyarrow")


def source_tree(into: Path) -> Path:
    """pyproject.toml and the folders it maps into the wheel, copied: the build writes build/ and *.egg-info beside
    them, which must not happen in the checkout (a stale build/ would also carry deleted modules into a wheel)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    into.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", into / "pyproject.toml")
    for folder in config["tool"]["setuptools"]["package-dir"].values():
        shutil.copytree(ROOT / folder, into / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def run(*command, cwd: Path, **options) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], check=False, cwd=cwd, capture_output=True, timeout=600, **options)


def test_the_wheel_installs_the_engine_and_the_client_with_their_console_scripts(tmp_path):
    source = source_tree(tmp_path / "source")
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", tmp_path / "dist", source, cwd=tmp_path)
    assert built.returncode == 0, built.stderr.decode()[-3000:]
    (wheel,) = (tmp_path / "dist").glob("verdict_relevance-*.whl")
    assert wheel.name == f"verdict_relevance-{__version__}-py3-none-any.whl"

    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"verdict", f"verdict_relevance-{__version__}.dist-info"}
    modules = {name for name in names if name.endswith(".py")}
    assert "verdict/verdict.py" in modules and "verdict/engine/cli.py" in modules and "verdict/engine/trec_eval.py" in modules
    engine = ROOT / "evaluation" / "engine"
    assert modules == {"verdict/__init__.py", "verdict/verdict.py"} | {f"verdict/engine/{path.relative_to(engine)}"
                                                                       for path in engine.rglob("*.py")}
    metadata = zipfile.ZipFile(wheel).read(f"verdict_relevance-{__version__}.dist-info/METADATA").decode()
    requires = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    assert sorted(requires) == ["numpy>=2.0", "pyarrow>=16", 'rouge-score>=0.1.2; extra == "answers"', "scipy>=1.13"]

    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path).returncode == 0
    # This pip installs into the venv; --no-compile: byte-compiling scipy's thousands of modules would double the time.
    installed = run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--disable-pip-version-check",
                    "--no-compile", "-q", wheel, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr.decode()[-3000:]
    bin_ = venv / "bin"

    evaluated = run(bin_ / "verdict-eval", "qrels.test", "results.test", cwd=TREC)
    assert evaluated.returncode == 0, evaluated.stderr.decode()
    assert evaluated.stdout == (TREC / "out.test").read_bytes()
    from_stdin = run(bin_ / "verdict-eval", "-q", "-m", "all_trec", "qrels.test", "-", cwd=TREC,
                     stdin=(TREC / "results.test").open("rb"))
    assert from_stdin.stdout == (TREC / "out.test.aq").read_bytes(), from_stdin.stderr.decode()
    version = run(bin_ / "verdict-eval", "-v", cwd=tmp_path)
    assert version.returncode == 0 and f"verdict-eval {__version__}\n" in (version.stdout + version.stderr).decode()

    assert run(bin_ / "verdict", "--version", cwd=tmp_path).stdout.decode() == f"verdict {__version__}\n"
    helped = run(bin_ / "verdict", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and b"{upload-run,evaluate,compare,download-qrels,gate}" in helped.stdout
    refused = run(bin_ / "verdict", "gate", "--help", cwd=tmp_path)
    assert b"--junit" in refused.stdout and b"--json" in refused.stdout

    # -I: the checkout (or any folder) on the path would hide what the wheel lacks.
    loaded = run(bin_ / "python", "-I", "-c", "import sys, verdict.engine, verdict.verdict; print(verdict.engine.__version__);"
                 "print(' '.join(sorted({name.split('.')[0] for name in sys.modules})))", cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr.decode()
    version_line, modules_line = loaded.stdout.decode().splitlines()
    assert version_line == __version__
    assert not set(FOREIGN) & set(modules_line.split())
    code = ("from verdict.engine import evaluate, read_qrels, read_run\n"
            "print('%.4f' % evaluate(read_qrels('qrels.test'), read_run('results.test'), ['AP']).aggregate['AP'])")
    scored = run(bin_ / "python", "-I", "-c", code, cwd=TREC)
    assert scored.stdout.decode().strip() == next(line.split()[2] for line in (TREC / "out.test").read_text().splitlines()
                                                  if line.startswith("map "))
