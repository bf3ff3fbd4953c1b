"""Repositories named by remote URL: one name for every spelling of a remote, this host's clone
found from the event's path or `[repos]`, and clones at different paths sharing incidents."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchit.errors import BadInputError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.intake.airflow_scan import split_error
from patchit.intake.checkouts import NoCheckoutError, local_checkout, looked_at_once
from patchit.intake.gitinfo import normalise_remote, read_remote_url
from patchit.memory import Memory
from patchit.memory.fingerprint import cause_key, error_fingerprint
from tests.conftest import commit_all, git

JOB = "dags/totals.py"


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:acme/dags.git",
        "https://github.com/acme/dags",
        "https://bob:tok@GitHub.com/acme/dags.git/",
        "ssh://git@github.com:22/acme/dags.git",
    ],
)
def test_every_spelling_of_a_remote_is_one_name(url: str) -> None:
    assert normalise_remote(url) == "github.com/acme/dags"


@pytest.mark.parametrize(
    "url", ["../up", "./up.git", "up", "/srv/git/dags.git", "file:///srv/git/dags.git",
            "~/git/dags.git", "C:\\git\\dags", "  "],
)  # fmt: skip
def test_path_remotes_name_no_repository(url: str) -> None:
    assert normalise_remote(url) is None


def test_checkouts_whose_origin_is_the_same_relative_path_are_not_merged(
    tmp_path: Path, _patchit_home: Path
) -> None:
    """Two unrelated repositories, each with `origin = ../up`: no repo_url, so their
    same-cause failures stay two incidents, told apart by their paths."""
    events = []
    for name in ("one", "two"):
        repo = tmp_path / name / "dags"
        (repo / "dags").mkdir(parents=True)
        (repo / JOB).write_text('print({}["amout"])\n')
        git(repo, "init", "-q", "-b", "main")
        git(repo, "remote", "add", "origin", "../up")
        commit_all(repo, "job")
        assert read_remote_url(repo) is None
        events.append(failure(repo, ""))
    with Memory.open(_patchit_home) as memory:
        ids = {memory.open_or_attach(e, error_fingerprint(e), cause_key(e))[0].id for e in events}
    assert len(ids) == 2


def clones(tmp_path: Path) -> tuple[Path, Path, str]:
    """A bare repository with a failing job, cloned at two paths: ("host a", "host b", url)."""
    seed = tmp_path / "seed"
    (seed / "dags").mkdir(parents=True)
    (seed / JOB).write_text('rows = [{"amount": 3}]\nprint(sum(row["amout"] for row in rows))\n')
    git(seed, "init", "-q", "-b", "main")
    commit_all(seed, "totals")
    bare = tmp_path / "dags.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    a, b = tmp_path / "host-a" / "dags", tmp_path / "host-b" / "srv" / "dags"
    for clone in (a, b):
        clone.parent.mkdir(parents=True)
        git(tmp_path, "clone", "-q", str(bare), str(clone))
        # a path remote names no repository: the clones' origin as on a real deployment
        git(clone, "remote", "set-url", "origin", "git@git.example.com:acme/dags.git")
    url = read_remote_url(a)
    assert url == read_remote_url(b) == "git.example.com/acme/dags"
    return a, b, url or ""


def failure(repo: Path, url: str) -> UniversalFailureEvent:
    proc = subprocess.run([sys.executable, "-P", str(repo / JOB)], capture_output=True,
                          text=True, cwd=repo, check=False)  # fmt: skip
    error_type, message = split_error(proc.stderr)
    sha = git(repo, "rev-parse", "HEAD").strip()
    return UniversalFailureEvent(
        source=FailureSource.AIRFLOW, pipeline_id="totals", unit_id="total", unit_path=JOB,
        error_type=error_type, error_message=message, traceback=proc.stderr,
        repo_path=str(repo), commit=sha, repo_url=url or None,
    )  # fmt: skip


def test_an_event_from_another_hosts_clone_is_moved_to_this_hosts(
    tmp_path: Path, _patchit_home: Path
) -> None:
    a, b, url = clones(tmp_path)
    from_a, from_b = failure(a, url), failure(b, url)
    assert str(a) in (from_a.traceback or "")
    assert local_checkout(from_b, _patchit_home) is from_b  # already this host's clone
    gone = from_a.model_copy(update={"repo_path": str(tmp_path / "not-here" / "dags")})
    with pytest.raises(BadInputError, match=r"has no checkout on this host.*\[repos\]") as err:
        local_checkout(gone, _patchit_home)
    assert "\n" not in str(err.value)
    _patchit_home.mkdir()
    (_patchit_home / "patchit.toml").write_text(f'[repos]\n"{url}" = "{tmp_path / "seed"}"\n')
    with pytest.raises(BadInputError, match="not a git checkout with that remote"):
        local_checkout(gone, _patchit_home)
    (_patchit_home / "patchit.toml").write_text(f'[repos]\n"{url}" = "{b}"\n')
    moved = local_checkout(from_a.model_copy(update={"repo_path": str(a) + "-gone"}), _patchit_home)
    assert moved.repo_path == str(b)
    moved = local_checkout(from_a, _patchit_home)  # a is a clone here too: kept
    assert moved.repo_path == str(a)
    moved = local_checkout(
        UniversalFailureEvent.model_validate_json(
            from_a.model_dump_json().replace(str(a), str(tmp_path / "elsewhere"))
        ),
        _patchit_home,
    )
    assert moved.repo_path == str(b) and str(tmp_path / "elsewhere") not in moved.model_dump_json()
    assert error_fingerprint(moved) == error_fingerprint(from_b)
    assert cause_key(moved) == cause_key(from_b)


def test_clones_at_different_paths_share_one_incident(tmp_path: Path, _patchit_home: Path) -> None:
    a, b, url = clones(tmp_path)
    from_a, from_b = failure(a, url), failure(b, url)
    assert error_fingerprint(from_a) == error_fingerprint(from_b)
    with Memory.open(_patchit_home) as memory:
        first, created = memory.open_or_attach(from_a, error_fingerprint(from_a), cause_key(from_a))
        again, created_again = memory.open_or_attach(
            from_b, error_fingerprint(from_b), cause_key(from_b)
        )
        assert created and not created_again and again.id == first.id
        assert first.repo_url == url and again.events == 2
        # without a remote URL (an older producer) the local path decides: a's event joins
        # the incident made at a's path, b's (no URL to match on) opens its own
        plain = [e.model_copy(update={"repo_url": None}) for e in (from_a, from_b)]
        one, _ = memory.open_or_attach(plain[0], error_fingerprint(plain[0]), cause_key(plain[0]))
        two, _ = memory.open_or_attach(plain[1], error_fingerprint(plain[1]), cause_key(plain[1]))
        assert one.id == first.id and two.id != first.id


def test_the_callback_names_the_repository_by_its_remote(
    tmp_path: Path, _patchit_home: Path
) -> None:
    from patchit.intake.spool import Spool
    from patchit.integrations.airflow import make_failure_callback

    a, _, url = clones(tmp_path)

    class Dag:
        fileloc = str(a / JOB)

    make_failure_callback()({"dag": Dag(), "exception": KeyError("amout")})
    with Spool.open(_patchit_home) as spool:
        [row] = spool.rows()
    event = UniversalFailureEvent.model_validate_json(row["payload"])
    assert event.repo_url == url and event.repo_path == str(a)


def test_heal_of_an_event_from_a_clone_not_on_this_host_is_one_exit_2_line(
    tmp_path: Path, _patchit_home: Path
) -> None:
    from tests.cli.helpers import patchit

    a, _, url = clones(tmp_path)
    event = failure(a, url).model_copy(update={"repo_path": str(tmp_path / "other-host")})
    path = tmp_path / "event.json"
    path.write_text(event.model_dump_json())
    res = patchit("heal", str(path))
    assert res.returncode == 2
    [line] = res.stderr.splitlines()
    assert f"repository {url} has no checkout on this host" in line and "[repos]" in line


def test_rebase_moves_non_ascii_roots_and_only_whole_roots() -> None:
    from patchit.intake.checkouts import rebase

    def at(root: str, other: str) -> UniversalFailureEvent:
        return UniversalFailureEvent(
            source=FailureSource.AIRFLOW, pipeline_id="totals", unit_id="total",
            error_type="KeyError", error_message=f"'amout' (see {other}/x.py)\n{root}/y",
            traceback=f'  File "{root}/dags/totals.py", line 2\n  File "{other}/lib.py"',
            repo_path=root,
        )  # fmt: skip

    moved = rebase(at("/srv/josé/dags", "/opt/x"), "/srv/josé/dags", "/home/b/dags")
    assert moved.repo_path == "/home/b/dags"
    assert "/home/b/dags/dags/totals.py" in (moved.traceback or "")
    assert "josé" not in moved.model_dump_json(), moved.model_dump_json()
    kept = rebase(at("/srv/dags", "/mnt/srv/dags"), "/srv/dags", "/home/b/dags")
    assert kept.repo_path == "/home/b/dags" and "/mnt/srv/dags/lib.py" in (kept.traceback or "")
    assert kept.error_message == "'amout' (see /mnt/srv/dags/x.py)\n/home/b/dags/y"


# -- repositories named by Airflow DAG bundle (`[repos] "bundle:NAME"`) ---------------------


def bundle_checkouts(tmp_path: Path) -> tuple[Path, Path]:
    """The same DAG bundle checked out at two paths, with no remote: ("host a", "host b")."""
    a, b, _ = clones(tmp_path)
    for checkout in (a, b):
        git(checkout, "remote", "remove", "origin")
        assert read_remote_url(checkout) is None
    return a, b


def in_bundle(event: UniversalFailureEvent, name: str = "dags") -> UniversalFailureEvent:
    return event.model_copy(update={"context": {**event.context, "bundle_name": name}})


def moved_away(event: UniversalFailureEvent, root: Path, gone: Path) -> UniversalFailureEvent:
    """The event as host a spooled it, seen from a host where a's checkout is not."""
    return UniversalFailureEvent.model_validate_json(
        event.model_dump_json().replace(str(root), str(gone))
    )


