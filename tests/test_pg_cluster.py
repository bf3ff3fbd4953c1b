"""The throw-away cluster's guard: missing server binaries fail the test with what to run,
they never skip it (a skip would hide a broken `make test` install). No process starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.bench import pg_server as pg_cluster


def test_missing_binaries_fail_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_cluster, "PG_BIN", tmp_path)
    cluster = pg_cluster.pg_cluster()
    with pytest.raises(pg_cluster.PostgresMissing, match=r"make postgres.*postgresql-15"):
        cluster.__enter__()
    assert list(tmp_path.iterdir()) == []
