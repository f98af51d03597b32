"""Model instances from one raw SQL row: for the few queries every grade runs, where building the
query with the ORM costs more than running it.

`select(*models, joins=..., where=...)` writes `SELECT <every concrete column of each model> ...`, and
`instances(row, models)` turns a row back into one instance per model, converted as the ORM converts
values (JSON, datetimes and UUIDs on SQLite). Tables are named by their own (quoted) table names.
"""

from functools import cache

from django.db import connection


def table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def columns(*models) -> str:
    quote = connection.ops.quote_name
    return ", ".join(f"{table(model)}.{quote(field.column)}" for model in models for field in model._meta.concrete_fields)


def fetch_one(models, joins: str, where: str, params, extra: str = "") -> tuple[list, tuple] | None:
    """The one row of `models` (the first one's table, then `joins` bringing in the others) matching `where`:
    their instances, and the values of the `extra` columns selected after theirs; None when there is none."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns(*models)}{', ' + extra if extra else ''} FROM {table(models[0])} {joins} WHERE {where}", params)
        row = cursor.fetchone()
    if row is None:
        return None
    width = sum(len(model._meta.concrete_fields) for model in models)
    return instances(row, models), tuple(row[width:])


def instances(row, models) -> list:
    """One instance per model from a row holding each model's concrete columns in turn; a model whose
    columns are all NULL (an outer join that found nothing) comes back with pk None."""
    found, start = [], 0
    for model in models:
        names, converters = _converters(model)
        values = list(row[start:start + len(names)])
        for index, field_converters in converters:
            for convert, column in field_converters:
                values[index] = convert(values[index], column, connection)
        found.append(model.from_db(connection.alias, names, values))
        start += len(names)
    return found


@cache
def _converters(model) -> tuple[list[str], list[tuple[int, list]]]:
    fields = model._meta.concrete_fields
    converters = []
    for index, field in enumerate(fields):
        column = field.get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
        if found:
            converters.append((index, [(convert, column) for convert in found]))
    return [field.attname for field in fields], converters
