"""Which columns read from outside the repo changed type since the last good run.

An upstream schema change (the EL sync now delivers `created` as a timestamp, not epoch
seconds) breaks a model whose SQL did not change, often one in a package under
`dbt_packages/`. It is the data's fault, and the report should say which column moved from
which type to which.

Where the last good run's types are read: from the data files the breaking change edited (a
landing or seed file the run loads), typed at the last good commit and at the failing one by
the reader the warehouse uses (DuckDB's CSV/JSON sniffer). The warehouse cannot say: it holds
only the new table, and dbt's artifacts carry no column types (catalog.json exists only after a
`dbt docs generate`). Each side is typed the same way, so the sniffer's choices cancel out:
what differs is what the data now is.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from patchit.evidence.model import Evidence, TypeChange
from patchit.sandbox.git import show_file

_READERS = {".csv": "read_csv", ".tsv": "read_csv", ".json": "read_json",
            ".jsonl": "read_json", ".ndjson": "read_json"}  # fmt: skip
_MAX_BYTES = 5_000_000


def _types_of(text: str, suffix: str, notes: list[str]) -> dict[str, str] | None:
    """column -> type of a data file's text, as DuckDB's reader types it; None when unread."""
    try:
        import duckdb
    except ImportError:
        return None
    with tempfile.TemporaryDirectory(prefix="patchit-types-") as tmp:
        path = Path(tmp) / f"data{suffix}"
        path.write_text(text, encoding="utf-8")
        try:
            with duckdb.connect() as con:
                rows = con.execute(
                    f"describe select * from {_READERS[suffix]}(?)", [str(path)]
                ).fetchall()
        except duckdb.Error as exc:
            notes.append(f"could not type a data file: {str(exc).splitlines()[0]}")
            return None
    return {str(r[0]): str(r[1]) for r in rows}


def _relation_name(evidence: Evidence, path: str) -> str:
    """The source a landing file feeds (`stripe.charge` for .../stripe/charge.csv), else the
    file's path."""
    stem = Path(path).stem.lower()
    parent = Path(path).parent.name.lower()
    hits = [(s, t) for s, t in evidence.index.sources if t.lower() == stem]
    best = next(((s, t) for s, t in hits if s.lower() == parent), hits[0] if hits else None)
    return f"{best[0]}.{best[1]} ({path})" if best else path


def data_file_type_changes(
    evidence: Evidence, repo: Path, base: str | None, head: str, notes: list[str]
) -> list[TypeChange]:
    """The columns whose type differs between `base` and `head` in the changed data files."""
    if base is None:
        return []
    changes: list[TypeChange] = []
    for path in evidence.changed_files:
        suffix = Path(path).suffix.lower()
        if suffix not in _READERS or Path(path).stem in evidence.index.seeds:
            continue  # a seed is the project's own relation: its change is no upstream drift
        old_text, new_text = show_file(repo, base, path), show_file(repo, head, path)
        if old_text is None or new_text is None:
            continue  # added, deleted or not UTF-8 text: no type to compare
        if max(len(old_text), len(new_text)) > _MAX_BYTES:
            notes.append(f"{path}: too large to type its columns")
            continue
        old = _types_of(old_text, suffix, notes)
        new = _types_of(new_text, suffix, notes)
        if old is None or new is None:
            continue
        relation = _relation_name(evidence, path)
        for column, was in old.items():
            now = new.get(column)
            if now is not None and now != was:
                changes.append(TypeChange(relation=relation, column=column, old=was, new=now))
    return changes
