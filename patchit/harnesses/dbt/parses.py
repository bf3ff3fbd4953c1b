"""Which saved parse each dbt run of a harness starts from.

Parsing the project is most of a warm run, so each run is offered a saved parse (dbt checks
it, and re-parses only the files that differ, or everything, saying why):

- **A warm worker** starts every run from the failing run's parse, which it decodes once and
  keeps (`saved_parse`): the request names a private copy of it (`source`). The run's
  target dir is seeded with that parse re-rooted at the candidate's worktree, which is what
  dbt reads if the worker does not hold the decoded one; once the worker has said it holds it,
  an empty file stands in (dbt reads the decoded parse; were it gone, dbt would parse in
  full, never wrongly).
- **A fresh process per run** (`worker --once`) gets the failing run's parse as it is, copied
  into the run's target dir, and re-roots it in memory as it decodes it (`saved_parse`): the
  same parse as a re-rooted file, without decoding and encoding it once more first.
- **Otherwise** (a lineage whose dbt refused the failing run's parse): the failing run's
  parse, re-rooted; or, in a scratch dir an earlier run of the same candidate parsed in, that
  run's own parse, left in place.

A parse a candidate's run wrote never seeds another candidate's run: the run executes the
candidate's code (a dbt-duckdb Python model runs in dbt's process), which could rewrite the
file, and dbt trusts what it reads there. Only the user's own run's parse crosses candidates.
The copy of it holds rendered vars (secrets too): it lives in a private dir that `close()`
removes; one of a process killed before that is removed by the next run's recovery sweep,
or the next harness that makes one (`patchit.sandbox.private_dirs`).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from patchit.config import resolve_home
from patchit.harnesses.dbt.units import DbtOutcome, DbtSandbox
from patchit.sandbox.private_dirs import FAILING_PARSES, make_private_dir
from patchit.sandbox.snapshot import PARTIAL_PARSE_FILE, read_parse_mode, rebase_partial_parse

# a warm request's `saved_parse`: source, sha256, root, file (str); changed_files (list)
SavedParse = dict[str, Any]
_FULL_PARSE_REASON = re.compile(r"Unable to do partial parsing because ([^\n]*)")


class ParseSeeds:
    """One harness's saved parses: seed a run's target dir, note how the run parsed."""

    def __init__(self) -> None:
        self._copies_dir: Path | None = None  # the failing runs' parses, for the worker
        # (path, mtime, size) -> (copy, its sha256): the worker checks the hash, since a run
        # (without Landlock) could write where the copy is
        self._copies: dict[tuple[str, int, int], tuple[Path, str]] = {}
        self._refused: set[str] = set()  # lineages whose dbt parsed in full from the copy
        self._held: set[tuple[int, str]] = set()  # (worker pid, copy) the worker decoded
        self.last_mode = "unknown"  # how the last run parsed: "partial", "full: <why>"
        self.last_files_from_saved = False  # and took the root project's files from the parse
        self.last_graph_from_saved = False  # and the graph linked from the parse

    def seed(self, box: DbtSandbox, worker_pid: int | None) -> SavedParse | None:
        """Seed `box`'s target dir; the request's `saved_parse` for a warm worker's run, or a
        fresh process's (`worker_pid` None)."""
        user = box.user_parse_file
        copy = self._copy_of(user) if user is not None else None
        if copy is not None and box.parse_key not in self._refused:
            source, digest = copy
            file = box.target_dir / PARTIAL_PARSE_FILE
            if worker_pid is None:  # the process decodes the copy in its target dir itself
                with contextlib.suppress(OSError):
                    box.target_dir.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, file)
                    return _spec(file, digest, box, file)
            saved = _spec(source, digest, box, file)
            if (worker_pid, str(source)) in self._held:
                box.target_dir.mkdir(parents=True, exist_ok=True)
                file.write_bytes(b"")
                return saved
            if rebase_partial_parse(source, box.target_dir, box.project_dir):
                return saved
        own = box.target_dir / PARTIAL_PARSE_FILE
        with contextlib.suppress(OSError):
            if box.parse_key in self._refused and own.stat().st_size > 0:
                return None  # this candidate's own earlier parse, not the refused one again
        if user is not None:
            rebase_partial_parse(user, box.target_dir, box.project_dir)
        return None

    def preload_spec(self, user_parse: Path) -> SavedParse | None:
        """A preload request's `saved_parse` for the failing run's parse (the copy a warm run
        will name), or None when it cannot be copied."""
        copy = self._copy_of(user_parse)
        return None if copy is None else {"source": str(copy[0]), "sha256": copy[1]}

    def held(self, worker_pid: int, source: str) -> None:
        """The worker said it holds `source` decoded: its first run is seeded empty."""
        self._held.add((worker_pid, source))

    def after(
        self,
        box: DbtSandbox,
        outcome: DbtOutcome | None,
        worker_pid: int | None,
        saved: SavedParse | None,
    ) -> None:
        """Note how the run parsed (a lineage whose dbt refused the failing run's parse is not
        offered it again)."""
        mode = outcome.parse_mode if outcome is not None else None
        self.last_files_from_saved = outcome is not None and outcome.files_from_saved
        self.last_graph_from_saved = outcome is not None and outcome.graph_from_saved
        self.last_mode = (
            read_parse_mode(box.log_path.parent / "logs")
            if mode is None
            else _with_reason(mode, box.log_path)
        )
        if saved is not None and worker_pid is not None:
            held = (worker_pid, saved["source"])
            if not self.last_mode.startswith("full"):
                if outcome is not None and outcome.saved_parse_kept:
                    self._held.add(held)
                else:
                    self._held.discard(held)
                return
            self._held.discard(held)
        if self.last_mode.startswith("full"):
            self._refused.add(box.parse_key)  # dbt said why

    def close(self) -> None:
        if self._copies_dir is not None:
            shutil.rmtree(self._copies_dir, ignore_errors=True)
        self._copies_dir = None
        self._copies.clear()
        self._held.clear()
        self._refused.clear()
        self.last_mode = "unknown"

    def _copy_of(self, user_parse: Path) -> tuple[Path, str] | None:
        """The failing run's parse, copied once into a private dir under patchit's sandboxes
        area (the worker reads it there: the user's target dir may be hidden from its
        sandbox, and patchit's cache is only visible if it existed when the worker began),
        with its sha256; copied again when the copy no longer has that hash."""
        try:
            stat = user_parse.stat()
        except OSError:
            return None
        key = (str(user_parse), stat.st_mtime_ns, stat.st_size)
        known = self._copies.get(key)
        if known is not None and _sha256(known[0]) == known[1]:
            return known
        try:
            if self._copies_dir is None:
                self._copies_dir = make_private_dir(resolve_home(), FAILING_PARSES)
            data = user_parse.read_bytes()
            copy = self._copies_dir / f"{uuid.uuid4().hex}.msgpack"
            copy.write_bytes(data)
        except OSError:
            return None
        self._copies[key] = (copy, hashlib.sha256(data).hexdigest())
        return self._copies[key]


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _with_reason(mode: str, output_log: Path) -> str:
    """A warm run's "full" with dbt's reason, from its output (dbt says it at info level)."""
    if mode != "full":
        return mode
    with contextlib.suppress(OSError):
        found = _FULL_PARSE_REASON.findall(output_log.read_text("utf-8", errors="replace"))
        if found:
            return f"full: {found[-1].strip()}"
    return mode


def _spec(source: Path, digest: str, box: DbtSandbox, file: Path) -> SavedParse:
    """A run's `saved_parse`; it names the root project's files that differ from the parse
    when the harness knows them (`tuning_files`)."""
    spec: SavedParse = {"source": str(source), "sha256": digest, "root": str(box.project_dir),
                        "file": str(file)}  # fmt: skip
    if box.changed_files is not None:
        spec["changed_files"] = list(box.changed_files)
    return spec
