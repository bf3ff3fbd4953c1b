"""The callback without Airflow: fake context mappings, bad input, imports, git reading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from patchit.events.model import UniversalFailureEvent
from patchit.intake.gitinfo import find_git_root, read_branch, read_head
from patchit.intake.spool import Spool
from patchit.integrations.airflow import build_event, make_failure_callback, on_failure_callback
from tests.conftest import commit_all, git


class FakeTI:
    """The attributes of Airflow's RuntimeTaskInstance the callback reads."""

    dag_id = "orders_daily"
    task_id = "load_orders"
    run_id = "scheduled__2026-11-25T00:00:00+00:00"
    try_number = 2
    map_index = -1
    start_date = datetime(2026, 11, 25, 1, 0, tzinfo=UTC)
    hostname = "worker-1"
    log_url = "http://localhost:8080/dags/orders_daily/runs/x/tasks/load_orders?try_number=2"


class FakeDag:
    dag_id = "orders_daily"

    def __init__(self, fileloc: Path) -> None:
        self.fileloc = str(fileloc)


class BashOperator:
    task_id = "dbt_build"
    template_fields = ("bash_command", "env", "cwd")

    def __init__(self, command: str, cwd: str | None = None) -> None:
        self.bash_command = command
        self.cwd = cwd


def spooled(home: Path) -> list[dict[str, Any]]:
    with Spool.open(home) as spool:
        return [json.loads(r["payload"]) for r in spool.rows()]


@pytest.fixture
def dag_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "pipelines"
    (repo / "dags").mkdir(parents=True)
    (repo / "dags" / "orders.py").write_text("# a DAG\n")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "dags")
    return repo


def test_reason_path_from_the_dag_processor(dag_repo: Path, _patchit_home: Path) -> None:
    context = {
        "ti": FakeTI(),
        "dag": FakeDag(dag_repo / "dags" / "orders.py"),
        "run_id": FakeTI.run_id,
        "reason": "Task exited with return code -9 (killed: heartbeat timed out)",
    }
    on_failure_callback(context)
    [data] = spooled(_patchit_home)
    event = UniversalFailureEvent.model_validate(data)
    assert (event.pipeline_id, event.unit_id, event.try_number) == (
        "orders_daily",
        "load_orders",
        2,
    )
    assert event.error_type == "AirflowTaskTimeout"
    assert event.context["reason"].startswith("Task exited with return code -9")
    assert event.repo_path == str(dag_repo) and event.unit_path == "dags/orders.py"
    assert event.commit == git(dag_repo, "rev-parse", "HEAD")
    assert event.log_location == FakeTI.log_url
    assert event.context["task_started_utc"] == "2026-11-25T01:00:00+00:00"


def test_exception_that_cannot_be_printed(_patchit_home: Path) -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    try:
        raise Unprintable()
    except Unprintable as exc:
        error = exc
    on_failure_callback({"ti": FakeTI(), "exception": error})
    [data] = spooled(_patchit_home)
    event = UniversalFailureEvent.model_validate(data)
    assert event.error_type == "Unprintable" and event.traceback
    assert event.repo_path is None  # no DAG, no repository: still spooled


@pytest.mark.parametrize("context", [None, 42, {"ti": object(), "dag": object()}, {}])
def test_broken_context_never_raises(context: Any, _patchit_home: Path) -> None:
    on_failure_callback(context)  # must return, whatever it got


def test_unwritable_home_only_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    callback = make_failure_callback(home=blocker / "home")
    callback({"ti": FakeTI(), "exception": ValueError("x")})
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("patchit: could not keep the failure of orders_daily.load_orders")
    assert "(NotADirectoryError" in line and str(blocker / "home" / "spool") in line


def test_bash_dbt_task_is_marked_runs_dbt(tmp_path: Path) -> None:
    task = BashOperator("cd /srv/repo && dbt build --project-dir shop --profiles-dir . -s orders")
    data = build_event({"ti": FakeTI(), "task": task, "exception": RuntimeError("exit 1")})
    ctx = data["context"]
    assert ctx["runs_dbt"] is True
    assert ctx["dbt_project_dir"] == "/srv/repo/shop"
    assert ctx["dbt_args"] == [
        "build",
        "--project-dir",
        "shop",
        "--profiles-dir",
        ".",
        "-s",
        "orders",
    ]
    plain = build_event({"ti": FakeTI(), "task": BashOperator("echo dbt is great")})
    assert "runs_dbt" not in plain["context"]
    # the rendered template fields travel with the event (empty ones are left out)
    assert ctx["rendered_fields"] == {"bash_command": task.bash_command}


