"""What the smoke prints as it goes and writes at the end (bench/out/deploy_smoke.md)."""
import os
import platform
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path


class Report:
    def __init__(self):
        self.started = datetime.now(timezone.utc)
        self.clock = time.monotonic()
        self.lines: list[str] = []
        self.figures: list[tuple[str, float]] = []
        self.checks: list[tuple[str, bool, str]] = []
        self.image_table = ""
        self.engine = "(none)"

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(ok for _, ok, _ in self.checks)

    def say(self, line: str) -> None:
        line = line.rstrip()
        if line:
            print(f"[{time.monotonic() - self.clock:7.1f} s] {line}", flush=True)
            self.lines.append(line)

    def figure(self, name: str, seconds: float) -> None:
        self.figures.append((name, seconds))
        self.say(f"{name}: {seconds:.2f} s")

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append((name, ok, detail))
        self.say(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")

    def images(self, table: str) -> None:
        self.image_table = table.strip()

    def engine_version(self) -> None:
        """Read while the engine runs (the smoke may stop it before writing)."""
        self.engine = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                                     text=True, timeout=30).stdout.strip() or "(none)"

    def write(self, path: str) -> None:
        compose = subprocess.run(["docker-compose", "version", "--short"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
        out = [
            "# deploy smoke: the compose stack, run",
            "",
            f"{self.started:%Y-%m-%d %H:%M} UTC, {time.monotonic() - self.clock:.0f} s, on {platform.node()} "
            f"({os.cpu_count()} cores, shared); Docker engine {self.engine}, docker-compose {compose}. "
            "Command: `.venv/bin/python -m deploy.smoke` (deploy/smoke/).",
            "",
            f"**{'Every check held.' if self.ok else 'Some checks FAILED.'}**",
            "",
            "| check | result | detail |",
            "|---|---|---|",
            *(f"| {name} | {'pass' if ok else '**FAIL**'} | {' '.join(detail.replace('|', '/').split())} |"
              for name, ok, detail in self.checks),
            "",
            "| figure | seconds |",
            "|---|---|",
            *(f"| {name} | {seconds:.2f} |" for name, seconds in self.figures),
            "",
        ]
        if self.image_table:
            out += [self.image_table, ""]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("\n".join(out))
        print(f"report: {path}")
