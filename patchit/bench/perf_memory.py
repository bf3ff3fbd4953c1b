"""`patchit bench --memory`: the repeat-diff check (`Memory.seen_diff`) with many attempts stored.

Every candidate is checked against the attempt memory before verification ("was this
normalised diff already tried for this fingerprint?"), so the lookup must stay cheap when the
memory holds years of attempts. The store is filled with N attempts (default 1,000,000) in
one transaction through `executemany`; the baseline is the obvious one: the same method on
a copy of the same file without the attempts indexes, so SQLite scans the table. Lookups
(half present, half absent) alternate between the two stores, K rounds, medians reported.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from patchit.memory import DB_RELATIVE_PATH, Memory

ATTEMPTS_PER_FINGERPRINT = 100
Say = Callable[[str], None]


@dataclass
class MemoryPerf:
    attempts: int
    fingerprints: int
    runs: int
    lookups_per_run: int
    build_s: float
    db_mb: float
    indexed_ms: list[float] = field(default_factory=list)
    scan_ms: list[float] = field(default_factory=list)
    plan_indexed: str = ""
    plan_scan: str = ""

    @property
    def indexed_median_ms(self) -> float:
        return statistics.median(self.indexed_ms)

    @property
    def scan_median_ms(self) -> float:
        return statistics.median(self.scan_ms)

    @property
    def ratio(self) -> float:
        return self.indexed_median_ms / self.scan_median_ms

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            indexed_median_ms=self.indexed_median_ms,
            scan_median_ms=self.scan_median_ms,
            ratio=self.ratio,
        )
        return data


def _hash(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


def fill_memory(home: Path, attempts: int, seed: int = 7) -> tuple[Path, list[tuple[str, str]]]:
    """A real attempt memory under `home` with `attempts` rows; some stored (fp, hash) pairs."""
    with Memory.open(home) as memory:
        path = memory.path
    rng = random.Random(seed)
    n_fps = max(1, attempts // ATTEMPTS_PER_FINGERPRINT)
    fingerprints = [_hash(rng) for _ in range(n_fps)]
    now = datetime.now(UTC).isoformat()
    conn = sqlite3.connect(str(path))
    stored: list[tuple[str, str]] = []
    try:
        # a benchmark fixture, rebuilt on a crash: no fsync, index pages kept in memory
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -262144")
        conn.execute("BEGIN")
        conn.executemany(
            "insert into incidents (id, fingerprint, cause_key, status, created_utc,"
            " updated_utc) values (?, ?, ?, 'failed', ?, ?)",
            ((f"bench-{i}", fp, fp, now, now) for i, fp in enumerate(fingerprints)),
        )

        def rows() -> Any:
            for n in range(attempts):
                i = n % n_fps
                diff = _hash(rng)
                if n % 9973 == 0:
                    stored.append((fingerprints[i], diff))
                outcome = "failed" if n % 3 else "verified"
                branch = f"patchit/bench-{i}" if outcome == "verified" else None  # landed
                yield (f"bench-{i}", fingerprints[i], diff, "rename_column", outcome, now, branch)

        conn.executemany(
            "insert into attempts (incident_id, fingerprint, diff_hash, tag, outcome,"
            " created_utc, landed_branch, strategy, tier, files, diff) values"
            " (?, ?, ?, ?, ?, ?, ?, 'tier0', 0, '[]', '')",
            rows(),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return path, stored


def unindexed_copy(path: Path, dest_home: Path) -> Path:
    """The same store without the attempts indexes: the full-scan baseline."""
    dest = dest_home / DB_RELATIVE_PATH
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, dest)
    conn = sqlite3.connect(str(dest))
    try:
        names = [r[0] for r in conn.execute(
            "select name from sqlite_master where type = 'index' and tbl_name = 'attempts'"
            " and sql is not null")]  # fmt: skip
        for name in names:
            conn.execute(f'drop index "{name}"')
        conn.commit()
    finally:
        conn.close()
    return dest


def _plan(path: Path) -> str:
    conn = sqlite3.connect(str(path))
    try:
        rows = conn.execute(
            "explain query plan select 1 from attempts where fingerprint = ? and diff_hash = ?"
            " and outcome in ('verified', 'failed') limit 1",
            ("x", "y"),
        ).fetchall()
    finally:
        conn.close()
    return "; ".join(str(r[-1]) for r in rows)


def _time_lookups(memory: Memory, lookups: list[tuple[str, str, bool]]) -> float:
    """Median ms per `seen_diff` call; each answer is checked against what was stored."""
    samples = []
    for fingerprint, diff_hash, expected in lookups:
        started = time.perf_counter()
        found = memory.seen_diff(fingerprint, diff_hash)
        samples.append((time.perf_counter() - started) * 1000)
        if found is not expected:
            raise AssertionError(f"seen_diff({fingerprint}, {diff_hash}) = {found}")
    return statistics.median(samples)


def run_memory_perf(
    attempts: int = 1_000_000,
    runs: int = 3,
    lookups: int = 20,
    workdir: Path | None = None,
    say: Say = print,
) -> MemoryPerf:
    base = workdir or Path(tempfile.mkdtemp(prefix="patchit-bench-memory-"))
    try:
        say(f"filling the attempt memory with {attempts:,} attempts (one transaction)")
        started = time.perf_counter()
        path, stored = fill_memory(base / "indexed", attempts)
        build_s = time.perf_counter() - started
        scan_path = unindexed_copy(path, base / "scan")
        rng = random.Random(11)
        present = [(fp, h, True) for fp, h in stored]
        queries = [*present, *((fp, _hash(rng), False) for fp, _, _ in present)]
        rng.shuffle(queries)
        queries = queries[: max(2, lookups)]
        result = MemoryPerf(
            attempts=attempts,
            fingerprints=max(1, attempts // ATTEMPTS_PER_FINGERPRINT),
            runs=runs,
            lookups_per_run=len(queries),
            build_s=round(build_s, 2),
            db_mb=round(path.stat().st_size / 1e6, 1),
            plan_indexed=_plan(path),
            plan_scan=_plan(scan_path),
        )
        with Memory(path) as indexed, Memory(scan_path) as scan:
            for run in range(1, runs + 1):  # interleaved: indexed, scan, indexed, scan, ...
                result.indexed_ms.append(round(_time_lookups(indexed, queries), 4))
                result.scan_ms.append(round(_time_lookups(scan, queries), 3))
                say(f"run {run}/{runs}: indexed {result.indexed_ms[-1]:.3f} ms, "
                    f"scan {result.scan_ms[-1]:.1f} ms per lookup")  # fmt: skip
        return result
    finally:
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)


def format_report(r: MemoryPerf) -> str:
    return "\n".join(
        [
            f"patchit bench --memory: {r.attempts:,} attempts over {r.fingerprints:,} "
            f"fingerprints ({r.db_mb} MB, filled in {r.build_s:.1f} s); "
            f"{r.lookups_per_run} lookups x {r.runs} interleaved run(s), medians",
            f"indexed seen_diff: {r.indexed_median_ms:8.3f} ms per lookup  ({r.plan_indexed})",
            f"full scan:         {r.scan_median_ms:8.3f} ms per lookup  ({r.plan_scan}; baseline)",
            f"ratio:             {r.ratio:.5f}x the scan ({1 / r.ratio:,.0f}x faster)",
        ]
    )
