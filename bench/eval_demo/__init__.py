"""Does the demo answer right? A small evaluation that ships with the project.

`prompts.toml` holds what a new user tries first (facts, arithmetic, short code, lists,
tables, definitions), each with its check; `checks.py` scores a reply; `sweep.py` names
the sampling settings compared; `engine.py` drives a demo pool's real engine as a worker
does; `python -m bench.eval_demo` prints the table and writes bench/out/eval_demo.md.
"""
