"""LabelsChange and the triggers that write it (see the model). PostgreSQL: statement-level triggers with
transition tables, one row per round a statement touched. SQLite: row-level triggers (it has no others;
its writers are serialised, so they cost an insert per row and no waiting)."""

from django.db import migrations, models

# (table, the SQL naming the rounds its changed rows touch, given a relation `changed` of them on
# PostgreSQL or the row `{row}` on SQLite, the columns whose edits matter on SQLite (None: any))
_ROUNDS_OF = {
    "judgments_judgment": ("SELECT i.round_id FROM judgments_rounditem i WHERE i.id IN ({items})", None),
    "judgments_adjudication": ("SELECT i.round_id FROM judgments_rounditem i WHERE i.id IN ({items})", None),
    "judgments_query": ("SELECT i.round_id FROM judgments_rounditem i WHERE i.query_id IN ({ids})", "query_id, text"),
    "judgments_document": ("SELECT i.round_id FROM judgments_rounditem i WHERE i.document_id IN ({ids})", "doc_id, answer_run_id"),
    "judgments_answerrun": ("SELECT i.round_id FROM judgments_rounditem i JOIN judgments_document d ON d.id = i.document_id "
                            "WHERE d.answer_run_id IN ({ids})", "name"),
}
# Judgments and adjudications count when added, changed or deleted; the others when edited (their rows are
# added before any round has pairs on them, and deleted only with those pairs' judgments).
_EVENTS = {"judgments_judgment": ("INSERT", "UPDATE", "DELETE"), "judgments_adjudication": ("INSERT", "UPDATE", "DELETE")}
_INSERT = "INSERT INTO judgments_labelschange (round_id) SELECT DISTINCT round_id FROM ({rounds}) touched"


def _triggers():
    for table, (rounds, columns) in _ROUNDS_OF.items():
        for event in _EVENTS.get(table, ("UPDATE",)):
            yield table, event, rounds, columns


def _name(table: str, event: str) -> str:
    return f"labels_change_{table.removeprefix('judgments_')}_{event.lower()}"


def create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    with schema_editor.connection.cursor() as cursor:
        for table, event, rounds, columns in _triggers():
            if vendor == "postgresql":
                function = _name(table, event)
                old_or_new = "OLD" if event == "DELETE" else "NEW"
                body = _INSERT.format(rounds=rounds.format(items="SELECT item_id FROM changed", ids="SELECT id FROM changed"))
                cursor.execute(f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body}; RETURN NULL; END $$")
                cursor.execute(f"CREATE TRIGGER {function} AFTER {event} ON {table} REFERENCING {old_or_new} TABLE AS changed "
                               f"FOR EACH STATEMENT EXECUTE FUNCTION {function}()")
            elif vendor == "sqlite":
                row = "OLD" if event == "DELETE" else "NEW"
                body = _INSERT.format(rounds=rounds.format(items=f"{row}.item_id", ids=f"{row}.id"))
                of = f" OF {columns}" if columns and event == "UPDATE" else ""
                cursor.execute(f"CREATE TRIGGER {_name(table, event)} AFTER {event}{of} ON {table} FOR EACH ROW BEGIN {body}; END")
            else:
                raise NotImplementedError(f"labels changes need triggers written for {vendor}")


def drop(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    with schema_editor.connection.cursor() as cursor:
        for table, event, _, _ in _triggers():
            if vendor == "postgresql":
                cursor.execute(f"DROP TRIGGER IF EXISTS {_name(table, event)} ON {table}")
                cursor.execute(f"DROP FUNCTION IF EXISTS {_name(table, event)}()")
            else:
                cursor.execute(f"DROP TRIGGER IF EXISTS {_name(table, event)}")


class Migration(migrations.Migration):

    dependencies = [("judgments", "0019_round_counters")]

    operations = [
        migrations.CreateModel(
            name="LabelsChange",
            fields=[("id", models.BigAutoField(primary_key=True, serialize=False)), ("round_id", models.BigIntegerField())],
            options={"indexes": [models.Index(fields=["round_id", "id"], name="labels_change_newest")]},
        ),
        migrations.RunPython(create, drop),
    ]
