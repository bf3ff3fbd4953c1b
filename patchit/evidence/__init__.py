"""Evidence gathering: the failing code, its neighbours, history; secrets redacted first."""

from patchit.evidence.model import Evidence, ProjectIndex, Relation

__all__ = ["Evidence", "ProjectIndex", "Relation"]
