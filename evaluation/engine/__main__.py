import os
import sys

# Nothing here multiplies matrices big enough for a thread pool, and OpenBLAS starting one thread per
# core when numpy loads costs 30-40 ms of CPU; a setting of the caller's own stays.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


class _WithoutPandas:
    """The command line never needs pandas, but pyarrow imports it (0.3-0.5 s) on first contact with
    a numpy array or a Python scalar, only to ask whether that is a pandas object. Refusing the import
    makes pyarrow carry on as if pandas were not installed."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("pandas is not used by the command line", name=name)
        return None


if "pandas" not in sys.modules:
    sys.meta_path.insert(0, _WithoutPandas())

from .cli import main  # noqa: E402

sys.exit(main())
