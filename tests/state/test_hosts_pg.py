"""Two hosts, one Postgres state: their clones of one repository sit at different paths, and
the failure each host spools becomes one incident, healed once, by whichever worker takes it.

The "hosts" are two `$PATCHIT_HOME`s on this machine; the other host's clone is out of sight
(its path does not exist here), so the worker maps the remote URL to its own clone through
`[repos]`. The runtime is the library's FakeHarness (as in the race); git, the fix-it, the
spool and the memory are real.
"""

from __future__ import annotations

import json
from pathlib import Path

from patchit.bench.race import RIGHT, fake_context
from patchit.intake.spool import Spool
from patchit.memory import Memory
from patchit.worker.worker import Worker
from tests.conftest import git
from tests.intake.test_checkouts import (
    JOB,
    bundle_checkouts,
    clones,
    failure,
    in_bundle,
    moved_away,
)


def test_two_hosts_clones_share_one_incident_healed_once(tmp_path: Path, state_url: str) -> None:
    a, b, url = clones(tmp_path)
    homes = {name: tmp_path / f"home-{name}" for name in ("a", "b")}
    for name, home in homes.items():
        home.mkdir()
        clone = a if name == "a" else b
        (home / "patchit.toml").write_text(
            f"[state]\nurl = {json.dumps(state_url)}\n[repos]\n{json.dumps(url)} = "
            f"{json.dumps(str(clone))}\n"
        )
    from_a = failure(a, url)
    # host a's clone is not on host b: the event names a path that does not exist there
    elsewhere = str(tmp_path / "host-a-only" / "dags")
    from_a = type(from_a).model_validate_json(from_a.model_dump_json().replace(str(a), elsewhere))
    from_b = failure(b, url)
    with Spool.open(homes["a"]) as spool:  # either home: one shared spool
        spool.put_many([from_a.model_dump(mode="json"), from_b.model_dump(mode="json")])
    stats = Worker(homes["b"], make_context=fake_context).run(once=True)
    assert stats.bad == 0 and stats.processed == 2
    assert Worker(homes["a"], make_context=fake_context).run(once=True).processed == 0
    with Memory.open(homes["a"]) as memory:
        [incident] = memory.list_incidents()
        assert incident.status.value == "fixed" and incident.repo_url == url
        assert incident.events == 2 and incident.repo_path == str(b)
        assert [a.outcome for a in memory.attempts_for(incident.id)].count("verified") == 1
    assert RIGHT in git(b, "show", f"{incident.branch}:{JOB}")
    assert git(a, "branch", "--list", "patchit/*").strip() == ""


def test_two_hosts_checkouts_of_one_bundle_share_one_incident_healed_once(
    tmp_path: Path, state_url: str
) -> None:
    """The same, for a DAG bundle checked out without a remote: `[repos] "bundle:dags"`."""
    a, b = bundle_checkouts(tmp_path)
    homes = {name: tmp_path / f"home-{name}" for name in ("a", "b")}
    for name, home in homes.items():
        home.mkdir()
        clone = a if name == "a" else b
        (home / "patchit.toml").write_text(
            f'[state]\nurl = {json.dumps(state_url)}\n[repos]\n"bundle:dags" = '
            f"{json.dumps(str(clone))}\n"
        )
    from_a = moved_away(in_bundle(failure(a, "")), a, tmp_path / "host-a-only" / "dags")
    from_b = in_bundle(failure(b, ""))
    with Spool.open(homes["a"]) as spool:
        spool.put_many([from_a.model_dump(mode="json"), from_b.model_dump(mode="json")])
    stats = Worker(homes["b"], make_context=fake_context).run(once=True)
    assert stats.bad == 0 and stats.processed == 2
    with Memory.open(homes["a"]) as memory:
        [incident] = memory.list_incidents()
        assert incident.status.value == "fixed" and incident.repo_url == "bundle:dags"
        assert incident.events == 2 and incident.repo_path == str(b)
    assert RIGHT in git(b, "show", f"{incident.branch}:{JOB}")
