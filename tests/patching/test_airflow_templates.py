"""TemplateVariableStrategy without an Airflow process: the error is Airflow 3.3.2's own
(`jinja2.exceptions.UndefinedError: 'execution_date' is undefined`, raised while the task's
templated fields render, so no repository frame), the rewritten templates are rendered by
real Jinja with the Airflow 3 context's names, and the classification reads them as code."""

from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

import jinja2
import pytest

from patchit.classify.classifier import classify_failure
from patchit.classify.model import FailureClass
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence
from patchit.evidence.templates import (
    REMOVED_TEMPLATE_VARS,
    reads_variable,
    replace_variables,
    undefined_name,
)
from patchit.patching.apply import apply_edits
from patchit.patching.fixits.airflow_templates import TemplateVariableStrategy
from tests.patching.contract import StrategyContract

TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/venv/site-packages/airflow/sdk/definitions/_internal/templater.py", line 140, '
    "in render_template\n"
    "    return self._render(template, context)\n"
    '  File "/venv/site-packages/jinja2/runtime.py", line 852, in _fail_with_undefined_error\n'
    "    raise self._undefined_exception(self._undefined_message)\n"
    "jinja2.exceptions.UndefinedError: 'execution_date' is undefined\n"
)

DAG = '''"""A DAG."""
from airflow.providers.standard.operators.bash import BashOperator

DAY = "{{ execution_date.strftime('%Y-%m-%d') }}"
execution_date = "a Python name, not a template"

archive = BashOperator(
    task_id="archive",
    bash_command=(
        'mkdir -p "out/{{ ds }}" && '
        'sha256sum f > "out/{{ execution_date | ds }}/f.sha256"'
    ),
)
# {{ execution_date }} in a comment stays
label = f"{{{{ execution_date }}}}"
'''


def evidence_for(root: Path, files: dict[str, str], changed: list[str] | None = None,
                 name: str = "execution_date") -> Evidence:  # fmt: skip
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    event = UniversalFailureEvent(
        source=FailureSource.AIRFLOW, pipeline_id="d", unit_id="archive", unit_path="dags/d.py",
        status="failed", error_type="UndefinedError", error_message=f"'{name}' is undefined",
        traceback=TRACE.replace("execution_date", name), repo_path=str(root),
    )  # fmt: skip
    return Evidence(
        event=event, repo_root=str(root), unit_path="dags/d.py",
        changed_files=changed if changed is not None else ["dags/d.py"],
    )  # fmt: skip


def healed(evidence: Evidence) -> Path:
    (candidate,) = TemplateVariableStrategy().fix(evidence, [])
    apply_edits(Path(evidence.repo_root), candidate.edits)
    return Path(evidence.repo_root)


