"""Attempts in the memory: every candidate tried (or refused) per incident and fingerprint,
and the queries the pre-check and the strategies ask (repeats, failed tags, history)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol

from patchit.memory.diffs import diff_hash
from patchit.memory.records import AttemptOutcome, AttemptRecord, PriorAttempt
from patchit.memory.sqlite import SqliteStore, now_utc
from patchit.text.redaction import Redactor, environment_secrets

TRIED_OUTCOMES = ("verified", "failed", "needs_review")
_TRIED = ", ".join("?" * len(TRIED_OUTCOMES))
# a repeat is a diff known to fail (verification failed, or the screen rejected it: it fails
# just as well) or one that landed; a diff that passed but was held for review is not: the
# human may relax the policy (`revert = "allow"`), and the next run must verify it again
SEEN_OUTCOMES = ("verified", "failed", "screened_out")
_SEEN = ", ".join("?" * len(SEEN_OUTCOMES))


class CandidateEdit(Protocol):
    @property
    def path(self) -> str: ...


class Candidate(Protocol):
    """A patch candidate as the memory reads it (`patchit.patching.base.PatchCandidate` is
    one): memory sits below patching and does not import it."""

    @property
    def strategy(self) -> str: ...
    @property
    def tag(self) -> str: ...
    @property
    def tier(self) -> int: ...
    @property
    def edits(self) -> Sequence[CandidateEdit]: ...
    @property
    def tokens_in(self) -> int: ...
    @property
    def tokens_out(self) -> int: ...
    @property
    def cost_usd(self) -> float: ...


def redacted_verified_json(verified_json: str | None, redactor: Redactor) -> str | None:
    """A verified attempt's JSON with every field redacted but the candidate's edits: those
    are the patch itself, landed verbatim after a crash (they were made from redacted
    evidence). JSON that does not parse is kept redacted as text (it cannot land anyway)."""
    if verified_json is None:
        return None
    try:
        data = json.loads(verified_json)
    except ValueError:
        return redactor.redact(verified_json)
    candidate = data.get("candidate") if isinstance(data, dict) else None
    edits = candidate.pop("edits", None) if isinstance(candidate, dict) else None
    data = redactor.redact_leaves(data)
    if edits is not None:
        data["candidate"]["edits"] = edits
    return json.dumps(data)


class AttemptStore(SqliteStore):
    def record_attempt(
        self,
        incident_id: str,
        fingerprint: str,
        candidate: Candidate,
        diff: str,
        outcome: AttemptOutcome | str,
        reason: str = "",
        verification_output: str = "",
        duration_ms: int = 0,
        commit: str | None = None,
        verified_json: str | None = None,
    ) -> int:
        """Store one attempt (the diff's normalised hash included); returns its id.

        A verified attempt carries `verified_json` (the candidate, its verification and data
        check) and the `commit` it was verified on: it is recorded before it lands, so a run
        killed in between leaves what the next run needs to land it."""
        files = list(dict.fromkeys(edit.path for edit in candidate.edits))
        redactor = Redactor(environment_secrets())
        row = {
            "incident_id": incident_id,
            "fingerprint": fingerprint,
            "diff_hash": diff_hash(diff),
            "strategy": candidate.strategy,
            "tag": candidate.tag,
            "tier": candidate.tier,
            "files": json.dumps(files),
            "diff": redactor.mask_named(diff),  # code: patterns would garble it
            "outcome": AttemptOutcome(outcome).value,
            "reason": redactor.redact(reason),
            "verification_output": redactor.redact(verification_output),
            "duration_ms": duration_ms,
            "tokens_in": candidate.tokens_in,
            "tokens_out": candidate.tokens_out,
            "cost_usd": candidate.cost_usd,
            "created_utc": now_utc().isoformat(),
            "commit": commit,
            "verified_json": redacted_verified_json(verified_json, redactor),
        }
        with self._write() as db:
            self._require_incident(incident_id)
            table = db.table("attempts").insert(row)
            db.table("incidents").update(incident_id, {"updated_utc": row["created_utc"]})
        return int(table.last_pk or 0)

    def record_refusal(
        self, incident_id: str, fingerprint: str, candidate: Candidate, diff: str, reason: str
    ) -> int:
        """A candidate the pre-check refused: kept for the report, never counted as tried."""
        return self.record_attempt(
            incident_id, fingerprint, candidate, diff, AttemptOutcome.REFUSED, reason=reason
        )

    def attempts_for(self, incident_id: str) -> list[AttemptRecord]:
        rows = self._rows(
            "select * from attempts where incident_id = ? order by id", (incident_id,)
        )
        return [AttemptRecord.model_validate({**r, "files": json.loads(r["files"])}) for r in rows]

    def attempt_count(self, fingerprint: str) -> int:
        """Attempts on this fingerprint that reached verification (a harness limit does not
        count: it says nothing about the candidate; nor does a screened-out one: it cost
        milliseconds, not a run)."""
        rows = self._rows(
            f"select count(*) as n from attempts where fingerprint = ? and outcome in ({_TRIED})",
            (fingerprint, *TRIED_OUTCOMES),
        )
        return int(rows[0]["n"])

    def history(self, fingerprint: str) -> list[PriorAttempt]:
        """Every attempt on this fingerprint, oldest first, as strategies see them."""
        rows = self._rows(
            "select diff_hash, tag, outcome, diff, reason,"
            " coalesce(verification_output, '') as output from attempts"
            " where fingerprint = ? order by id",
            (fingerprint,),
        )
        return [PriorAttempt.model_validate(r) for r in rows]

    def seen_diff(self, fingerprint: str, diff_hash: str, incident_id: str | None = None) -> bool:
        """Whether this normalised diff already failed verification, was screened out, or
        landed, for this fingerprint.

        A diff that verified but never landed (its run died first) is not a repeat: it may
        be verified again and land. Nor is one held for review (`needs_review`): it passed,
        and what held it (the policy, the data check's baseline) may have changed since. With
        `incident_id`, one that landed for another incident is not either: it passed there,
        and this incident's breaking commit is other code (the same rename made again after
        the first fix was thrown away); only a failed idea is never tried twice."""
        landed_elsewhere = " or incident_id != ?" if incident_id is not None else ""
        rows = self._rows(
            "select 1 from attempts where fingerprint = ? and diff_hash = ?"
            f" and outcome in ({_SEEN})"
            f" and not (outcome = 'verified' and (landed_branch is null{landed_elsewhere}))"
            " limit 1",
            (fingerprint, diff_hash, *SEEN_OUTCOMES,
             *([incident_id] if incident_id is not None else [])),
        )  # fmt: skip
        return bool(rows)

    def verified_for(self, incident_id: str) -> list[AttemptRecord]:
        """The incident's verified attempts that can land (they carry their candidate), landed
        ones first, then by id."""
        rows = self._rows(
            "select * from attempts where incident_id = ? and outcome = 'verified'"
            " and verified_json is not null order by landed_branch is null, id",
            (incident_id,),
        )
        return [AttemptRecord.model_validate({**r, "files": json.loads(r["files"])}) for r in rows]

    def mark_landed(self, attempt_id: int, branch: str) -> None:
        """The verified attempt is on `branch` now."""
        with self._write() as db:
            db.execute("update attempts set landed_branch = ? where id = ?", (branch, attempt_id))

    def failed_tags(self, fingerprint: str) -> set[str]:
        """Strategy buckets whose candidates failed verification on this fingerprint (a
        screened-out candidate bars its diff, not its bucket: the bucket's next candidate
        costs a screen, not a run)."""
        rows = self._rows(
            "select distinct tag from attempts where fingerprint = ? and outcome = ?",
            (fingerprint, AttemptOutcome.FAILED.value),
        )
        return {r["tag"] for r in rows}
