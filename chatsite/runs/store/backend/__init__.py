"""Django's PostgreSQL backend, with a connection pool that recovers at once from a restart
(see chatsite/runs/store/backend/checkout.py), whose connections keep the hot path's statements prepared
(chatsite/rows.prepared). Used as ENGINE when the pool is on."""
