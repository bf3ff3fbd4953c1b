"""python_follow_rename: a function or a record key the change renamed is followed into every
reader it left behind, in one candidate, and never put back. Real git, real Python runs (the
traceback is genuine); no Airflow."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.intents import change_intents, reverted_intents
from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.fixits.python_follow import FollowPythonRenameStrategy
from tests.conftest import commit_all
from tests.evidence.airflow_failures import init_repo, run_script, script_failure
from tests.patching.contract import StrategyContract

LANDING = textwrap.dedent(
    """\
    def read_rows(source):
        return [{"store": "s1", "quantity": "2", "price": "5"}] if source else []


    def count(source):
        return len(read_rows(source))
    """
)
SALES = textwrap.dedent(
    """\
    def parse_order(row):
        return {"store": row["store"], "quantity": int(row["quantity"]), "price": int(row["price"])}


    def line_total(order):
        return order["quantity"] * order["price"]


    def units(orders):
        return sum(order.get("quantity", 0) for order in orders)
    """
)
JOB = textwrap.dedent(
    """\
    import os

    import landing as src
    from landing import read_rows
    from sales import line_total, parse_order, units

    orders = [parse_order(r) for r in src.read_rows("orders")]
    assert read_rows("x") and os.environ.get("quantity") is None
    print(units(orders), sum(line_total(o) for o in orders))
    """
)


def repo_with(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    (repo / "jobs").mkdir()
    (repo / "jobs/landing.py").write_text(LANDING)
    (repo / "jobs/sales.py").write_text(SALES)
    commit_all(repo, "good")
    return repo


def test_a_renamed_function_is_followed_through_every_import_and_alias(tmp_path: Path) -> None:
    repo = repo_with(tmp_path)
    assert script_failure.__doc__  # the helper commits JOB, runs it, and returns the failure
    (repo / "jobs/job.py").write_text(JOB)
    commit_all(repo, "job")
    assert run_script(repo, "jobs/job.py").stdout.strip() == "2 10"
    renamed = LANDING.replace("def read_rows", "def read_landing")
    (repo / "jobs/landing.py").write_text(renamed)
    event = script_failure(repo, "jobs/job.py", JOB.replace("import os\n", "import os  # v2\n"),
                           "extract")  # fmt: skip
    evidence = gather_airflow_evidence(event, repo)
    (candidate,) = FollowPythonRenameStrategy().fix(evidence, [])
    assert candidate.follows == {"read_rows": "read_landing"}
    assert sorted(e.path for e in candidate.edits) == ["jobs/job.py", "jobs/landing.py"]
    apply_edits(repo, candidate.edits)
    assert run_script(repo, "jobs/job.py").stdout.strip() == "2 10"
    job = (repo / "jobs/job.py").read_text()
    assert "src.read_landing(" in job and "from landing import read_landing" in job
    assert "def read_landing" in (repo / "jobs/landing.py").read_text()  # the rename is kept
    previews = {e.path: ("", (repo / e.path).read_text()) for e in candidate.edits}
    assert reverted_intents(change_intents(evidence), previews) == []


def test_a_renamed_key_is_followed_into_every_reader_but_not_the_builders_input(
    tmp_path: Path,
) -> None:
    repo = repo_with(tmp_path)
    (repo / "jobs/job.py").write_text(JOB)
    commit_all(repo, "job")
    (repo / "jobs/sales.py").write_text(SALES.replace('"quantity": int', '"units": int'))
    event = script_failure(repo, "jobs/job.py", JOB.replace("import os\n", "import os  # v2\n"),
                           "summarise")  # fmt: skip
    assert event.error_type == "KeyError" and event.error_message.strip() == "'quantity'"
    evidence = gather_airflow_evidence(event, repo)
    intents = change_intents(evidence)
    assert any(i.kind == "key_renamed" and (i.old, i.new) == ("quantity", "units")
               for i in intents)  # fmt: skip
    (candidate,) = FollowPythonRenameStrategy().fix(evidence, [])
    apply_edits(repo, candidate.edits)
    assert run_script(repo, "jobs/job.py").stdout.strip() == "2 10"
    sales = (repo / "jobs/sales.py").read_text()
    assert 'int(row["quantity"])' in sales  # the landing row still says quantity
    assert 'order["units"]' in sales and 'order.get("units", 0)' in sales
    assert 'os.environ.get("quantity")' in (repo / "jobs/job.py").read_text()


def test_putting_the_old_key_back_reverts_the_change(tmp_path: Path) -> None:
    repo = repo_with(tmp_path)
    (repo / "jobs/job.py").write_text(JOB)
    commit_all(repo, "job")
    renamed = SALES.replace('"quantity": int', '"units": int')
    (repo / "jobs/sales.py").write_text(renamed)
    event = script_failure(repo, "jobs/job.py", JOB.replace("import os\n", "import os  # v2\n"),
                           "summarise")  # fmt: skip
    evidence = gather_airflow_evidence(event, repo)
    undone = reverted_intents(change_intents(evidence), {"jobs/sales.py": (renamed, SALES)})
    assert [i.description for i in undone] == [
        "renamed key 'quantity' to 'units' in parse_order (jobs/sales.py)"
    ]
    renamed_fn = LANDING.replace("def read_rows", "def read_landing")
    from patchit.evidence.intents import file_intents

    (intent,) = file_intents("jobs/landing.py", LANDING, renamed_fn)
    assert reverted_intents([intent], {"jobs/landing.py": (renamed_fn, LANDING)}) == [intent]


def test_no_rename_in_the_change_no_candidate(tmp_path: Path) -> None:
    repo = repo_with(tmp_path)
    event = script_failure(repo, "jobs/job.py", JOB.replace("src.read_rows", "src.read_rowz"),
                           "extract")  # fmt: skip
    assert FollowPythonRenameStrategy().fix(gather_airflow_evidence(event, repo), []) == []


@pytest.fixture
def strategy() -> FollowPythonRenameStrategy:
    return FollowPythonRenameStrategy()


@pytest.fixture
def evidence(tmp_path: Path) -> Evidence:
    repo = repo_with(tmp_path / "renamed")
    (repo / "jobs/landing.py").write_text(LANDING.replace("def read_rows", "def read_landing"))
    return gather_airflow_evidence(script_failure(repo, "jobs/job.py", JOB, "extract"), repo)


@pytest.fixture
def unrelated_evidence(tmp_path: Path) -> Evidence:
    repo = repo_with(tmp_path / "typo")
    job = JOB.replace("src.read_rows", "src.read_rowz")
    return gather_airflow_evidence(script_failure(repo, "jobs/job.py", job, "extract"), repo)


class TestFollowPythonRenameContract(StrategyContract):
    pass