def test_factory_options(dag_repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "custom-home"
    callback = make_failure_callback(home=home, extra={"team": "data"})
    callback(
        {
            "ti": FakeTI(),
            "dag": FakeDag(dag_repo / "dags" / "orders.py"),
            "exception": KeyError("k"),
        }
    )
    [data] = spooled(home)
    assert data["context"]["extra"] == {"team": "data"}
    assert data["error_type"] == "KeyError"


def test_callback_imports_only_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules); import patchit.integrations.airflow; "
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {m.split(".")[0] for m in out.stdout.split()}
    stdlib = set(sys.stdlib_module_names)
    assert loaded - stdlib == {"patchit"}, loaded - stdlib
    assert not any(m.startswith(("patchit.events", "patchit.config")) for m in out.stdout.split())


def test_git_head_branch_packed_refs_and_worktree(dag_repo: Path, tmp_path: Path) -> None:
    head = git(dag_repo, "rev-parse", "HEAD")
    assert find_git_root(dag_repo / "dags" / "orders.py") == dag_repo
    assert read_head(dag_repo) == head and read_branch(dag_repo) == "main"
    git(dag_repo, "pack-refs", "--all")
    assert not (dag_repo / ".git" / "refs" / "heads" / "main").exists()
    assert read_head(dag_repo) == head
    (dag_repo / "dags" / "more.py").write_text("# more\n")
    second = commit_all(dag_repo, "more")
    wt = tmp_path / "wt"
    git(dag_repo, "worktree", "add", "-q", "-b", "feature", str(wt), head)
    assert (wt / ".git").is_file()
    assert find_git_root(wt / "dags") == wt
    assert read_head(wt) == head and read_branch(wt) == "feature"
    assert read_head(dag_repo) == second
    git(wt, "checkout", "-q", "--detach", second)
    assert read_head(wt) == second and read_branch(wt) is None
    assert find_git_root(tmp_path / "elsewhere") is None


FAILING_TASK = """\
import csv, io

def load(text):
    total = 0.0
    for row in csv.DictReader(io.StringIO(text)):
        total += float(row["amout"])
    return total
"""


def failing_load(repo: Path) -> BaseException:
    """A KeyError raised in a module of the DAG repository (its frame is the repo's)."""
    path = repo / "dags" / "load.py"
    path.write_text(FAILING_TASK)
    namespace: dict[str, Any] = {}
    exec(compile(FAILING_TASK, str(path), "exec", dont_inherit=True), namespace)
    try:
        namespace["load"]("invoice_id,amount\n1,12.5\n")
    except KeyError as exc:
        return exc
    raise AssertionError("load did not fail")


def test_the_failing_frames_locals_travel_as_names_and_types(
    dag_repo: Path, _patchit_home: Path
) -> None:
    context = {"ti": FakeTI(), "dag": FakeDag(dag_repo / "dags" / "orders.py")}
    on_failure_callback({**context, "exception": failing_load(dag_repo)})
    [data] = spooled(_patchit_home)
    event = UniversalFailureEvent.model_validate(data)
    assert event.runtime_locals is not None
    assert (event.runtime_locals.path, event.runtime_locals.function) == (
        str(dag_repo / "dags" / "load.py"), "load",
    )  # fmt: skip
    assert event.runtime_locals.locals["row"].keys == {"invoice_id": "str", "amount": "str"}
    assert "12.5" not in json.dumps(data["runtime_locals"])  # names and types, never values


