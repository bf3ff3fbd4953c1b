"""Short incident ids: the hex part (`7f2ec7`) or a prefix of it names one incident in
`report`, `heal`, `inspect`, `pr`, `approve` and `reject`; one naming several is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent
from patchit.memory import Memory, store
from patchit.memory.short_ids import looks_like_incident_id, resolve_incident_id
from tests.cli.helpers import patchit

IDS = ("20261120-7f2ec7", "20261121-7f2aa0", "20261122-0b1c2d")


def seed(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = iter(IDS)
    monkeypatch.setattr(store, "new_incident_id", lambda now=None: next(ids))
    with Memory.open(home) as memory:
        for n, wanted in enumerate(IDS):
            event = UniversalFailureEvent.model_validate(
                {"source": "dbt", "pipeline_id": "shop", "unit_id": f"model.shop.m{n}",
                 "error_type": "E", "error_message": f"m{n}", "repo_path": "/srv/shop"}
            )  # fmt: skip
            assert memory.create_incident(event, f"fp-{n}", f"ck-{n}").id == wanted


def test_short_forms_name_one_incident_or_are_refused(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(_patchit_home, monkeypatch)
    with Memory.open(_patchit_home) as memory:
        assert resolve_incident_id(memory, "7f2ec7") == IDS[0]
        assert resolve_incident_id(memory, "7F2E") == IDS[0]
        assert resolve_incident_id(memory, "0b1") == IDS[2]
        assert resolve_incident_id(memory, "20261121-7f") == IDS[1]
        assert resolve_incident_id(memory, IDS[2]) == IDS[2]
        with pytest.raises(BadInputError, match=r"names several incidents .*20261121-7f2aa0"):
            resolve_incident_id(memory, "7f2")
        with pytest.raises(BadInputError, match="'abcdef' not found"):
            resolve_incident_id(memory, "abcdef")
        with pytest.raises(BadInputError, match="'2ec7' not found"):
            resolve_incident_id(memory, "2ec7")  # the hex part's start, never its middle
    assert not looks_like_incident_id("ab") and not looks_like_incident_id("event.json")


def test_the_cli_takes_the_short_id(_patchit_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed(_patchit_home, monkeypatch)
    res = patchit("report", "0b1c")
    assert res.returncode == 2
    assert "incident 20261122-0b1c2d: no report yet" in res.stderr  # named in full
    res = patchit("report", "7f2")
    assert res.returncode == 2 and "names several incidents" in res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
