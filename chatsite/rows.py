"""Plain SQL for the hot path: rows of joined tables into model instances.

A request that admits a run, and the finalize that ends it, run a dozen queries each;
the ORM's compilation of them (building the SQL from querysets, per call) cost more
CPU than Postgres spent answering (bench/lifecycle_cpu.py). Their SQL is written once,
here or next to the service, and the rows become ordinary model instances."""
from django.db import connection


class Columns:
    """A model's columns in a SELECT under a table alias, and the instance built from
    that slice of a row (the fields' own conversions applied, as the ORM would)."""

    def __init__(self, model, alias: str, *, exclude: tuple[str, ...] = ()):
        self.model = model
        self.fields = [f for f in model._meta.concrete_fields if f.name not in exclude]
        self.attnames = [f.attname for f in self.fields]
        self.sql = ", ".join(f'{alias}."{f.column}"' for f in self.fields)
        self.table = model._meta.db_table
        self._converted = [(i, f) for i, f in enumerate(self.fields) if hasattr(f, "from_db_value")]

    def __len__(self) -> int:
        return len(self.fields)

    def build(self, values):
        """The instance for these values (in this object's column order); None when
        its primary key is NULL (the missing side of a LEFT JOIN)."""
        values = list(values)
        if values[self.attnames.index(self.model._meta.pk.attname)] is None:
            return None
        for i, field in self._converted:
            values[i] = field.from_db_value(values[i], None, connection)
        return self.model.from_db(connection.alias, self.attnames, values)


def split(row, *columns: Columns) -> list:
    """The instances of one row that holds `columns` one after another (then any
    other values, returned as they are after the instances)."""
    out, at = [], 0
    for cols in columns:
        out.append(cols.build(row[at:at + len(cols)]))
        at += len(cols)
    return out + list(row[at:])


def fetch_one(sql: str, params) -> tuple | None:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()
