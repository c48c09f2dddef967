"""The run stream, in one place: its entries and seq rule (codec), who may write it
(lease), writing and reading it back (log), following it live (hub, follow), and a
finished run from Postgres once it has expired (finished).

Every Redis key comes from chatsite.redis_keys; every surface formats what
`follow()` yields; every write, the terminal entry included, goes through
`log.append` (fenced by the lease).
"""
