from django.db.backends.postgresql import base

from chatsite.runs.store.backend.checkout import check_pooled_connection
from chatsite.runs.store.engine import PREPARED
from psycopg_pool import ConnectionPool

# psycopg prepares a statement once it ran this many times on a connection; None would
# turn explicit preparation off too, so "never by count": only the statements asked for.
_NEVER = 2**62


class PreparingCursor(base.ServerBindingCursor):
    """Django's server-binding cursor; a statement marked with rows.prepared is prepared
    on its first run on the connection and reused after."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        if prepare is None and type(query) is str and query in PREPARED:
            prepare = True
        return super().execute(query, params, prepare=prepare, binary=binary)


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        params = super().get_connection_params()
        if self.settings_dict["OPTIONS"].get("server_side_binding") is True:
            params["cursor_factory"], params["prepare_threshold"] = PreparingCursor, _NEVER
        return params

    @property
    def pool(self):
        """Django's pool, built the same way, with our checkout check (Django only
        offers psycopg_pool's stock one)."""
        options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == base.NO_DB_ALIAS or not options:
            return None
        if self.alias not in self._connection_pools:
            connect_kwargs = self.get_connection_params()
            connect_kwargs["autocommit"] = True  # as Django's: it sets the mode later
            pool = ConnectionPool(kwargs=connect_kwargs, open=False, configure=self._configure_connection,
                                  check=check_pooled_connection, **options)
            self._connection_pools.setdefault(self.alias, pool)
        return self._connection_pools[self.alias]