def deployment(home: Path, repos: dict[str, Path]) -> None:
    home.mkdir(exist_ok=True)
    lines = "".join(f'"{key}" = "{path}"\n' for key, path in repos.items())
    (home / "patchit.toml").write_text(f"[repos]\n{lines}")


def test_an_event_named_by_its_bundle_is_moved_to_the_mapped_checkout(
    tmp_path: Path, _patchit_home: Path
) -> None:
    a, b = bundle_checkouts(tmp_path)
    from_a = moved_away(in_bundle(failure(a, "")), a, tmp_path / "host-a-only" / "dags")
    from_b = in_bundle(failure(b, ""))
    assert local_checkout(from_b, _patchit_home) is from_b  # a checkout here, unmapped: kept
    with pytest.raises(NoCheckoutError) as err:
        local_checkout(from_a, _patchit_home)
    assert "\n" not in str(err.value) and "DAG bundle dags has no checkout" in str(err.value)
    assert '[repos] "bundle:dags" = "/path/to/its/checkout"' in err.value.hint
    deployment(_patchit_home, {"bundle:dags": b})
    moved = local_checkout(from_a, _patchit_home)
    assert moved.repo_path == str(b) and "host-a-only" not in moved.model_dump_json()
    assert error_fingerprint(moved) == error_fingerprint(from_b)
    assert cause_key(moved) == cause_key(from_b)
    assert local_checkout(in_bundle(failure(a, ""), "other"), _patchit_home).repo_path == str(a)


