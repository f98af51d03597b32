"""Parquet files people bring (runs, qrels, query logs): held to the reader's limits from the file's footer,
before any data is unpacked.

Parquet is compressed inside, so a few kilobytes can unpack to gigabytes: one doc id of 300 MB of one
character is a 10 KB file with zstd, and reading it whole cost 1.5 GB before the id was found too long. So
the footer is checked first. The columns read must hold plain values (text, numbers, times; a struct, list
or map is refused by name). In every row group, a text column may unpack to no more than its rows'
values at ``max_value_bytes`` each could take, plus what a writer spends around them, so a longer value is
refused without being unpacked. The columns read may unpack to ``max_unpacked_bytes`` in all.

The footer does not tell all: a dictionary-encoded column keeps each distinct value once, so 200,000 rows
naming one 20 KB value are a 0.5 MB file whose footer says 20 KB, and that unpack to 4 GB. So text columns
are read as dictionaries (`open_parquet`), and `decoded_batches` checks each dictionary's values against
``max_value_bytes`` and counts what the rows would unpack to before unpacking them, in slices of bounded
size; `read_parquet` reads a row group at a time through it.

Messages never pass on pyarrow's words: they hold the path pyarrow was given, which on a server is a
temporary file. They name the file by the reader's ``name``, and the row group at fault.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .errors import EngineInputError, show

# What a writer may spend per value around the value itself (its length, definition levels, a page
# header per value at worst) and per column chunk (dictionary and page headers, statistics).
VALUE_OVERHEAD = 64
CHUNK_OVERHEAD = 1 << 20
_READ_ERRORS = (pa.ArrowException, OSError)


def open_parquet(path: str | os.PathLike, *, name: str | None) -> pq.ParquetFile:
    """The file with its footer read, its text columns read as dictionaries where they are stored so (see the
    module docstring); a file that is no Parquet (or whose footer is damaged) is refused."""
    try:
        schema = pq.read_schema(os.fspath(path))
        texts = [field.name for field in schema if _is_text(field.type)]
        return pq.ParquetFile(os.fspath(path), read_dictionary=texts)
    except _READ_ERRORS:
        raise EngineInputError("not a readable Parquet file (not Parquet, or damaged)", path=name) from None


def _is_text(kind: pa.DataType) -> bool:
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind))


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


def read_parquet(parquet: pq.ParquetFile, columns: list[str], *, name: str | None, max_value_bytes: int | None,
                 max_unpacked_bytes: int | None) -> pa.Table:
    """`columns` read a row group at a time through `decoded_batches`; the file's schema metadata (a run's tag)
    is kept. Call `check_parquet` first."""
    parts = []
    budget = Budget(max_unpacked_bytes)
    for group in range(parquet.num_row_groups):
        try:
            table = parquet.read_row_group(group, columns=columns)
        except _READ_ERRORS:
            raise EngineInputError(f"the Parquet file is damaged in row group {group + 1} of {parquet.num_row_groups}",
                                   path=name) from None
        where = f"row group {group + 1} of {parquet.num_row_groups}"
        parts += decoded_batches(table.to_batches(), name=name, where=where, max_value_bytes=max_value_bytes,
                                 budget=budget)
    if not parts:
        plain = [field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field
                 for field in parquet.schema_arrow]
        return pa.schema(plain).empty_table().select(columns).replace_schema_metadata(parquet.schema_arrow.metadata)
    return pa.Table.from_batches(parts).replace_schema_metadata(parquet.schema_arrow.metadata)


class Budget:
    """What the batches read so far unpacked to, held to `limit` bytes (None: no limit)."""

    def __init__(self, limit: int | None):
        self.limit, self.held = limit, 0

    def take(self, size: int, columns: list[str], name: str | None) -> None:
        self.held += size
        if self.limit is not None and self.held > self.limit:
            raise EngineInputError(_too_big(columns, self.held, self.limit, at_least=True), path=name)


SLICE_BYTES = 64 << 20  # the most one decoded slice of a batch may unpack to (but one row)


def decoded_batches(batches, *, name: str | None, where: str, max_value_bytes: int | None, budget: Budget | int | None,
                    slice_bytes: int = SLICE_BYTES, first_row: int | None = None):
    """Each batch with its dictionary columns unpacked, once the value each row names is held to `max_value_bytes`
    and what the rows unpack to is counted against `budget`: a batch unpacking to more than `slice_bytes` comes
    in slices that do not. An error names `where` the batches are in the file, or, given the number of the
    batches' first row, the row (as a line: a query log's rows are its lines)."""
    budget = budget if isinstance(budget, Budget) else Budget(budget)
    for batch in batches:
        row_bytes = np.zeros(batch.num_rows, dtype=np.int64)
        for column_name, column in zip(batch.schema.names, batch.columns):
            if not pa.types.is_dictionary(column.type):
                row_bytes += column.nbytes // max(batch.num_rows, 1)
                continue
            lengths = pc.fill_null(pc.binary_length(column.dictionary), 0).to_numpy()
            named = lengths[pc.fill_null(column.indices, 0).to_numpy()] if len(lengths) else np.zeros(batch.num_rows, np.int64)
            if max_value_bytes is not None and batch.num_rows and named.max() > max_value_bytes:
                _refuse_long(column_name, max_value_bytes, name, where, first_row, int(np.argmax(named > max_value_bytes)))
            row_bytes += named + 8  # and the offset each unpacked value takes
        budget.take(int(row_bytes.sum()), batch.schema.names, name)
        if first_row is not None:
            first_row += batch.num_rows
        yield from (_decoded(batch.slice(start, stop - start)) for start, stop in _slices(row_bytes, slice_bytes))


def _refuse_long(column: str, limit: int, name: str | None, where: str, first_row: int | None, row: int) -> None:
    if first_row is None:
        raise EngineInputError(f"column {column!r} holds a value longer than {limit:,} bytes ({where})", path=name)
    raise EngineInputError(f"the value in column {show(column)} is longer than {limit:,} bytes", path=name,
                           line=first_row + row)


def _slices(row_bytes: np.ndarray, most: int):
    """(start, stop) row ranges whose bytes sum to at most `most` (or one row that alone is more)."""
    ends = np.cumsum(row_bytes)
    start = 0
    while start < len(row_bytes):
        floor = ends[start - 1] if start else 0
        stop = max(int(np.searchsorted(ends, floor + most, side="right")), start + 1)
        yield start, stop
        start = stop


def _decoded(batch: pa.RecordBatch) -> pa.RecordBatch:
    arrays = [column.dictionary_decode() if pa.types.is_dictionary(column.type) else column for column in batch.columns]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _too_big(columns: list[str], size: int, limit: int, at_least: bool = False) -> str:
    named = f"column {columns[0]!r} unpacks" if len(columns) == 1 else f"columns {', '.join(map(repr, columns))} unpack"
    return f"the {named} to {'at least ' if at_least else ''}{size:,} bytes; the most accepted is {limit:,} bytes"
