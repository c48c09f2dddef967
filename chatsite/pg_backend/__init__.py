"""Django's PostgreSQL backend, with a connection pool that recovers at once from a restart
(see chatsite/db_pool.py). Used as ENGINE when the pool is on."""
