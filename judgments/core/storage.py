"""Reading stored files (runs, logs' counts, per-query values, list versions, stashed uploads) through the
storage API without downloading them whole when the storage is an S3 bucket.

django-storages' S3File downloads the whole object on its first read. Parquet readers need only the footer
and the column chunks of the columns and row groups they ask for, so on S3 `open_stored` gives a seekable
file whose reads are ranged GETs (`Range: bytes=a-b`); on any other storage it gives the storage's own file.
"""

import io
from typing import BinaryIO

from django.core.files.storage import Storage, default_storage
from storages.backends.s3 import S3Storage

# Small reads (Parquet's footer, a page header) are served from one ranged GET of this many bytes.
READ_AHEAD = 1 << 20


class S3RangeReader(io.RawIOBase):
    """A read-only, seekable view of one S3 object; every read is one ranged GET."""

    def __init__(self, obj, size: int, name: str = ""):
        self.obj, self.size, self.name, self.position = obj, size, name, 0
        self.bytes_fetched = 0  # what the reads cost, for the tests and the benchmark

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self.position = base + offset
        return self.position

    def readall(self) -> bytes:
        buffer = bytearray(max(self.size - self.position, 0))
        return bytes(buffer[:self.readinto(buffer)])

    def readinto(self, buffer) -> int:
        end = min(self.position + len(buffer), self.size)
        if end <= self.position:
            return 0
        body = self.obj.get(Range=f"bytes={self.position}-{end - 1}")["Body"]
        view, filled = memoryview(buffer), 0
        while filled < end - self.position and (chunk := body.read(end - self.position - filled)):
            view[filled:filled + len(chunk)] = chunk
            filled += len(chunk)
        body.close()
        self.bytes_fetched += filled
        self.position += filled
        return filled


def open_stored(name: str, storage: Storage | None = None) -> BinaryIO:
    """The stored file `name`, opened for reading in binary, seekable; a context manager.

    On S3 it reads by ranges, READ_AHEAD bytes at least per request; elsewhere it is `storage.open(name, "rb")`.
    """
    storage = storage or default_storage
    opened = storage.open(name, "rb")  # on S3 a HEAD request: a missing file raises here, as on a file system
    if not isinstance(storage, S3Storage):
        return opened
    return io.BufferedReader(S3RangeReader(opened.obj, opened.size, name), buffer_size=READ_AHEAD)
