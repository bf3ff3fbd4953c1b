"""The worker: take spooled events, group them into incidents, heal what the loop can heal.

Each batch is claimed from the spool in one IMMEDIATE transaction (two workers never take the
same event). dbt events, and Airflow tasks that ran dbt, go through `patchit.loop.loop`; the loop's
incident lease keeps two workers from healing one incident at once. Other Airflow failures are
grouped (a storm key for outside causes; else the tasks one breaking change broke,
`patchit.loop.change_groups`) and recorded as `open` incidents (by storm or cause key) only when no
repository with the failing commit is known for them.
An event that cannot be processed (any exception while reading or healing it) is marked `bad`
in the spool with the reason and kept, and the rest of its batch goes on: one poison event
never stalls the spool. While a group is healed its rows are charged (`Spool.charge`): a
worker killed then counts against those rows only, and a row that killed `MAX_CLAIMS`
workers is marked bad, while the rest of the batch is claimed again as it was. An error of the
memory itself (locked past its timeout, unreadable) is no event's fault: the batch goes back
to `pending` and the worker stops with that error; except a memory write cut off inside its
transaction by a lost connection to a Postgres state that is back (the transaction known
rolled back): the batch goes back to `pending` and is healed again, `CUT_WRITE_RETRIES` times
in a row at most (every transaction that ended stays recorded once: nothing is recorded twice).
A storm is paid per batch, not per event: claims grow while batches are fast (`next_claim`),
rows are marked done a batch at a time, and the reports of incidents that events were attached
to are re-rendered once the spool is empty (or every `REPORT_EVERY_S`), not at each batch.

At its start a worker opens the spool and the memory with their integrity checks (a damaged
file is moved aside and reported), imports what producers appended to the fallback file,
clears what dead runs left (`patchit.loop.recovery`) and resumes the incidents they left open,
except one whose heals died `[worker] max_crashes` times: that one is marked `failed`, the
crashes in its report, and never resumed again (`patchit.loop.recovery.give_up_crashed`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from patchit.config import load_deployment
from patchit.delivery.track import track
from patchit.errors import BadInputError, MemoryStoreError, PatchitError, SpoolError
from patchit.events.model import FailureSource, UniversalFailureEvent, repo_identity, validate_event
from patchit.intake.airflow_dbt import dbt_events_from_airflow
from patchit.intake.checkouts import NoCheckoutError, local_checkout, looked_at_once
from patchit.intake.spool import Spool, SpooledEvent, spool_where
from patchit.intake.storm import storm_class, storm_key
from patchit.loop.change_groups import FailureGroup
from patchit.loop.context import Context, build_context
from patchit.loop.loop import group_by_change, heal_group
from patchit.loop.recovery import give_up_crashed, sweep_dead_runs
from patchit.memory import Incident, Memory
from patchit.memory.fingerprint import cause_key, error_fingerprint
from patchit.reports.refresh import refresh_report
from patchit.sandbox.git import repo_root, run_git
from patchit.state.liveness import claim_owner
from patchit.state.pg import StateDbError
from patchit.text.inputs import parse_json
from patchit.text.redaction import environment_secrets

NO_REPO = (
    "not healed: no git repository holding the failing commit is known for this task "
    "(map DAG bundles to repos with make_failure_callback(repos=...), or on the worker "
    'with [repos] "bundle:NAME" = "/path/to/checkout" in $PATCHIT_HOME/patchit.toml)'
)
Say = Callable[[str], None]
MakeContext = Callable[..., Context]
SWEEP_EVERY_S = 60.0
TRACK_EVERY_S = 600.0  # outcome tracking of merged fixes (`patchit track`) while idle
CUT_WRITE_RETRIES = 3  # a batch healed again after a memory write cut off (in a row)
# the reports of incidents that events were attached to are re-rendered once the spool is
# empty, and at most this often while it is not (a storm's: once, not at each of its batches)
REPORT_EVERY_S = 10.0
# a batch processed in less than this a row doubles the next claim, up to GROW_UP_TO times the
# batch size: a storm's rows, which only attach to its incident, are taken a thousand at a time
# (a commit and a report a batch, not a row); a batch that heals (seconds a row) sets the claim
# back, so slow rows do not pile up under one lease
GROW_BELOW_S_A_ROW = 0.02
GROW_UP_TO = 20


@dataclass
class WorkerStats:
    """What one worker run did: spool rows processed and marked bad, incidents touched."""

    processed: int = 0
    bad: int = 0
    incidents: set[str] = field(default_factory=set)
    resumed: int = 0


@dataclass
class _Batch:
    """One claimed batch: parsed events by kind, and which spool row each came from (by the
    event object: two rows may carry one `event_id`). With its `spool`, the rows of the
    events being healed are charged meanwhile (`processing`)."""

    spool: Spool | None = None
    row_of: dict[int, int] = field(default_factory=dict)  # id(event) -> spool row id
    dbt: list[UniversalFailureEvent] = field(default_factory=list)
    other: list[UniversalFailureEvent] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)  # row id -> reason

    def add(self, row_id: int, event: UniversalFailureEvent, is_dbt: bool) -> None:
        self.row_of[id(event)] = row_id
        (self.dbt if is_dbt else self.other).append(event)

    def fail(self, events: list[UniversalFailureEvent], reason: str) -> None:
        for event in events:
            self.failed.setdefault(self.row_of[id(event)], reason)

    @contextmanager
    def processing(self, events: list[UniversalFailureEvent]) -> Iterator[None]:
        """Charge the spool rows of `events` while they are healed: a kill meanwhile counts
        against them, not against the rest of the batch."""
        rows = sorted({self.row_of[id(e)] for e in events}) if self.spool else []
        if self.spool and rows:
            self.spool.charge(rows)
        try:
            yield
        finally:
            if self.spool and rows:
                self.spool.refund(rows)


def next_claim(claim: int, batch_size: int, elapsed_s: float, rows: int) -> int:
    """How many rows the next claim takes after a batch of `rows` took `elapsed_s`: twice
    `claim` (at most `GROW_UP_TO` batch sizes) when it was fast a row, else `batch_size`."""
    if rows and elapsed_s < GROW_BELOW_S_A_ROW * rows:
        return min(claim * 2, batch_size * GROW_UP_TO)
    return batch_size


def _internal(exc: Exception) -> str:
    """One line for an error patchit did not expect (its message's first line)."""
    return f"internal error {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"


def _has_commit(repo: Path, commit: str | None, seen: set[tuple[Path, str]]) -> bool:
    """Whether `repo` holds `commit`; one found is in `seen` and not asked again (a storm's
    every batch asked git twice)."""
    if commit is None:
        return False
    if (repo, commit) in seen:
        return True
    if repo_root(repo) is None:
        return False
    found = run_git(repo, "cat-file", "-t", commit, check=False).strip() == "commit"
    if found and len(seen) < 10_000:
        seen.add((repo, commit))
    return found


def parse_spooled(row: SpooledEvent, secrets: list[str] | None = None) -> UniversalFailureEvent:
    """The event of a spool row; ValueError (with the reason) when it is not a valid event.
    `secrets`: redacted from it (else the environment's, read for this row)."""
    try:
        return validate_event(parse_json(row.payload, "payload"), "payload", secrets)
    except BadInputError as exc:
        raise ValueError(str(exc).removeprefix("payload: ")) from exc


class Worker:
    """Takes batches from the spool under `home` until it is empty or asked to stop.

    `make_context(home, repo, memory=, say=, owner=)` builds the loop's context for a
    repository (default `build_context`: the installed plugins); tests and the race bench
    pass one with the library's `FakeHarness`.
    """

    def __init__(
        self,
        home: Path,
        say: Say = lambda _msg: None,
        batch_size: int = 50,
        lease_s: float = 3600.0,
        make_context: MakeContext = build_context,
        max_crashes: int | None = None,
    ) -> None:
        self.home = home
        self.max_crashes = max_crashes or load_deployment(home).worker.max_crashes
        self.say = say
        self.batch_size = batch_size
        self._claim = batch_size  # rows the next claim takes (grows while batches are fast)
        self.lease_s = lease_s
        self.make_context = make_context
        self.owner = claim_owner()
        self.stats = WorkerStats()
        # one loop context per repository for the whole run: plugins are loaded once and a
        # warm harness (dbt worker, Airflow parent) serves every batch, not just one
        self._contexts: dict[str, Context] = {}
        self._unmapped: dict[str, str] = {}  # repo_identity -> how to map it (no checkout here)
        self._swept_at = 0.0
        self._tracked_at = 0.0
        self._cut_writes = 0  # memory writes cut off in a row (see CUT_WRITE_RETRIES)
        self._commits: set[tuple[Path, str]] = set()  # (repo, commit) found there
        self._stale: set[str] = set()  # incidents whose reports miss events attached since
        self._reported_at = time.monotonic()

    def run(
        self, once: bool, poll_s: float = 2.0, stop: Callable[[], bool] = lambda: False
    ) -> WorkerStats:
        """Process batches; with `once` return once the spool is empty, else poll until stop()."""
        try:
            with Spool.open(self.home, check=True) as spool, Memory.open(self.home) as memory:
                for notice in [*spool.notices, *memory.notices]:
                    self.say(notice)
                try:
                    self.recover(memory)
                    self._run_batches(spool, memory, once, poll_s, stop)
                finally:
                    self._close_contexts()
        except (sqlite3.Error, StateDbError) as exc:  # the memory's are MemoryStoreError
            raise SpoolError(
                f"{spool_where(self.home)}: the spool could not be used ({exc}); "
                + (
                    "retry when the process holding it is done"
                    if "locked" in str(exc) or getattr(exc, "busy", False)
                    else "check the state server, then retry"
                    if isinstance(exc, StateDbError)
                    else "the next worker run checks it and moves it aside if it is damaged"
                )
            ) from exc
        return self.stats

    def heal_payloads(self, payloads: list[str]) -> dict[int, str]:
        """Heal events handed over directly (the `patchit_heal` DAG's run conf), as a batch
        claimed from the spool is healed, but without the spool: the caller keeps the events
        until this returns (a memory write cut off is healed again here, as a spooled batch
        would be). Why each one that could not be processed failed, by index."""
        with Memory.open(self.home) as memory:
            for notice in memory.notices:
                self.say(notice)
            try:
                self.recover(memory)
                rows = [SpooledEvent(i, payload, 1) for i, payload in enumerate(payloads)]
                while True:
                    try:
                        batch = self._heal_rows(rows, memory, where="event")
                        self._cut_writes = 0
                        break
                    except MemoryStoreError as exc:  # rolled back: heal the events again
                        if not self._may_retry(exc):
                            raise
                        self.say(f"a memory write was cut off ({exc}): healing the "
                                 f"{len(rows)} event(s) again")  # fmt: skip
                self._refresh_reports(memory)
            finally:
                self._close_contexts()
        self.stats.processed += len(payloads) - len(batch.failed)
        self.stats.bad += len(batch.failed)
        return batch.failed

    def _has(self, repo: Path, commit: str | None) -> bool:
        return _has_commit(repo, commit, self._commits)

    def _close_contexts(self) -> None:
        for ctx in self._contexts.values():
            ctx.close()
        self._contexts.clear()

    def recover(self, memory: Memory) -> None:
        """Clear what dead runs left and resume the incidents they left open."""
        self._swept_at = time.monotonic()
        sweep = sweep_dead_runs(self.home, memory, self.owner)
        if line := sweep.summary():
            self.say(line)
        for incident in memory.abandoned_incidents():
            try:
                self._recover_one(incident, memory)
            except MemoryStoreError:
                raise
            except Exception as exc:  # one incident that cannot be resumed stops no worker
                why = str(exc) if isinstance(exc, PatchitError) else _internal(exc)
                self.say(f"incident {incident.id}: not resumed ({why}); left open")
                if memory.claim_incident(incident.id, self.owner, ttl_s=60):
                    memory.release_incident(incident.id, self.owner)  # not tried every run

    def _recover_one(self, incident: Incident, memory: Memory) -> None:
        """Resume an abandoned incident, or give it up when its heals died too often."""
        if (crashes := memory.crashes_of(incident.id)) >= self.max_crashes:
            if give_up_crashed(self.home, memory, incident, crashes, self.owner):
                self.say(f"incident {incident.id}: failed, not resumed again: healing it "
                         f"stopped the worker {crashes} times (see its report)")  # fmt: skip
            return
        while True:
            try:
                self._resume(incident, memory)
                self._cut_writes = 0  # a success: the cuts are counted in a row
                return
            except MemoryStoreError as exc:
                if not self._may_retry(exc):
                    raise
                self.say(f"a memory write was cut off ({exc}): resuming {incident.id} again")

    def track(self, memory: Memory) -> None:
        """One pass of outcome tracking; a failure of it never stops the worker."""
        self._tracked_at = time.monotonic()
        try:
            track(memory, self.say, home=self.home)
        except MemoryStoreError:
            raise
        except PatchitError as exc:
            self.say(f"outcome tracking skipped: {exc}")
        except Exception as exc:  # tracking is a side task: it never stops the worker
            self.say(f"outcome tracking skipped: {_internal(exc)}")

    def _run_batches(
        self, spool: Spool, memory: Memory, once: bool, poll_s: float, stop: Callable[[], bool]
    ) -> None:
        while not stop():
            if self.run_batch(spool, memory):
                continue
            self._refresh_reports(memory)
            if once:
                self.track(memory)
                break
            if time.monotonic() - self._swept_at > SWEEP_EVERY_S:
                self.recover(memory)  # a sibling worker may have died meanwhile
            if time.monotonic() - self._tracked_at > TRACK_EVERY_S:
                self.track(memory)
            deadline = time.monotonic() + poll_s
            while not stop() and time.monotonic() < deadline:
                time.sleep(min(0.2, poll_s))
        self._refresh_reports(memory)

    def _refresh_reports(self, memory: Memory, every_s: float = 0.0) -> None:
        """Re-render the reports events were attached to since the last time (`REPORT_EVERY_S`)."""
        if not self._stale or time.monotonic() - self._reported_at < every_s:
            return
        stale, self._stale = sorted(self._stale), set()
        self._reported_at = time.monotonic()
        for incident_id in stale:
            refresh_report(memory, incident_id)

    def run_batch(self, spool: Spool, memory: Memory) -> int:
        """Claim, group and process one batch; the number of spool rows it claimed."""
        if imported := spool.import_fallback():
            self.say(f"imported {imported} event(s) that producers wrote to the fallback file")
        started = time.monotonic()
        rows = spool.claim(self.owner, self._claim, self.lease_s)
        try:
            batch = self._heal_rows(rows, memory, spool=spool)
        except MemoryStoreError as exc:
            spool.release([row.id for row in rows])  # not the events' fault: keep them
            if not self._may_retry(exc):
                raise
            self.say(f"a memory write was cut off ({exc}): {len(rows)} event(s) given back "
                     "to the spool, healed again")  # fmt: skip
            return len(rows)
        self._cut_writes = 0
        done = [row.id for row in rows if row.id not in batch.failed]
        spool.mark_all_done(done)
        self.stats.processed += len(done)
        for row_id, reason in batch.failed.items():
            spool.mark_bad(row_id, reason)
            self.stats.bad += 1
            self.say(f"could not process spool row {row_id} (kept as bad): {reason}")
        self._refresh_reports(memory, REPORT_EVERY_S)
        took = time.monotonic() - started
        self._claim = next_claim(self._claim, self.batch_size, took, len(rows))
        return len(rows)

    def _may_retry(self, exc: MemoryStoreError) -> bool:
        """Whether the work a memory error stopped is run again: a write cut off by a lost
        connection that is back, its transaction rolled back; `CUT_WRITE_RETRIES` in a row."""
        if not exc.retryable or self._cut_writes >= CUT_WRITE_RETRIES:
            return False
        self._cut_writes += 1
        return True

    def _heal_rows(
        self,
        rows: list[SpooledEvent],
        memory: Memory,
        where: str = "spool row",
        spool: Spool | None = None,
    ) -> _Batch:
        """Parse, group and heal the events of `rows`; the batch says which rows failed."""
        batch = _Batch(spool)
        secrets = environment_secrets()  # once per batch, not per row (a storm's 10,000)
        with looked_at_once():  # and each checkout looked at once
            for row in rows:
                try:
                    self._add_row(batch, row, where, secrets)
                except Exception as exc:  # whatever reading a row raises, only that row is bad
                    batch.failed[row.id] = f"{where} {row.id}: {_internal(exc)}"
        self._heal_others(batch, memory)
        self._heal_dbt(batch, memory)
        return batch

    def _add_row(
        self,
        batch: _Batch,
        row: SpooledEvent,
        where: str = "spool row",
        secrets: list[str] | None = None,
    ) -> None:
        try:
            event = parse_spooled(row, secrets)
        except ValueError as exc:
            batch.failed[row.id] = f"{where} {row.id}: {exc}"
            return
        try:
            event = local_checkout(event, self.home)  # by remote URL or bundle: this host's clone
        except NoCheckoutError as exc:
            if event.source is not FailureSource.AIRFLOW:  # a dbt event is healed or bad
                batch.failed[row.id] = str(exc)
                return
            # kept as it came: recorded open ("no repository known"), with how to map it
            self._unmapped[repo_identity(event) or ""] = exc.hint
        except BadInputError as exc:  # a [repos] mapping that is wrong
            batch.failed[row.id] = str(exc)
            return
        try:
            converted = None
            if event.source is FailureSource.AIRFLOW:
                converted = dbt_events_from_airflow(event)
            for one in converted or [event]:
                cause_key(one)  # a key that cannot be computed fails this row, not the batch
        except Exception as exc:  # a poison event: only its own row is bad
            batch.failed[row.id] = f"{where} {row.id}: {_internal(exc)}"
            return
        if converted:
            self.say(f"{event.short()} ran dbt: healing its {len(converted)} failed node(s)")
            for dbt_event in converted:
                batch.add(row.id, dbt_event, is_dbt=True)
        else:
            batch.add(row.id, event, is_dbt=event.source is FailureSource.DBT)

    def _heal_others(self, batch: _Batch, memory: Memory) -> None:
        """Airflow failures: an outside cause's storm healed as one group; the others, where
        their repository is known, one group per breaking change (`_heal_changes`); recorded
        open by storm or cause key where it is not."""
        groups: dict[tuple[str, str | None], list[UniversalFailureEvent]] = {}
        storms: set[str] = set()
        for event in batch.other:
            try:
                storm = storm_key(event)
                key = storm or cause_key(event)
            except Exception as exc:
                batch.fail([event], f"{event.short()}: {_internal(exc)}")
                continue
            groups.setdefault((key, event.repo_path), []).append(event)
            if storm:
                storms.add(storm)
        by_change: dict[str | None, tuple[Context, list[UniversalFailureEvent]]] = {}
        for (key, repo), events in groups.items():
            with batch.processing(events):
                ctx = self._other_context(batch, key, repo, events, memory)
            if ctx is None:
                continue
            if key not in storms:  # the tasks one change broke are healed together below
                by_change.setdefault(repo, (ctx, []))[1].extend(events)
                continue
            with batch.processing(events):
                error = self._heal_group(events, ctx, key)
            if error:
                batch.fail(events, error)
        for ctx, events in by_change.values():
            self._heal_changes(batch, events, ctx)

    def _other_context(
        self,
        batch: _Batch,
        key: str,
        repo: str | None,
        events: list[UniversalFailureEvent],
        memory: Memory,
    ) -> Context | None:
        """The context a group of Airflow failures is healed in; None when the group is recorded
        open (no repository known) or failed."""
        try:
            if repo is None or not self._has(Path(repo), events[0].commit):
                self._record_group(key, events, memory)
                return None
            return self._context(Path(repo), memory)
        except MemoryStoreError:
            raise
        except PatchitError as exc:
            batch.fail(events, f"{events[0].short()}: {exc}")
        except Exception as exc:
            batch.fail(events, f"{events[0].short()}: {_internal(exc)}")
        return None

    def _record_group(self, key: str, events: list[UniversalFailureEvent], memory: Memory) -> None:
        first = events[0]
        incident, created = memory.open_or_attach(first, error_fingerprint(first), key)
        memory.attach_events(incident.id, [(e, error_fingerprint(e)) for e in events[1:]], key)
        if not created:
            self._stale.add(incident.id)  # its report: its events, the latest commit
        self.stats.incidents.add(incident.id)
        cls = storm_class(first)
        if incident.status == "open":
            memory.update_incident(
                incident.id,
                summary=NO_REPO,
                **({"classification": cls} if cls and not incident.classification else {}),
            )
        what = "new incident" if created else f"attached to incident ({incident.status})"
        storm = f", storm of {cls}" if cls else ""
        hint = self._unmapped.get(repo_identity(first) or "")
        self.say(f"{first.short()}: {len(events)} event(s), {what} {incident.id}{storm}; "
                 "left open: no repository known" + (f" ({hint})" if hint else ""))  # fmt: skip

    def _heal_dbt(self, batch: _Batch, memory: Memory) -> None:
        by_repo: dict[str | None, list[UniversalFailureEvent]] = {}
        for event in batch.dbt:
            by_repo.setdefault(event.repo_path, []).append(event)
        for repo, events in by_repo.items():
            if repo is None or events[0].commit is None:
                batch.fail(events, f"{events[0].short()}: no repo_path/commit, cannot heal")
                continue
            try:
                with batch.processing(events):  # a warm-up that kills counts against these
                    ctx = self._context(Path(repo), memory)
            except MemoryStoreError:
                raise
            except PatchitError as exc:
                batch.fail(events, f"{events[0].short()}: {exc}")
                continue
            except Exception as exc:
                batch.fail(events, f"{events[0].short()}: {_internal(exc)}")
                continue
            self._heal_changes(batch, events, ctx)

    def _heal_changes(
        self, batch: _Batch, events: list[UniversalFailureEvent], ctx: Context
    ) -> None:
        """One incident per breaking change of one repository's events (`group_by_change`)."""
        try:
            groups = group_by_change(events, ctx.memory)
        except MemoryStoreError:
            raise
        except Exception as exc:  # grouping is a best guess: never the events' fault
            self.say(f"grouping by change failed ({_internal(exc)}): grouped by cause")
            by_cause: dict[str, list[UniversalFailureEvent]] = {}
            for event in events:  # the keys were computed once already: they do not raise
                by_cause.setdefault(cause_key(event), []).append(event)
            groups = [FailureGroup(key, group) for key, group in by_cause.items()]
        for group in groups:
            with batch.processing(group.events):
                error = self._heal_group(group.events, ctx, group.key)
            if error:
                batch.fail(group.events, error)

    def _heal_group(
        self, group: list[UniversalFailureEvent], ctx: Context, key: str | None = None
    ) -> str:
        """Heal one group; "" or why it could not be processed."""
        try:
            outcome = heal_group(group, ctx, key, refresh=self._stale.add)
        except MemoryStoreError:
            raise
        except PatchitError as exc:
            return f"{group[0].short()}: {exc}"
        except Exception as exc:  # one broken group must not stop the others: record it
            return f"{group[0].short()}: {_internal(exc)}"
        incident = outcome.incident
        self.stats.incidents.add(incident.id)
        branch = f", branch {incident.branch}" if incident.branch else ""
        self.say(f"incident {incident.id}: {incident.status}{branch}")
        return ""

    def _resume(self, incident: Incident, memory: Memory) -> None:
        """Heal an open incident again whose run died, from its latest event, with the other
        failed units of its commit."""
        events = memory.events_for(incident.id)
        event = events[-1] if events else None
        if event is not None:
            try:  # another host's worker may have stored it
                event = local_checkout(event, self.home)
            except NoCheckoutError:
                pass  # as it came: nothing to resume from below
            except BadInputError as exc:
                self.say(f"incident {incident.id}: cannot resume here: {exc}")
                return
        if event is None:
            self.say(f"incident {incident.id}: not resumed: no event is recorded for it "
                     "(heal its failure from its event: `patchit heal EVENT.json`)")  # fmt: skip
        repo = event.repo_path if event else None
        if event is None or repo is None or not self._has(Path(repo), event.commit):
            if memory.claim_incident(incident.id, self.owner, ttl_s=60):
                memory.release_incident(incident.id, self.owner)  # nothing to resume from
            return
        self.say(f"incident {incident.id}: resuming (the run healing it was stopped)")
        try:
            ctx = self._context(Path(repo), memory)
        except MemoryStoreError:
            raise
        except PatchitError as exc:
            self.say(f"incident {incident.id}: cannot resume: {exc}")
            return
        # the other units of its run, verified with it (`related_units`); stored, not re-added
        units = {e.unit_id: e for e in events if e.commit == event.commit}
        units.pop(event.unit_id, None)
        if error := self._heal_group([event, *units.values()], ctx, incident.cause_key):
            self.say(f"incident {incident.id}: could not resume: {error}")
        else:
            self.stats.resumed += 1

    def _context(self, repo: Path, memory: Memory) -> Context:
        """The loop's context for `repo`, built once per run."""
        cached = self._contexts.get(str(repo))
        if cached is None:
            cached = self.make_context(
                self.home, repo, memory=memory, say=self.say, owner=self.owner
            )
            self._contexts[str(repo)] = cached
        return cached
