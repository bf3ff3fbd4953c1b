"""Evidence for real Airflow 3 task failures (the zoo DAG) and real Python tracebacks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchit.errors import BadInputError
from patchit.evidence.airflow import find_task_callable, gather_airflow_evidence
from patchit.evidence.pylog import exception_chain, is_write_call, pack_log, parse_frames
from patchit.evidence.redact import MASK
from patchit.examples import AIRFLOW_PROJECT
from patchit.intake.airflow_scan import import_error_events
from tests.evidence.airflow_failures import HELPERS, ZOO_DAG, Zoo

pytestmark = pytest.mark.slow


def test_key_error_evidence_holds_the_task_callable_frames_and_modules(zoo: Zoo) -> None:
    evidence = zoo.evidence("load_order")
    assert evidence.unit_path == ZOO_DAG and evidence.unit_name == "load_order"
    assert evidence.raw_code == (zoo.repo / ZOO_DAG).read_text()
    assert evidence.callable_name == "load_order"
    assert evidence.callable_code is not None
    assert evidence.callable_code.lstrip().startswith("@task")
    assert 'row["amout"]' in evidence.callable_code and "def total_amount" not in (
        evidence.callable_code
    )
    (frame,) = evidence.frames  # Airflow's own frames are dropped
    assert (frame.path, frame.function, frame.code) == (
        ZOO_DAG,
        "load_order",
        'return row["amout"] * 100',
    )
    assert evidence.error == "KeyError: 'amout'"
    assert HELPERS in evidence.related_code  # `from zoo_lib import helpers`
    assert "zoo_lib/__init__.py" not in "".join(evidence.related_code)  # empty: says nothing
    assert evidence.git_log and "zoo: initial" in evidence.git_log[0]
    assert ZOO_DAG in evidence.changed_files


def test_packed_log_is_the_error_and_repo_frames_with_context_not_airflow(zoo: Zoo) -> None:
    evidence = zoo.evidence("write_daily")
    log = evidence.packed_log
    assert log.startswith("FileNotFoundError: [Errno 2] No such file or directory")
    assert f"{ZOO_DAG}:" in log and "in write_daily" in log
    assert ">" in log and 'with open(path, "w") as handle:' in log
    assert 'path = f"{OUT_DIR}/daily/{ds}/orders.csv"' in log  # a line of context above
    assert "task_runner.py" not in log and "site-packages" not in log
    assert len(log) < len(zoo.events["write_daily"].traceback or "")


def test_timeout_keeps_only_the_repo_frame_of_a_library_raise(zoo: Zoo) -> None:
    evidence = zoo.evidence("slow_query")
    assert [f.function for f in evidence.frames] == ["slow_query"]
    assert evidence.error.startswith("AirflowTaskTimeout: Timeout")


def test_classic_operator_callable_is_found_by_task_id() -> None:
    source = (AIRFLOW_PROJECT / "dags" / "shop_reports.py").read_text()
    name, code = find_task_callable(source, "write_report") or ("", "")
    assert name == "write_report" and code.startswith("def write_report(ti, **context):")
    assert find_task_callable(source, "no_such_task") is None
    taskflow = (AIRFLOW_PROJECT / "dags" / "shop_orders.py").read_text()
    assert (find_task_callable(taskflow, "publish") or ("",))[0] == "publish"


def test_secrets_in_the_error_and_environment_are_redacted(
    zoo: Zoo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_ZOO_WAREHOUSE", "postgresql://zoo:s3cr3t-pw@db:5432/zoo")
    event = zoo.events["refused"].model_copy(
        update={
            "error_message": "could not connect to postgresql://zoo:hunter22@db/zoo "
            "(conn postgresql://zoo:s3cr3t-pw@db:5432/zoo)"
        }
    )
    evidence = gather_airflow_evidence(event, zoo.repo)
    dumped = evidence.model_dump_json()
    assert "hunter22" not in dumped and "s3cr3t-pw" not in dumped and MASK in evidence.error


def test_huge_binary_local_log_is_packed_to_budget(zoo: Zoo, tmp_path: Path) -> None:
    log = tmp_path / "attempt=1.log"
    noise = b"INFO row processed \xff\xfe\x00 ok\n" * 200_000  # ~6 MB, not UTF-8
    log.write_bytes(noise + b"ERROR - Task failed with exception KeyError: 'amout'\n")
    event = zoo.events["load_order"].model_copy(update={"log_location": str(log)})
    evidence = gather_airflow_evidence(event, zoo.repo)
    assert len(evidence.packed_log) <= 8_000
    assert "ERROR - Task failed with exception KeyError: 'amout'" in evidence.packed_log
    assert "row processed" not in evidence.packed_log


def test_missing_repo_root_is_bad_input(zoo: Zoo, tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="repository root"):
        gather_airflow_evidence(zoo.events["load_order"], tmp_path / "nope")


def test_broken_dag_file_evidence_from_a_real_import_error(zoo: Zoo, tmp_path: Path) -> None:
    repo = zoo.copy_repo(tmp_path / "repo")
    broken = repo / "dags" / "broken.py"
    broken.write_text("from zoo_lib.helpers import summarise_order\n\nVALUE = 1\n")
    proc = subprocess.run(
        [sys.executable, str(broken)],
        capture_output=True, text=True, env={"PYTHONPATH": str(repo / "dags")}, check=False,
    )  # fmt: skip
    assert "ImportError: cannot import name 'summarise_order'" in proc.stderr
    (event,) = import_error_events({str(broken): proc.stderr}, repo / "dags")
    evidence = gather_airflow_evidence(event, repo)
    assert evidence.unit_path == "dags/broken.py" and evidence.callable_name is None
    assert [(f.path, f.function) for f in evidence.frames] == [("dags/broken.py", "<module>")]
    assert HELPERS in evidence.related_code


CHAINED = textwrap.dedent(
    """
    import traceback

    def query(config):
        raise ConnectionRefusedError(111, "Connection refused")

    def load(config):
        try:
            query(config)
        except OSError as exc:
            raise RuntimeError("load failed") from exc

    try:
        load({"host": "db"})
    except RuntimeError as exc:
        print("".join(traceback.TracebackException.from_exception(exc, capture_locals=True)
              .format()))
    """
)


def test_pylog_parses_a_real_chained_traceback_with_locals(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(CHAINED)
    text = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True
    ).stdout
    frames = parse_frames(text)
    assert [f.function for f in frames] == ["<module>", "load"]  # the final exception's
    assert frames[-1].code == 'raise RuntimeError("load failed") from exc'
    assert frames[-1].locals["config"] == "{'host': 'db'}"
    chain = exception_chain(text)
    assert chain == ["ConnectionRefusedError: [Errno 111] Connection refused",
                     "RuntimeError: load failed"]  # fmt: skip
    packed = pack_log(chain[-1], [], lambda _rel: None, budget_chars=40)
    assert packed == "RuntimeErr"  # a quarter of the budget is left for the error


def test_write_calls_are_told_from_reads() -> None:
    assert is_write_call('with open(path, "w") as handle:')
    assert is_write_call("df.to_csv(out_path, index=False)")
    assert is_write_call("target.write_text(body)")
    assert is_write_call('open(p, mode="a")')
    assert not is_write_call("with open(path) as handle:")
    assert not is_write_call('open(path, "rb")')