def test_a_bundle_mapped_to_a_folder_that_is_not_a_checkout_is_one_line(
    tmp_path: Path, _patchit_home: Path
) -> None:
    a, _ = bundle_checkouts(tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    from_a = moved_away(in_bundle(failure(a, "")), a, tmp_path / "gone")
    for target in (plain, tmp_path / "missing"):
        deployment(_patchit_home, {"bundle:dags": target})
        with pytest.raises(BadInputError) as err:
            local_checkout(from_a, _patchit_home)
        assert not isinstance(err.value, NoCheckoutError) and "\n" not in str(err.value)
        assert f"[repos] maps bundle:dags to {target}, but it is not a git checkout" in str(
            err.value
        )


def test_the_url_mapping_wins_over_the_bundle_mapping(tmp_path: Path, _patchit_home: Path) -> None:
    a, b, url = clones(tmp_path)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(tmp_path / "dags.git"), str(other))  # a path remote
    gone = tmp_path / "host-a-only" / "dags"
    from_a = moved_away(in_bundle(failure(a, url)), a, gone)
    deployment(_patchit_home, {url: b, "bundle:dags": other})
    assert local_checkout(from_a, _patchit_home).repo_path == str(b)
    # the URL has no clone here and no entry: the bundle's entry is used
    deployment(_patchit_home, {"bundle:dags": other})
    moved = local_checkout(from_a, _patchit_home)
    assert moved.repo_path == str(other) and moved.repo_url == url
    # neither: the hint names both entries
    deployment(_patchit_home, {})
    with pytest.raises(NoCheckoutError) as err:
        local_checkout(from_a, _patchit_home)
    assert f'[repos] "{url}" or "bundle:dags" = "/path/to/its/checkout"' in err.value.hint