def test_a_failing_capture_is_noted_and_the_event_still_spooled(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(exc: BaseException, root: str) -> None:
        raise RecursionError("deep")

    monkeypatch.setattr("patchit.integrations.airflow.failing_frame_locals", broken)
    dag = FakeDag(dag_repo / "dags" / "orders.py")
    on_failure_callback({"ti": FakeTI(), "dag": dag, "exception": failing_load(dag_repo)})
    [data] = spooled(_patchit_home)
    assert "runtime_locals" not in data
    assert data["context"]["runtime_locals_error"] == "RecursionError: deep"
    assert UniversalFailureEvent.model_validate(data).error_type == "KeyError"


def test_capturing_locals_can_be_turned_off(
    dag_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    context = {
        "ti": FakeTI(),
        "dag": FakeDag(dag_repo / "dags" / "orders.py"),
        "exception": failing_load(dag_repo),
    }
    assert "runtime_locals" in build_event(context)
    assert "runtime_locals" not in build_event(context, capture_locals=False)
    monkeypatch.setenv("PATCHIT_CAPTURE_LOCALS", "0")
    assert "runtime_locals" not in build_event(context)


class FakeDagRun:
    """The task SDK's DagRun: dag.test() (`airflow dags test`) names its user "dag_test"."""

    def __init__(self, user: str | None) -> None:
        self.triggering_user_name = user


def test_a_dags_test_run_has_no_log_url_a_scheduled_run_keeps_it() -> None:
    tested = build_event({"ti": FakeTI(), "dag_run": FakeDagRun("dag_test")})
    assert tested["log_location"] is None  # `airflow dags test`: no API server serves it
    assert tested["context"]["triggered_by"] == "test"
    scheduled = build_event({"ti": FakeTI(), "dag_run": FakeDagRun(None)})
    assert scheduled["log_location"] == FakeTI.log_url
    assert "triggered_by" not in scheduled["context"]


# -- secrets, poison and exits (issue 12) ---------------------------------------------------

GITHUB_TOKEN = "ghp_" + "Ab1" * 12
AWS_KEY = "AKIA" + "QWERTYUIOP123456"


def spool_text(home: Path) -> str:
    """Everything the spool holds: its rows and the raw bytes of its files (WAL included)."""
    with Spool.open(home) as spool:
        dumped = "\n".join(spool.conn.iterdump())
    raw = b"".join(p.read_bytes() for p in (home / "spool").iterdir() if p.is_file())
    return dumped + raw.decode("utf-8", "replace")


def test_secrets_in_the_exception_and_rendered_fields_never_reach_the_spool(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHOP_API_TOKEN", "env-planted-5150-token")
    task = BashOperator(
        "PGPASSWORD=pg-planted-4242 psql -h db -c 'select 1' && "
        'curl -H "X-Api-Key: header-planted-7777" https://api.shop.test/load'
    )
    error = RuntimeError(
        f"login failed password=msg-planted-1234 token {GITHUB_TOKEN} key {AWS_KEY} "
        "for postgres://etl:url-planted-999@db/shop with env-planted-5150-token"
    )
    on_failure_callback({"ti": FakeTI(), "task": task, "exception": error})
    stored = spool_text(_patchit_home)
    for secret in ("pg-planted-4242", "header-planted-7777", "msg-planted-1234", GITHUB_TOKEN,
                   AWS_KEY, "url-planted-999", "env-planted-5150-token"):  # fmt: skip
        assert secret not in stored, secret
    [data] = spooled(_patchit_home)
    rendered = data["context"]["rendered_fields"]["bash_command"]
    assert rendered.startswith("PGPASSWORD=***REDACTED*** psql -h db")  # the command stays
    assert "login failed password=***REDACTED***" in data["error_message"]


class Boom(BaseException):
    """Neither an Exception nor a system exit: what a user's library might raise."""


@pytest.mark.parametrize("raised", [SystemExit(3), GeneratorExit(), Boom(), RecursionError()])
def test_a_property_raising_any_base_exception_never_escapes(
    raised: BaseException, _patchit_home: Path
) -> None:
    class Exploding(FakeTI):
        @property
        def task_id(self) -> str:
            raise raised

        @property
        def hostname(self) -> str:
            raise raised

    on_failure_callback({"ti": Exploding(), "exception": ValueError("x")})
    [data] = spooled(_patchit_home)
    assert data["unit_id"] == "unknown_task" and data["pipeline_id"] == "orders_daily"
    assert "hostname" not in data["context"]


def test_a_context_that_raises_on_every_read_still_returns(_patchit_home: Path) -> None:
    class Hostile(dict):  # type: ignore[type-arg]
        def get(self, *_args: object, **_kw: object) -> object:
            raise SystemExit(1)

    on_failure_callback(Hostile())


def test_keyboard_interrupt_still_stops_the_process(_patchit_home: Path) -> None:
    class Interrupted(FakeTI):
        @property
        def dag_id(self) -> str:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        on_failure_callback({"ti": Interrupted(), "exception": ValueError("x")})


def test_a_lone_surrogate_in_the_message_is_spooled_escaped(_patchit_home: Path) -> None:
    error = FileNotFoundError(os.fsdecode(b"/data/caf\xe9.csv"))
    on_failure_callback({"ti": FakeTI(), "exception": error})
    [data] = spooled(_patchit_home)
    event = UniversalFailureEvent.model_validate(data)
    assert event.error_message == "/data/caf\\xe9.csv"
    event.model_dump_json().encode("utf-8")


@pytest.mark.slow  # imports Airflow's SDK
def test_notifier_at_the_contract_path_spools_like_the_callback(
    dag_repo: Path, tmp_path: Path
) -> None:
    """CONTRACT.md names `patchit.integrations.airflow.PatchitNotifier`; the module stays
    standard library only until the name is read (the test above), and the first path
    (`airflow_notifier`) gives the same class."""
    from airflow.sdk.bases.notifier import BaseNotifier

    import patchit.integrations.airflow as contract
    from patchit.integrations.airflow_notifier import PatchitNotifier as first_path

    notifier_class = contract.PatchitNotifier
    assert notifier_class is first_path and issubclass(notifier_class, BaseNotifier)
    assert f"{notifier_class.__module__}.{notifier_class.__qualname__}" == (
        "patchit.integrations.airflow.PatchitNotifier"
    )
    home = tmp_path / "home"
    notifier_class(home=home, extra={"team": "data"}).notify(
        {
            "ti": FakeTI(),
            "dag": FakeDag(dag_repo / "dags" / "orders.py"),
            "exception": KeyError("k"),
        }
    )
    [data] = spooled(home)
    assert data["error_type"] == "KeyError" and data["context"]["extra"] == {"team": "data"}
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        contract.Nope  # noqa: B018
