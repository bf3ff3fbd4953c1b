"""Every parser of outside input under hypothesis: events, spool rows, run_results.json,
manifest.json, Airflow contexts, logs and model answers.

Inputs are hostile on purpose: bytes that are not UTF-8, lone surrogates, nesting thousands of
levels deep, fields of 200,000 characters built from the pieces the parsers look for, paths
longer than PATH_MAX. A parser may refuse an input with its documented error (one line, exit 2
on the command line); a traceback or a call running longer than the hang guard counts against
it. `make fuzz` runs each with 10,000 inputs (`PATCHIT_FUZZ_EXAMPLES`) and prints the tallies;
`make test` runs a few dozen each. FIFOs, devices and other special files are in
tests/test_inputs.py.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from patchit.cli.main import main
from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent, load_event
from patchit.evidence.project_index import index_project
from patchit.evidence.pylog import (
    exception_chain,
    last_traceback,
    pack_log,
    parse_frames,
    repo_frames,
)
from patchit.intake.airflow_dbt import dbt_events_from_airflow
from patchit.intake.dbt import record_from_run_results
from patchit.intake.spool import Spool, append_fallback, fallback_path
from patchit.intake.storm import storm_key
from patchit.intake.validate import check_healable
from patchit.integrations.airflow import make_failure_callback
from patchit.integrations.heal_task import HealFailed, heal_conf
from patchit.memory import Memory
from patchit.memory.fingerprint import cause_key, error_fingerprint
from patchit.patching.llm.answers import ClassifyAnswer, ProposalAnswer
from patchit.patching.llm.edits import EditRejected, resolve_edits
from patchit.worker.worker import Worker
from tests.fuzzing import (
    Tally,
    deep_json_text,
    fuzz_settings,
    hostile_text,
    json_scalar,
    json_text,
    json_value,
    raw_bytes,
    seed,
    tally,
)

pytestmark = pytest.mark.fuzz

SOURCES = st.one_of(st.sampled_from(["airflow", "dbt", "python", "ci"]), hostile_text)
text_or_any = st.one_of(hostile_text, hostile_text, json_value)
number_or_any = st.one_of(st.integers(-(2**40), 2**40), json_value)
date_or_any = st.one_of(st.sampled_from(["2026-11-25T01:00:00+00:00", "2026-11-25"]), json_value)
dbt_block = st.fixed_dictionaries(
    {"command": hostile_text, "project_dir": hostile_text, "cwd": hostile_text},
    optional={
        "args": st.lists(hostile_text, max_size=5),
        "vars": hostile_text,
        "env": st.dictionaries(hostile_text, hostile_text, max_size=4),
        "profiles_dir": hostile_text,
    },
)
# mostly the right types, so that most inputs get past the schema to what reads the values
event_dict = st.fixed_dictionaries(
    {
        "source": SOURCES,
        "pipeline_id": hostile_text,
        "unit_id": hostile_text,
        "error_message": hostile_text,
    },
    optional={
        **{name: text_or_any for name in (
            "event_id", "run_id", "unit_path", "status", "error_type", "traceback",
            "log_excerpt", "log_location", "repo_path", "commit",
        )},
        **{name: number_or_any for name in ("try_number", "map_index", "schema_version")},
        **{name: date_or_any for name in ("created_utc", "logical_date")},
        "artifacts": st.one_of(st.dictionaries(hostile_text, hostile_text, max_size=3), json_value),
        "context": st.one_of(st.dictionaries(st.one_of(seed, hostile_text), json_value),
                             json_value),
        "dbt": st.one_of(dbt_block, json_value),
        "runtime_locals": json_value,
    },
)  # fmt: skip


# each test's parser, as `make fuzz` reports it
PARSERS = {
    "test_event_files": "event file",
    "test_heal_on_any_event_file_is_one_line_and_exit_2": "cli heal EVENT",
    "test_spool_rows": "spool row",
    "test_fallback_lines": "fallback spool line",
    "test_heal_dag_confs": "heal DAG conf",
    "test_run_results_and_manifest_records": "run_results+manifest",
    "test_an_airflow_task_that_ran_dbt_reads_any_artifacts": "airflow dbt artifacts",
    "test_the_project_index_reads_any_manifest": "manifest index",
    "test_airflow_contexts": "airflow context",
    "test_logs_and_tracebacks": "log / traceback",
    "test_model_answers": "model answer",
}


@pytest.fixture
def fuzz(request: pytest.FixtureRequest) -> Iterator[Tally]:
    """The tally of the test's parser: every example is counted, the test fails at the end
    when any of them raised or hung (all of them, not only the first, are reported)."""
    counted = tally(PARSERS[request.node.originalname])
    yield counted
    counted.assert_clean()


def _as_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


event_file_bytes = st.one_of(
    raw_bytes,
    deep_json_text.map(_as_bytes),
    json_value.map(json_text).map(_as_bytes),
    event_dict.map(json_text).map(_as_bytes),
    # a field that is not JSON-escaped: raw surrogates and control bytes inside a string
    hostile_text.map(lambda t: _as_bytes('{"source": "dbt", "pipeline_id": "' + t + '"}')),
)


def _check_event(event: UniversalFailureEvent) -> None:
    """What the worker does first with any event: it must hold and encode."""
    event.model_dump_json().encode("utf-8")
    cause_key(event)
    error_fingerprint(event)
    storm_key(event)


# -- events ------------------------------------------------------------------------------------


@given(event_file_bytes)
@fuzz_settings(examples=60)
def test_event_files(fuzz: Tally, tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "event.json"
    path.write_bytes(data)

    def parse() -> None:
        event = load_event(path)
        _check_event(event)
        check_healable(event, str(path))

    fuzz.run(parse, (BadInputError,), data[:300])


def run_cli(*args: str) -> tuple[int, str]:
    """`patchit ARGS` in this process: (exit code, stderr)."""
    err, out = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["patchit", *args]
    try:
        with redirect_stderr(err), redirect_stdout(out):
            main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = argv
    return code, err.getvalue()


@given(event_file_bytes)
@fuzz_settings(examples=40)
def test_heal_on_any_event_file_is_one_line_and_exit_2(
    fuzz: Tally, tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "event.json"
    path.write_bytes(data)
    result = fuzz.run(lambda: run_cli("--home", str(tmp_path / "home"), "heal", str(path)))
    if result is not None:
        code, stderr = result
        lines = stderr.splitlines()
        fuzz.check(
            f"exit {code}, stderr {stderr[-500:]!r}", code == 2 and len(lines) == 1, data[:200]
        )
        fuzz.check(
            "not patchit's error line", bool(lines) and lines[0].startswith("patchit: error:")
        )


@pytest.fixture
def worker_home(tmp_path: Path) -> Iterator[tuple[Path, Spool, Memory]]:
    home = tmp_path / "home"
    with Spool.open(home) as spool, Memory.open(home) as memory:
        yield home, spool, memory


spool_payload = st.one_of(
    hostile_text.map(lambda t: t.encode("utf-8", "surrogatepass")),  # stored as a blob
    raw_bytes,
    deep_json_text,
    json_value.map(json_text),
    event_dict.map(json_text),
)


@given(st.lists(spool_payload, min_size=1, max_size=3))
@fuzz_settings(examples=40)
def test_spool_rows(
    fuzz: Tally, worker_home: tuple[Path, Spool, Memory], payloads: list[Any]
) -> None:
    """A damaged or hand-written spool: every row ends done or bad, the worker goes on."""
    home, spool, memory = worker_home
    now = datetime.now(UTC).isoformat()
    for payload in payloads:
        spool.conn.execute(
            "insert into spool (created_utc, source, payload) values (?, 'x', ?)",
            (now, payload),
        )
    worker = Worker(home)
    fuzz.run(lambda: worker.run_batch(spool, memory), (), payloads)
    taken = spool.conn.execute("select count(*) from spool where state = 'taken'").fetchone()[0]
    fuzz.check(f"{taken} row(s) left taken", taken == 0, payloads)
    spool.conn.execute("update spool set state = 'done' where state = 'taken'")


HEALTHY = {"source": "airflow", "pipeline_id": "dag", "unit_id": "healthy",
           "error_type": "KeyError", "error_message": "'amout'"}  # fmt: skip


@given(st.lists(spool_payload, min_size=1, max_size=3))
@fuzz_settings(examples=40)
def test_fallback_lines(
    fuzz: Tally, worker_home: tuple[Path, Spool, Memory], lines: list[Any]
) -> None:
    """Whatever a fallback file holds, importing it never stops the worker: it is imported
    once (nothing left to retry) and the healthy event behind it is processed."""
    home, spool, memory = worker_home
    path = fallback_path(home)
    with path.open("ab") as handle:
        for line in lines:
            handle.write(line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass"))
            handle.write(b"\n")
    append_fallback(HEALTHY, home)
    worker = Worker(home)

    def run() -> None:
        while worker.run_batch(spool, memory):
            pass

    fuzz.run(run, (), lines)
    left = [p.name for p in path.parent.glob(f"{path.name}*")]
    fuzz.check(f"left to import again: {left}", not left, lines)
    done = [r for r in spool.rows("done") if '"unit_id": "healthy"' in r["payload"]]
    fuzz.check("the healthy event behind them was not processed", len(done) == 1, lines)
    spool.conn.execute("delete from spool")


# a heal run's conf as Airflow hands it over: JSON (a dict, by the trigger API and the UI)
conf_value = st.one_of(
    json_value,
    st.fixed_dictionaries(
        {"event": st.one_of(event_dict, json_value)}, optional={"note": json_value}
    ),
    event_dict.map(lambda event: {**event, "schema_version": 1}),  # an event as the conf
    st.builds(lambda depth, key: {"event": _deep(depth, key)}, st.integers(100, 5_000), seed),
)


def _deep(depth: int, key: str) -> Any:
    """A dict and list structure `depth` levels deep (Airflow's conf is any JSON)."""
    value: Any = key
    for level in range(depth):
        value = [value] if level % 2 else {key: value}
    return value


@given(conf_value)
@fuzz_settings(examples=40)
def test_heal_dag_confs(fuzz: Tally, worker_home: tuple[Path, Spool, Memory], conf: Any) -> None:
    """The `patchit_heal` DAG's task on any conf: healed, or refused with one line that says
    what is wrong (the task fails with it); the state stays usable for the next run."""
    home = worker_home[0]
    quiet: list[str] = []

    def heal() -> str:
        try:
            heal_conf(conf, home, say=quiet.append)
        except (BadInputError, HealFailed) as exc:
            return str(exc) or "(empty)"
        return ""

    said = fuzz.run(heal, (), conf)
    if said:
        fuzz.refused += 1
        one = len(said.splitlines()) == 1 and said.isprintable()
        fuzz.check(f"not one printable line: {said[:300]!r}", one, conf)
    try:  # the next run's healthy event (not counted as an input)
        healthy = heal_conf({"event": HEALTHY}, home, say=quiet.append)["incidents"]
    except Exception as exc:
        healthy = [f"{type(exc).__name__}: {exc}"]
    fuzz.check(f"the healthy run after it was not healed: {healthy}",
               bool(healthy) and healthy[0][:1].isdigit(), conf)  # fmt: skip


# -- dbt artifacts -----------------------------------------------------------------------------

run_result = st.fixed_dictionaries(
    {},
    optional={
        "unique_id": st.one_of(st.sampled_from(["model.shop.orders", "test.shop.t.1"]), json_value),
        "status": st.one_of(
            st.sampled_from(["error", "fail", "success", "runtime error"]), json_value
        ),
        "message": json_value,
        "compiled_code": json_value,
        "relation_name": json_value,
        "failures": json_value,
    },
)
run_results = st.one_of(
    json_value,
    st.fixed_dictionaries(
        {"results": st.one_of(st.lists(run_result, max_size=4), json_value)},
        optional={"metadata": json_value, "elapsed_time": json_scalar},
    ),
)
manifest_node = st.fixed_dictionaries(
    {},
    optional={
        "name": json_value,
        "resource_type": st.one_of(seed, json_value),
        "original_file_path": json_value,
        "compiled_code": json_value,
        "columns": json_value,
        "depends_on": json_value,
        "test_metadata": json_value,
        "attached_node": json_value,
        "package_name": json_value,
        "source_name": json_value,
    },
)
manifest = st.one_of(
    json_value,
    st.fixed_dictionaries(
        {},
        optional={
            kind: st.one_of(
                st.dictionaries(st.one_of(seed, hostile_text), manifest_node, max_size=4),
                json_value,
            )
            for kind in ("nodes", "sources", "macros", "unit_tests")
        },
    ),
)
artifact_bytes = st.one_of(
    run_results.map(json_text).map(_as_bytes),
    manifest.map(json_text).map(_as_bytes),
    raw_bytes,
    deep_json_text.map(_as_bytes),
)


@pytest.fixture
def dbt_project(tmp_path: Path) -> Path:
    project = tmp_path / "repo" / "shop"
    (project / "target").mkdir(parents=True)
    (project / "models").mkdir()
    (project / "models" / "orders.sql").write_text("select 1 as id\n")
    (project / "dbt_project.yml").write_text("name: shop\nprofile: shop\n")
    return project


@given(run_results, manifest)
@fuzz_settings(examples=60)
def test_run_results_and_manifest_records(fuzz: Tally, results: Any, nodes: Any) -> None:
    fuzz.run(lambda: record_from_run_results(results, nodes), (), (results, nodes))


@given(artifact_bytes, artifact_bytes, st.one_of(json_value, st.lists(hostile_text, max_size=6)))
@fuzz_settings(examples=40)
def test_an_airflow_task_that_ran_dbt_reads_any_artifacts(
    fuzz: Tally, dbt_project: Path, results: bytes, nodes: bytes, dbt_args: Any
) -> None:
    (dbt_project / "target" / "run_results.json").write_bytes(results)
    (dbt_project / "target" / "manifest.json").write_bytes(nodes)
    event = UniversalFailureEvent(
        source="airflow",
        pipeline_id="shop_daily",
        unit_id="dbt_build",
        repo_path=str(dbt_project.parent),
        context={
            "runs_dbt": True,
            "dbt_project_dir": str(dbt_project),
            "dbt_args": dbt_args,
            "task_started_utc": "2000-01-01T00:00:00+00:00",
        },
    )

    def convert() -> None:
        for converted in dbt_events_from_airflow(event) or []:
            _check_event(converted)

    fuzz.run(convert, (), (results[:200], nodes[:200]))


@given(artifact_bytes)
@fuzz_settings(examples=60)
def test_the_project_index_reads_any_manifest(fuzz: Tally, dbt_project: Path, nodes: bytes) -> None:
    path = dbt_project / "target" / "manifest.json"
    path.write_bytes(nodes)
    fuzz.run(lambda: index_project(dbt_project, path), (), nodes[:300])


# -- Airflow contexts --------------------------------------------------------------------------


class Boom(BaseException):
    """Something a user's code might raise that is neither Exception nor a system exit."""


RAISES = (SystemExit, GeneratorExit, Boom, ValueError, RecursionError, MemoryError,
          AttributeError, TypeError, KeyError, OSError, UnicodeError, RuntimeError)  # fmt: skip


class Raise:
    def __init__(self, exc: type[BaseException]) -> None:
        self.exc = exc


class Hostile:
    """An object of the user's: every attribute, its str and its truth are drawn, and any of
    them may raise anything (SystemExit included)."""

    def __init__(self, attrs: dict[str, Any], text: Any, truth: Any) -> None:
        object.__setattr__(self, "_attrs", attrs)
        object.__setattr__(self, "_text", text)
        object.__setattr__(self, "_truth", truth)

    @staticmethod
    def _give(value: Any) -> Any:
        if isinstance(value, Raise):
            raise value.exc("hostile")
        return value

    def __getattr__(self, name: str) -> Any:
        attrs = object.__getattribute__(self, "_attrs")
        if name not in attrs:
            raise AttributeError(name)
        return Hostile._give(attrs[name])

    def __str__(self) -> str:
        return Hostile._give(object.__getattribute__(self, "_text"))  # type: ignore[no-any-return]

    __repr__ = __str__

    def __bool__(self) -> bool:
        return Hostile._give(object.__getattribute__(self, "_truth"))  # type: ignore[no-any-return]


ATTRS = ("dag_id", "task_id", "run_id", "try_number", "map_index", "start_date", "hostname",
         "log_url", "max_tries", "task", "dag", "bundle_instance", "name", "version", "fileloc",
         "template_fields", "bash_command", "cwd", "project_dir", "sql", "env",
         "isoformat")  # fmt: skip
raising = st.sampled_from(RAISES).map(Raise)
attr_value = st.one_of(json_value, raising, st.sampled_from([("bash_command", "env", "sql")]))
hostile_object = st.recursive(
    st.builds(
        Hostile,
        st.dictionaries(st.sampled_from(ATTRS), attr_value, max_size=10),
        st.one_of(hostile_text, raising, st.integers()),
        st.one_of(st.booleans(), raising, st.none()),
    ),
    lambda inner: st.builds(
        Hostile,
        st.dictionaries(st.sampled_from(ATTRS), st.one_of(attr_value, inner), max_size=10),
        st.one_of(hostile_text, raising),
        st.one_of(st.booleans(), raising),
    ),
    max_leaves=6,
)


def _raised(message: Any, kind: type[Exception]) -> Exception:
    class UserError(kind):  # type: ignore[valid-type, misc]
        def __str__(self) -> str:
            return Hostile._give(message)  # type: ignore[no-any-return]

    try:
        raise UserError()
    except UserError as exc:
        return exc


hostile_exception = st.builds(
    _raised,
    st.one_of(hostile_text, raising, st.integers()),
    st.sampled_from([ValueError, KeyError, RuntimeError, OSError, Exception]),
)
context = st.one_of(
    st.none(),
    st.integers(),
    hostile_object,
    st.fixed_dictionaries(
        {},
        optional={
            "ti": hostile_object,
            "task_instance": hostile_object,
            "dag": hostile_object,
            "task": hostile_object,
            "exception": st.one_of(hostile_exception, json_value),
            "reason": st.one_of(json_value, hostile_object),
            "run_id": st.one_of(json_value, hostile_object),
            "logical_date": st.one_of(json_value, hostile_object),
        },
    ),
)


@given(context)
@fuzz_settings(examples=60)
def test_airflow_contexts(fuzz: Tally, tmp_path: Path, ctx: Any) -> None:
    """The callback never raises (SystemExit from a property included), and what it spools
    is an event the worker can read."""
    home = tmp_path / "home"
    callback = make_failure_callback(home=home)
    fuzz.run(lambda: callback(ctx), (), ctx)
    if (home / "spool").exists():
        with Spool.open(home) as spool:
            for row in spool.rows():
                try:
                    _check_event(UniversalFailureEvent.model_validate(json.loads(row["payload"])))
                except (ValueError, ValidationError, UnicodeError) as exc:
                    fuzz.check(f"spooled an unreadable event: {exc}", False, row["payload"][:300])
            spool.conn.execute("delete from spool")


# -- logs --------------------------------------------------------------------------------------


# found by fuzzing: int() refused a 5,000-digit line number
@example(
    'Traceback (most recent call last):\n  File "/r/a.py", line ' + "9" * 5000 + ", in f\n", ""
)
@given(hostile_text, hostile_text)
@fuzz_settings(examples=60)
def test_logs_and_tracebacks(fuzz: Tally, text: str, log: str) -> None:
    def parse() -> None:
        last_traceback(text)
        exception_chain(text)
        frames = repo_frames(parse_frames(text), [Path("/repo")])
        pack_log(text[:2000], frames, lambda _rel: log, log_text=log)

    fuzz.run(parse, (), (text, log))


# -- model answers -----------------------------------------------------------------------------

REPO_FILES = [
    "dags/load.py",
    "bin.dat",
    "pipe",
    "subdir",
    "escape",
    "../outside.py",
    "/etc/passwd",
]
edit_answer = st.fixed_dictionaries(
    {
        "file": st.one_of(st.sampled_from(REPO_FILES), hostile_text, json_value),
        "search": st.one_of(st.sampled_from(["", 'row["amout"]', "total", " "]), hostile_text),
        "replace": st.one_of(hostile_text, json_value),
    }
)
candidate_answer = st.fixed_dictionaries(
    {
        "edits": st.one_of(st.lists(edit_answer, max_size=3), json_value),
        "strategy_tag": st.one_of(st.sampled_from(["rename_column", "other"]), hostile_text),
        "rationale": hostile_text,
    },
    optional={"confidence": st.one_of(st.floats(), json_value)},
)
model_answer = st.one_of(
    json_value,
    st.fixed_dictionaries(
        {"candidates": st.one_of(st.lists(candidate_answer, max_size=3), json_value)}
    ),
    st.fixed_dictionaries(
        {"class": json_value, "reason": json_value}, optional={"evidence_quotes": json_value}
    ),
)


@pytest.fixture(scope="module")
def answer_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("answer-repo")
    (repo / "dags").mkdir()
    (repo / "dags" / "load.py").write_text('def load(row):\n    total = row["amout"]\n')
    (repo / "bin.dat").write_bytes(b"\xff\xfe\x00binary")
    os.mkfifo(repo / "pipe")
    (repo / "subdir").mkdir()
    (repo / "escape").symlink_to("/etc/passwd")
    return repo


# found by fuzzing: a path past PATH_MAX raised OSError, a lone surrogate UnicodeEncodeError
@example({"candidates": [{"edits": [{"file": "p/" * 2500, "search": "", "replace": "x"}],
                          "strategy_tag": "other", "rationale": ""}]})  # fmt: skip
@example({"candidates": [{"edits": [{"file": "\ud800", "search": "", "replace": ""}],
                          "strategy_tag": "", "rationale": ""}]})  # fmt: skip
@given(model_answer)
@fuzz_settings(examples=60)
def test_model_answers(fuzz: Tally, answer_repo: Path, answer: Any) -> None:
    def parse() -> None:
        with suppress(ValidationError):
            ClassifyAnswer.model_validate(answer)
        proposal = ProposalAnswer.model_validate(answer)
        for candidate in proposal.candidates:
            with suppress(EditRejected):
                resolve_edits(answer_repo, candidate.edits, [])

    fuzz.run(parse, (ValidationError,), answer)