def test_a_bundle_folder_outside_git_is_moved_into_the_mapped_checkout(
    tmp_path: Path, _patchit_home: Path
) -> None:
    """A bundle deployed as a plain folder (no `.git`): the callback records no repo_path,
    but the bundle's path; the mapping names the folder it is deployed from in a checkout."""
    a, b = bundle_checkouts(tmp_path)
    deployed = tmp_path / "opt" / "airflow" / "dags"
    event = failure(a, "")
    event = UniversalFailureEvent.model_validate_json(
        event.model_dump_json().replace(str(a / "dags"), str(deployed))
    ).model_copy(
        update={"repo_path": None, "commit": None, "unit_path": None,
                "context": {"bundle_name": "dags", "bundle_path": str(deployed),
                            "dag_file": str(deployed / "totals.py")}}
    )  # fmt: skip
    deployment(_patchit_home, {"bundle:dags": b / "dags"})
    moved = local_checkout(event, _patchit_home)
    assert moved.repo_path == str(b) and moved.unit_path == JOB
    assert moved.commit == git(b, "rev-parse", "HEAD").strip()
    assert str(deployed) not in moved.model_dump_json()
    from_b = in_bundle(failure(b, ""))
    assert error_fingerprint(moved) == error_fingerprint(from_b)


def test_two_hosts_checkouts_of_one_bundle_share_one_incident(
    tmp_path: Path, _patchit_home: Path
) -> None:
    a, b = bundle_checkouts(tmp_path)
    from_a, from_b = in_bundle(failure(a, "")), in_bundle(failure(b, ""))
    assert from_a.repo_path != from_b.repo_path
    with Memory.open(_patchit_home) as memory:
        first, created = memory.open_or_attach(from_a, error_fingerprint(from_a), cause_key(from_a))
        again, created_again = memory.open_or_attach(
            from_b, error_fingerprint(from_b), cause_key(from_b)
        )
        assert created and not created_again and again.id == first.id
        assert first.repo_url == "bundle:dags" and again.events == 2
        # another bundle, or no bundle at another path: their own incidents
        other = in_bundle(failure(b, ""), "finance")
        three, _ = memory.open_or_attach(other, error_fingerprint(other), cause_key(other))
        plain = failure(tmp_path / "seed", "")
        four, _ = memory.open_or_attach(plain, error_fingerprint(plain), cause_key(plain))
        assert len({first.id, three.id, four.id}) == 3
    # an incident from an event without a bundle name (an older callback) at a's path: the
    # bundle's event joins it, and it learns the bundle's name
    with Memory.open(tmp_path / "older-home") as memory:
        old = failure(a, "")
        first, _ = memory.open_or_attach(old, error_fingerprint(old), cause_key(old))
        assert first.repo_url is None
        again, created = memory.open_or_attach(from_a, error_fingerprint(from_a), cause_key(from_a))
        assert not created and again.id == first.id and again.repo_url == "bundle:dags"


def test_the_callback_records_the_bundles_name_and_path(
    tmp_path: Path, _patchit_home: Path
) -> None:
    from types import SimpleNamespace

    from patchit.intake.spool import Spool
    from patchit.integrations.airflow import make_failure_callback

    deployed = tmp_path / "opt" / "airflow" / "dags"  # a plain folder: no git root above it
    deployed.mkdir(parents=True)
    bundle = SimpleNamespace(name="dags", path=deployed, version=None)
    ti = SimpleNamespace(dag_id="totals", task_id="total", bundle_instance=bundle)
    dag = SimpleNamespace(dag_id="totals", fileloc=str(deployed / "totals.py"))
    make_failure_callback()({"ti": ti, "dag": dag, "exception": KeyError("amout")})
    with Spool.open(_patchit_home) as spool:
        [row] = spool.rows()
    event = UniversalFailureEvent.model_validate_json(row["payload"])
    assert event.repo_path is None and event.context["bundle_name"] == "dags"
    assert event.context["bundle_path"] == str(deployed)


