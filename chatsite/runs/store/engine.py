"""The store's private engine: plain SQL, and rows of joined tables into model instances.

A request that admits a run, and the finalize that ends it, run a dozen queries each;
the ORM's compilation of them (building the SQL from querysets, per call) cost more
CPU than Postgres spent answering (measured then with cProfile of the message POST).
So the hot path's statements are written once, in the store's modules, and their rows
become ordinary model instances. Nothing outside chatsite/runs/store/ imports this.

Each call looks the connection up once (`_db()`): `django.db.connection` is a proxy whose
every attribute is an asgiref Local lookup, ~2 us here, and a field's value conversion
reads it several times (building a run's INSERT parameters: 82 us through it, 39 without)."""
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import fields as model_fields
from django.db.models.fields.related import ForeignKey, OneToOneField


def _db():
    """This thread's (this context's) default connection: what `django.db.connection` proxies."""
    return connections[DEFAULT_DB_ALIAS]


class Columns:
    """A model's columns in a SELECT under a table alias, and the instance built from
    that slice of a row (the fields' own conversions applied, as the ORM would)."""

    def __init__(self, model, alias: str, *, exclude: tuple[str, ...] = (), only: tuple[str, ...] = ()):
        self.model = model
        if only:  # these fields (by attname), in this order: a slice of the row for a dataclass
            self.fields = [model._meta.get_field(name) for name in only]
        else:
            self.fields = [f for f in model._meta.concrete_fields if f.name not in exclude]
        self.attnames = [f.attname for f in self.fields]
        self.sql = ", ".join(f'{alias}."{f.column}"' for f in self.fields)
        self.table = model._meta.db_table
        self._converted = [(i, f) for i, f in enumerate(self.fields) if hasattr(f, "from_db_value")]
        pk = model._meta.pk.attname
        self._pk_at = self.attnames.index(pk) if pk in self.attnames else None  # None: `only` left it out

    def __len__(self) -> int:
        return len(self.fields)

    def values(self, values) -> list:
        """These values (in this object's column order) as the fields make them of a row."""
        values = list(values)
        if self._converted:
            db = _db()
            for i, field in self._converted:
                values[i] = field.from_db_value(values[i], None, db)
        return values

    def build(self, values):
        """The instance for these values (in this object's column order); None when
        its primary key is NULL (the missing side of a LEFT JOIN)."""
        if self._pk_at is None:
            raise TypeError(f"{self.model.__name__}'s columns without its key build no instance: read values()")
        if values[self._pk_at] is None:
            return None
        return self.model.from_db(DEFAULT_DB_ALIAS, self.attnames, self.values(values))


def split(row, *columns: Columns) -> list:
    """The instances of one row that holds `columns` one after another (then any
    other values, returned as they are after the instances)."""
    out, at = [], 0
    for cols in columns:
        out.append(cols.build(row[at:at + len(cols)]))
        at += len(cols)
    return out + list(row[at:])


def sql_in(values) -> str:
    """A constant list of strings as SQL, `('a', 'b')`, for `x IN ...` in a statement's text:
    a list parameter costs its dumping at every call (psycopg's list dumper, in Python)."""
    return "(" + ", ".join("'" + str(v).replace("'", "''") + "'" for v in values) + ")"


PREPARED: set[str] = set()


def prepared(sql: str) -> str:
    """`sql`, marked to be kept prepared by a pooled connection (chatsite/runs/store/backend/):
    parsed and planned once per connection instead of on every call. Only for statements
    whose best plan is the same whatever the parameters (a row by its key, an INSERT):
    a prepared statement may run with one generic plan, and for a lookup on a skewed
    column that plan can be a full scan (the reply-in-progress check of a new chat,
    with one chat holding most runs: 200 ms instead of 0.1; bench/per_run.py --history)."""
    PREPARED.add(sql)
    return sql


def fetch_one(sql: str, params) -> tuple | None:
    with _db().cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()


def fetch_all(sql: str, params) -> list[tuple]:
    with _db().cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


PREPARED_ROWS = 8  # a turn's messages, a call's choices; a long history's insert is not worth keeping


# A run's 35 INSERT parameters took ~400 calls (30 us) through their fields' pre_save and
# get_db_prep_save, which hand most values back unchanged: for Django's own field classes
# below, such a value is taken as it is (save_kind), and every other value goes through its
# field (~150 calls, 12 us; tests/runs/store/test_engine.py checks each kind against its field).
_TEXT = (model_fields.CharField, model_fields.TextField)  # to_python keeps any str as it is
_EXACT = {model_fields.BooleanField: bool, model_fields.FloatField: float}
_INTEGERS = (model_fields.IntegerField, model_fields.BigIntegerField, model_fields.SmallIntegerField,
             model_fields.PositiveIntegerField, model_fields.PositiveBigIntegerField,
             model_fields.PositiveSmallIntegerField)
_NULL_AS_IS = (model_fields.DateTimeField, model_fields.DateField, model_fields.json.JSONField)
_AUTO = (model_fields.AutoField, model_fields.BigAutoField)
TEXT, EXACT, INTEGER, THROUGH_FIELD = "text", "exact type", "integer", "through the field"


