"""Data-aware verification: a green candidate's outputs against a known good baseline's.

`check_candidate` is the one entry point the loop calls; `DataCheck` is what it returns.
"""

from patchit.fidelity.check import check_candidate
from patchit.fidelity.model import DataCheck, OutputDiff

__all__ = ["DataCheck", "OutputDiff", "check_candidate"]