def test_a_worker_heals_another_hosts_bundle_event_in_the_mapped_checkout(
    tmp_path: Path, _patchit_home: Path
) -> None:
    """Unmapped, the event is kept open and the worker says which entry to add; mapped, the
    same failure from both hosts is one incident healed once, in this host's checkout."""
    from patchit.bench.race import RIGHT, fake_context
    from patchit.intake.spool import Spool
    from patchit.worker.worker import Worker

    a, b = bundle_checkouts(tmp_path)
    from_a = moved_away(in_bundle(failure(a, "")), a, tmp_path / "host-a-only" / "dags")
    with Spool.open(_patchit_home) as spool:
        spool.put_many([from_a.model_dump(mode="json")])
    said: list[str] = []
    stats = Worker(_patchit_home, say=said.append, make_context=fake_context).run(once=True)
    assert stats.bad == 0 and stats.processed == 1
    assert any('left open: no repository known' in line and '"bundle:dags"' in line
               for line in said), said  # fmt: skip
    deployment(_patchit_home, {"bundle:dags": b})
    with Spool.open(_patchit_home) as spool:
        spool.put_many([e.model_dump(mode="json") for e in (from_a, in_bundle(failure(b, "")))])
    stats = Worker(_patchit_home, make_context=fake_context).run(once=True)
    assert stats.bad == 0 and stats.processed == 2
    with Memory.open(_patchit_home) as memory:
        [incident] = memory.list_incidents()
        assert incident.repo_url == "bundle:dags" and incident.status.value == "fixed"
        assert incident.events == 2  # a's event, delivered twice, is stored once
    assert RIGHT in git(b, "show", f"{incident.branch}:{JOB}")


def test_a_dbt_nodes_event_from_an_airflow_task_is_named_by_the_tasks_bundle() -> None:
    from patchit.events.model import repo_identity

    def dbt_event(context: dict[str, object], url: str | None = None) -> UniversalFailureEvent:
        return UniversalFailureEvent(
            source=FailureSource.DBT, pipeline_id="shop", unit_id="model.shop.orders",
            repo_path="/srv/dags", repo_url=url, context=context,
        )  # fmt: skip

    airflow = {"dag_id": "shop", "task_id": "dbt_build", "bundle_name": "dags"}
    assert repo_identity(dbt_event({"airflow": airflow})) == "bundle:dags"
    assert repo_identity(dbt_event({"airflow": airflow}, "github.com/acme/dags")) == (
        "github.com/acme/dags"
    )
    assert repo_identity(dbt_event({"bundle_name": "dags"})) is None  # dbt's own: no bundle
    assert repo_identity(dbt_event({"airflow": {**airflow, "bundle_name": None}})) is None


def test_a_batch_looks_at_each_checkout_once(
    tmp_path: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A storm's events all name one clone by URL: inside `looked_at_once` (a worker's batch)
    its remote is read once, not once per event (10,000 reads cost the storm about 1.5 s)."""
    import patchit.intake.checkouts as checkouts

    a, _b, url = clones(tmp_path)
    event = failure(a, url)
    reads: list[Path] = []

    def counted(path: Path) -> str | None:
        reads.append(path)
        return read_remote_url(path)

    monkeypatch.setattr(checkouts, "read_remote_url", counted)
    for _ in range(3):
        assert local_checkout(event, _patchit_home) is event
    assert len(reads) == 3  # outside a batch, every look reads
    with looked_at_once():
        for _ in range(50):
            assert local_checkout(event, _patchit_home) is event
        with looked_at_once():  # nested: the outer batch's looks still count
            assert local_checkout(event, _patchit_home) is event
    assert len(reads) == 4
    with looked_at_once():  # a new batch looks again: a clone made meanwhile is seen
        assert local_checkout(event, _patchit_home) is event
    assert len(reads) == 5
