"""Pre-check of a candidate before any sandbox is spent on it: policy, then attempt memory."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from patchit.config import PolicyConfig
from patchit.memory.diffs import diff_hash
from patchit.patching.base import PatchCandidate
from patchit.policy.policy import check_policy


class AttemptMemory(Protocol):
    """What the pre-check asks of the attempt memory (`patchit.memory.Memory` provides it)."""

    def seen_diff(
        self, fingerprint: str, diff_hash: str, incident_id: str | None = None
    ) -> bool: ...

    def failed_tags(self, fingerprint: str) -> set[str]: ...


def precheck(
    candidate: PatchCandidate,
    diff: str,
    fingerprint: str,
    repo_root: Path,
    policy: PolicyConfig,
    memory: AttemptMemory,
    incident_id: str | None = None,
) -> str | None:
    """A one-line refusal reason, or None when the candidate may go to verification.

    Memory refuses a diff whose normalised hash was already verified or failed for this
    fingerprint (it would be the same experiment twice; one that passed and landed for
    another incident than `incident_id` is not a repeat), and any candidate of a strategy bucket
    that already failed for it (the next try must be a different idea, not a variant).
    """
    reason = check_policy(candidate, repo_root, policy)
    if reason:
        return f"policy: {reason}"
    hashed = diff_hash(diff)
    if memory.seen_diff(fingerprint, hashed, incident_id):
        return f"repeated diff {hashed[:12]}: already tried for fingerprint {fingerprint}"
    if candidate.tag in memory.failed_tags(fingerprint):
        return f"strategy bucket {candidate.tag!r} already failed for fingerprint {fingerprint}"
    return None