def save_kind(field, ops) -> tuple[str, type | None]:
    """How `field`'s value becomes its INSERT parameter. None is taken as it is unless
    THROUGH_FIELD; else TEXT: a str as it is; EXACT: a value of exactly the type given;
    INTEGER: an int, through the backend's `adapt_integerfield_value` (as get_db_prep_value:
    psycopg's typed Int4/Int8); THROUGH_FIELD: every value through the field's pre_save
    and get_db_prep_save (any other class, a subclass, an auto date, a backend that
    checks keys). A value of another type always goes through its field."""
    kind = type(field)
    if kind in _TEXT:
        return TEXT, str
    if kind in _EXACT:
        return EXACT, _EXACT[kind]
    if kind in _INTEGERS:
        return INTEGER, int
    if (kind in (ForeignKey, OneToOneField) and type(field.target_field) in _AUTO
            and type(ops).validate_autopk_value is BaseDatabaseOperations.validate_autopk_value):
        return EXACT, int
    if kind in _NULL_AS_IS and not (getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)):
        return EXACT, type(None)  # None only: a date or a JSON value goes through its field
    return THROUGH_FIELD, None


class Insert:
    """INSERT of a model's instances in one statement, their primary keys set from
    RETURNING (as Model.save would, without compiling the statement per call; no
    save signals are sent: the models inserted here have no receivers)."""

    def __init__(self, model):
        meta = model._meta
        self.fields = [f for f in meta.concrete_fields if not f.primary_key]
        self._kinds = None  # [(field, attname, kind, type, internal type)], once a connection is known
        self.pk = meta.pk
        columns = ", ".join(f'"{f.column}"' for f in self.fields)
        self.head = f'INSERT INTO "{meta.db_table}" ({columns}) VALUES '
        self.row = "(" + ", ".join(["%s"] * len(self.fields)) + ")"
        self._sql: dict[tuple, str] = {}  # by the number of rows (and the write along, or the link)

    def save(self, *objs, along: tuple[str, list] | None = None):
        """Insert `objs` (new instances) in order; returns them, saved. `along`: another
        write (an UPDATE's SQL with no RETURNING, and its parameters) done in the same
        statement, as a data-modifying CTE: two writes in one round trip. It runs on the
        statement's snapshot, so it must not depend on the rows inserted here."""
        params, db = list(along[1]) if along else [], _db()
        for obj in objs:
            params += self._values(obj, db)
        key = (len(objs), along[0] if along else None)
        sql = self._sql.get(key)
        if sql is None:
            sql = f'{self.head}{", ".join([self.row] * len(objs))} RETURNING "{self.pk.column}"'
            if along:
                sql = f"WITH along AS ({along[0]}) {sql}"
            if len(objs) <= PREPARED_ROWS:
                self._sql[key] = prepared(sql)
        with db.cursor() as cur:
            cur.execute(sql, params)
            ids = [r[0] for r in cur.fetchall()]  # in the VALUES order (as bulk_create relies on)
        for obj, pk in zip(objs, ids):
            _saved(obj, self.pk.attname, pk)
        return objs

    def _values(self, obj, db, skip=None) -> list:
        """`obj`'s INSERT parameters, in the column order (without field `skip`): what each
        field's get_db_prep_save(pre_save()) gives, without the calls where that is the value
        itself (save_kind)."""
        kinds = self._kinds
        if kinds is None:
            kinds = self._kinds = [(f, f.attname, *save_kind(f, db.ops), f.get_internal_type()) for f in self.fields]
        adapt, out = db.ops.adapt_integerfield_value, []
        for f, attname, kind, as_type, internal in kinds:
            if f is skip:
                continue
            value = getattr(obj, attname)
            if value is None:
                if kind is THROUGH_FIELD:
                    value = f.get_db_prep_save(f.pre_save(obj, True), db)
            elif type(value) is as_type or (kind is TEXT and isinstance(value, str)):
                if kind is INTEGER:
                    value = adapt(value, internal)
            else:
                value = f.get_db_prep_save(f.pre_save(obj, True), db)
            out.append(value)
        return out

    def save_with_children(self, parent, children: list, *, link: str):
        """Insert `parent`, then `children` (at least one) with their foreign key `link`
        set to it, in one statement: a data-modifying CTE inserts the parent and the
        statement inserts the children below it (a turn's question and its replies in one
        round trip, not two). Returns (parent, children), saved."""
        if not children:
            raise ValueError("save_with_children needs at least one child")
        key, db, link_field = (link, len(children)), _db(), self.pk.model._meta.get_field(link)
        sql = self._sql.get(key)
        if sql is None:
            casts = ", ".join(f'p."{self.pk.column}"' if f is link_field else f"%s::{f.cast_db_type(db)}"
                              for f in self.fields)
            child = f"SELECT {casts} FROM p"
            sql = (f'WITH p AS ({self.head}{self.row} RETURNING "{self.pk.column}") '
                   f'{self.head.removesuffix("VALUES ")}{" UNION ALL ".join([child] * len(children))} '
                   f'RETURNING "{self.pk.column}", "{link_field.column}"')
            if len(children) < PREPARED_ROWS:
                self._sql[key] = prepared(sql)
        params = self._values(parent, db)
        for obj in children:
            params += self._values(obj, db, skip=link_field)
        with db.cursor() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall()  # the children, in their order (as bulk_create relies on)
        _saved(parent, self.pk.attname, rows[0][1])  # each child's RETURNING gives its link too
        for obj, (pk, _) in zip(children, rows):
            setattr(obj, link, parent)  # the link's id, and the parent kept as its cached instance
            _saved(obj, self.pk.attname, pk)
        return parent, children


def _saved(obj, pk_attname: str, pk) -> None:
    """Mark `obj` saved, with its primary key, as Model.save would."""
    setattr(obj, pk_attname, pk)
    obj._state.adding, obj._state.db = False, DEFAULT_DB_ALIAS