def render(template: str) -> str:
    """Render as Airflow 3 would: StrictUndefined, its `ds` filters and `macros.timedelta`."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["ds"] = lambda value: value.strftime("%Y-%m-%d")
    env.filters["ds_nodash"] = lambda value: value.strftime("%Y%m%d")
    macros = type("macros", (), {"timedelta": dt.timedelta})
    day = dt.datetime(2026, 1, 15, tzinfo=dt.UTC)
    return env.from_string(template).render(logical_date=day, ds="2026-01-15", macros=macros)


def literals(text: str) -> list[str]:
    tree = ast.parse(text)
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and "{{" in n.value]  # fmt: skip


def test_every_template_literal_of_the_dag_file_moves_forward(tmp_path: Path) -> None:
    with pytest.raises(jinja2.UndefinedError, match="'execution_date' is undefined"):
        render("{{ execution_date | ds }}")  # what Airflow 3 raised
    root = healed(evidence_for(tmp_path, {"dags/d.py": DAG}))
    text = (root / "dags/d.py").read_text()
    assert "DAY = \"{{ logical_date.strftime('%Y-%m-%d') }}\"" in text
    assert "{{ logical_date | ds }}/f.sha256" in text
    # Python code, comments and f-strings (`{{` is an escaped brace there) are left alone
    assert 'execution_date = "a Python name, not a template"' in text
    assert "# {{ execution_date }} in a comment stays" in text
    assert 'label = f"{{{{ execution_date }}}}"' in text
    rendered = [render(t) for t in literals(text) if "logical_date" in t]
    bash = 'mkdir -p "out/2026-01-15" && sha256sum f > "out/2026-01-15/f.sha256"'
    assert sorted(rendered) == sorted(["2026-01-15", bash])


@pytest.mark.parametrize(
    ("old", "expected"),
    [
        ("{{ yesterday_ds }}", "2026-01-14"),
        ("{{ tomorrow_ds_nodash }}", "20260116"),
        ("{{ yesterday_ds_nodash | upper }}", "20260114"),
        ("{% if execution_date %}{{ tomorrow_ds }}{% endif %}", "2026-01-16"),
    ],
)
def test_derived_variables_render_what_airflow_2_rendered(old: str, expected: str) -> None:
    new, done = replace_variables(old, REMOVED_TEMPLATE_VARS)
    assert done and render(new) == expected


def test_a_template_file_the_dag_names_and_a_changed_sql_file(tmp_path: Path) -> None:
    dag = 'from ops import SQLOp\n\nSQLOp(task_id="load", sql="sql/load.sql")\n'
    files = {
        "dags/d.py": dag,
        "dags/sql/load.sql": "delete from t where day = '{{ execution_date | ds }}';\n",
        "sql/other.sql": "select '{{ yesterday_ds }}' -- execution_date outside Jinja\n",
    }
    root = healed(evidence_for(tmp_path, files, changed=["sql/other.sql", "README.md"]))
    assert (root / "dags/sql/load.sql").read_text() == (
        "delete from t where day = '{{ logical_date | ds }}';\n"
    )
    other = (root / "sql/other.sql").read_text()
    assert "-- execution_date outside Jinja" in other
    assert render(other.split("'")[1]) == "2026-01-14"


def test_no_candidate_without_an_equivalent_or_a_template(tmp_path: Path) -> None:
    dag = 'X = "{{ prev_ds }}"\n'
    assert TemplateVariableStrategy().fix(evidence_for(tmp_path, {"dags/d.py": dag},
                                                       name="prev_ds"), []) == []  # fmt: skip
    plain = 'X = "no template reads it"\nexecution_date = 1\n'
    assert TemplateVariableStrategy().fix(evidence_for(tmp_path, {"dags/d.py": plain}), []) == []


def test_reading_the_error_and_the_regions() -> None:
    assert undefined_name("UndefinedError", "'execution_date' is undefined") == "execution_date"
    assert undefined_name("Exception", "x\njinja2.exceptions.UndefinedError: 'ds2' is undefined")
    assert undefined_name("KeyError", "'execution_date'") is None
    assert reads_variable("a {{ f(x, execution_date) }}", "execution_date")
    assert not reads_variable("{{ dag_run.execution_date }}", "execution_date")
    assert not reads_variable("{{ f(execution_date=1) }} {{ 'execution_date' }}", "execution_date")
    assert not reads_variable("execution_date {{ ds }}", "execution_date")


def test_classified_as_a_code_bug(tmp_path: Path) -> None:
    evidence = evidence_for(tmp_path, {"dags/d.py": DAG})
    verdict = classify_failure(evidence)
    assert (verdict.cls, verdict.signature) == (FailureClass.CODE_BUG, "airflow_template_undefined")
    # a name the change wrote into a template is code too; one it did not is not ours to call
    custom = 'X = "{{ run_day }}"\n'
    evidence = evidence_for(tmp_path, {"dags/d.py": custom}, name="run_day")
    assert classify_failure(evidence).cls is FailureClass.CODE_BUG
    evidence = evidence_for(tmp_path, {"dags/d.py": custom}, changed=[], name="run_day")
    assert classify_failure(evidence).signature != "airflow_template_undefined"


def test_an_attribute_the_dag_run_lost_in_a_template(tmp_path: Path) -> None:
    dag = 'X = "{{ dag_run.execution_date | ds }} {{ ti.execution_date.year }} {{ ds }}"\n'
    message = (
        "'airflow.sdk.api.datamodels._generated.DagRun object' has no attribute 'execution_date'"
    )
    evidence = evidence_for(tmp_path, {"dags/d.py": dag})
    evidence.event.error_message = message
    evidence.event.traceback = f"jinja2.exceptions.UndefinedError: {message}\n"
    assert classify_failure(evidence).signature == "airflow_template_undefined"
    root = healed(evidence)
    assert (root / "dags/d.py").read_text() == (
        'X = "{{ dag_run.logical_date | ds }} {{ logical_date.year }} {{ ds }}"\n'
    )


@pytest.fixture
def strategy() -> TemplateVariableStrategy:
    return TemplateVariableStrategy()


@pytest.fixture
def evidence(tmp_path: Path) -> Evidence:
    return evidence_for(tmp_path / "dag", {"dags/d.py": DAG})


@pytest.fixture
def unrelated_evidence(tmp_path: Path) -> Evidence:
    return evidence_for(tmp_path / "prev", {"dags/d.py": 'X = "{{ prev_ds }}"\n'}, name="prev_ds")


class TestTemplateVariableContract(StrategyContract):
    pass
