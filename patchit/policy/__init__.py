"""patchit.policy: the safety policy and the pre-check run before any verification, and whose
settings a heal obeys (`settings`: the operator's, and a repository's only where they narrow
them)."""

from patchit.policy.policy import check_policy, match_glob
from patchit.policy.precheck import AttemptMemory, precheck

__all__ = ["AttemptMemory", "check_policy", "match_glob", "precheck"]
