"""patchit.policy: the safety policy and the pre-check run before any verification."""

from patchit.policy.policy import check_policy, match_glob
from patchit.policy.precheck import AttemptMemory, precheck

__all__ = ["AttemptMemory", "check_policy", "match_glob", "precheck"]
