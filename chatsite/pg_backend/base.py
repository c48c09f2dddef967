from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

from chatsite.db_pool import check_pooled_connection


class DatabaseWrapper(base.DatabaseWrapper):
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
