"""Parquet files people bring (runs, qrels, query logs): held to the reader's limits from the file's footer,
before any data is unpacked.

Parquet is compressed inside, so a few kilobytes can unpack to gigabytes: one doc id of 300 MB of one
character is a 10 KB file with zstd, and reading it whole cost 1.5 GB before the id was found too long. So
the footer is checked first. The columns read must hold plain values (text, numbers, times; a struct, list
or map is refused by name). In every row group, a text column may unpack to no more than its rows'
values at ``max_value_bytes`` each could take, plus what a writer spends around them, so a longer value is
refused without being unpacked. The columns read may unpack to ``max_unpacked_bytes`` in all. Then
`read_parquet` reads a row group at a time and counts what each actually took against the same budget
(a dictionary-encoded column unpacks to more than the footer says).

Messages never pass on pyarrow's words: they hold the path pyarrow was given, which on a server is a
temporary file. They name the file by the reader's ``name``, and the row group at fault.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import EngineInputError, show

# What a writer may spend per value around the value itself (its length, definition levels, a page
# header per value at worst) and per column chunk (dictionary and page headers, statistics).
VALUE_OVERHEAD = 64
CHUNK_OVERHEAD = 1 << 20
_READ_ERRORS = (pa.ArrowException, OSError)


def open_parquet(path: str | os.PathLike, *, name: str | None) -> pq.ParquetFile:
    """The file with its footer read; a file that is no Parquet (or whose footer is damaged) is refused."""
    try:
        return pq.ParquetFile(os.fspath(path))
    except _READ_ERRORS:
        raise EngineInputError("not a readable Parquet file (not Parquet, or damaged)", path=name) from None


def check_parquet(parquet: pq.ParquetFile, columns: list[str], *, name: str | None, max_value_bytes: int | None,
                  max_unpacked_bytes: int | None) -> int:
    """Refuse, from the footer alone, what reading `columns` would cost too much for; returns how many bytes
    they unpack to by the footer (None limits: not checked)."""
    schema = parquet.schema_arrow
    for column in columns:
        kind = schema.field(column).type
        if pa.types.is_nested(kind.value_type if pa.types.is_dictionary(kind) else kind):
            raise EngineInputError(f"column {column!r} holds {show(str(kind))}, not text or numbers", path=name)
    metadata = parquet.metadata
    leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    unpacked = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for column in columns:
            chunk = row_group.column(leaves[column])
            size = chunk.total_uncompressed_size
            unpacked += size
            if max_value_bytes is None or chunk.physical_type != "BYTE_ARRAY":
                continue
            rows = row_group.num_rows
            if size > rows * (max_value_bytes + VALUE_OVERHEAD) + CHUNK_OVERHEAD:
                raise EngineInputError(
                    f"column {column!r} holds a value longer than {max_value_bytes:,} bytes (row group {group + 1} of "
                    f"{metadata.num_row_groups}: {rows:,} row{'s' if rows != 1 else ''}, {size:,} bytes unpacked)",
                    path=name)
    if max_unpacked_bytes is not None and unpacked > max_unpacked_bytes:
        raise EngineInputError(_too_big(columns, unpacked, max_unpacked_bytes), path=name)
    return unpacked


def read_parquet(parquet: pq.ParquetFile, columns: list[str], *, name: str | None,
                 max_unpacked_bytes: int | None) -> pa.Table:
    """`columns` read a row group at a time, stopping once they hold more than `max_unpacked_bytes`; the
    file's schema metadata (a run's tag) is kept. Call `check_parquet` first."""
    parts = []
    held = 0
    for group in range(parquet.num_row_groups):
        try:
            part = parquet.read_row_group(group, columns=columns)
        except _READ_ERRORS:
            raise EngineInputError(f"the Parquet file is damaged in row group {group + 1} of {parquet.num_row_groups}",
                                   path=name) from None
        held += part.nbytes
        if max_unpacked_bytes is not None and held > max_unpacked_bytes:
            raise EngineInputError(_too_big(columns, held, max_unpacked_bytes, at_least=True), path=name)
        parts.append(part)
    table = pa.concat_tables(parts) if parts else parquet.schema_arrow.empty_table().select(columns)
    return table.replace_schema_metadata(parquet.schema_arrow.metadata)


def _too_big(columns: list[str], size: int, limit: int, at_least: bool = False) -> str:
    named = f"column {columns[0]!r} unpacks" if len(columns) == 1 else f"columns {', '.join(map(repr, columns))} unpack"
    return f"the {named} to {'at least ' if at_least else ''}{size:,} bytes; the most accepted is {limit:,} bytes"
