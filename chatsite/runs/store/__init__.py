"""The run's durable record: every statement of a run's life on its hot path, the
Postgres twin of chatsite.runs.stream (which holds every Redis stream command).

Each module is one step of that life, with typed, keyword-only functions that return
frozen dataclasses (or model instances built from their rows), never a fact stuck
on an instance for another module to find:
- keys.py: the credential's read (an API key, its user, tenant, quota and pools);
- reads.py: what admission reads first (the chat or the pool, with the pool's queue);
- queue.py: a pool's queue counts, its finish rate, its running runs (shedding);
- turns.py: a turn's writes under the chat's lock (messages, runs, the chat's path);
- choices.py: a completion's n choices;
- claim.py and finalize.py: a worker taking a run and the run's end.
The SQL is plain (engine.py) where the ORM's compilation cost more than Postgres
spent; statement counts per call are tested in tests/runs/store/.
"""
