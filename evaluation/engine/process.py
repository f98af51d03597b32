"""Settings for a command-line process of the engine (``python -m evaluation.engine``, ``verdict-eval``), made
before numpy and pyarrow load. Only the commands call ``prepare``: a program that imports the engine keeps its own."""

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3


def prepare() -> None:
    # Nothing here multiplies matrices big enough for a thread pool, and OpenBLAS starting one thread per
    # core when numpy loads costs 30-40 ms of CPU; a setting of the caller's own stays.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # pyarrow's own allocator (mimalloc) keeps what pyarrow frees (the parser's pieces, columns once copied into
    # numpy) for pyarrow alone; with the C library's malloc, numpy's arrays reuse that memory (and the mallopt
    # settings below apply to both). Peak memory on a 2M-line run: 232 -> 207 MB, same time.
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    _keep_freed_memory()
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _WithoutPandas())


def _keep_freed_memory() -> None:
    """Reading a large run makes and drops arrays of tens of megabytes one after the other. By default
    glibc returns each to the kernel (munmap, heap trimming) and maps the next one afresh, which the
    kernel must fault in and zero: on a 7M-line run that system time exceeded the whole user time.
    This process is short-lived, so it keeps freed memory for the next array (peak RSS is unchanged).
    Other C libraries have no mallopt and keep their defaults."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):  # no mallopt, or (Windows) no handle on the C library
        return
    mallopt(M_MMAP_THRESHOLD, 1 << 30)
    mallopt(M_TRIM_THRESHOLD, 1 << 30)
    mallopt(M_TOP_PAD, 64 << 20)


class _WithoutPandas:
    """The command line never needs pandas, but pyarrow imports it (0.3-0.5 s) on first contact with
    a numpy array or a Python scalar, only to ask whether that is a pandas object. Refusing the import
    makes pyarrow carry on as if pandas were not installed."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("pandas is not used by the command line", name=name)
        return None
