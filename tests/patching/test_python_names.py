"""FixNameStrategy / FixImportStrategy on real Airflow failures and real Python tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.airflow import gather_airflow_evidence
from patchit.evidence.model import Evidence
from patchit.intake.airflow_scan import import_error_events
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.python_names import FixImportStrategy, FixNameStrategy
from tests.evidence.airflow_failures import (
    Zoo,
    init_repo,
    run_script,
    script_failure,
)
from tests.patching.contract import StrategyContract

pytestmark = pytest.mark.slow


class TestFixNameContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return FixNameStrategy()

    @pytest.fixture
    def evidence(self, zoo: Zoo) -> Evidence:
        return zoo.evidence("summarise")  # module 'zoo_lib.helpers' has no 'sumarise_orders'

    @pytest.fixture
    def unrelated_evidence(self, zoo: Zoo) -> Evidence:
        return zoo.evidence("load_order")


class TestFixImportContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return FixImportStrategy()

    @pytest.fixture
    def evidence(self, zoo: Zoo) -> Evidence:
        return zoo.evidence("import_late")  # cannot import name 'summarise_order'

    @pytest.fixture
    def unrelated_evidence(self, zoo: Zoo) -> Evidence:
        return zoo.evidence("missing_package")  # No module named 'zoo_vendor_sdk': a package


def test_module_attribute_is_renamed(zoo: Zoo) -> None:
    (candidate,) = FixNameStrategy().fix(zoo.evidence("summarise"), [])
    assert candidate.edits[0].replace == "        return helpers.summarise_orders([ORDER])\n"


def test_undefined_local_name_is_renamed_to_the_near_local(zoo: Zoo) -> None:
    (candidate,) = FixNameStrategy().fix(zoo.evidence("total_amount"), [])
    assert candidate.edits[0].replace == "        return total + 1\n"


def test_late_import_renames_the_import_and_its_use(zoo: Zoo) -> None:
    (candidate,) = FixImportStrategy().fix(zoo.evidence("import_late"), [])
    assert candidate.edits[0].replace == (
        "        from zoo_lib.helpers import summarise_orders\n\n"
        "        return summarise_orders([ORDER])\n"
    )


def test_broken_dag_importing_a_misspelt_module_is_fixed(zoo: Zoo, tmp_path: Path) -> None:
    repo = zoo.copy_repo(tmp_path / "repo")
    source = "from zoo_lib.helper import write_rows\n\nWRITER = write_rows\n"
    event = script_failure(repo, "dags/broken.py", source, "broken")
    (event,) = import_error_events({str(repo / "dags/broken.py"): event.traceback or ""},
                                   repo / "dags")  # fmt: skip
    evidence = gather_airflow_evidence(event, repo)
    (candidate,) = FixImportStrategy().fix(evidence, [])
    assert candidate.edits[0].replace == "from zoo_lib.helpers import write_rows\n"
    apply_edits(repo, candidate.edits)
    assert run_script(repo, "dags/broken.py").returncode == 0


ATTR_JOB = """class Order:
    def __init__(self, amount):
        self.amount = amount
        self.status = "placed"


def total(orders):
    return sum(o.amout for o in orders)


print(total([Order(3), Order(4)]))
"""

TIE_JOB = """def report():
    counts = 1
    county = 2
    return count + 1


report()
"""

FAR_JOB = """def report():
    total = 1
    return grand_total_cents + total


report()
"""


def test_instance_attribute_of_a_repo_class_is_fixed_and_runs(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, "jobs/orders.py", ATTR_JOB, "total")
    assert "'Order' object has no attribute 'amout'" in event.error_message
    (candidate,) = FixNameStrategy().fix(gather_airflow_evidence(event, repo), [])
    apply_edits(repo, candidate.edits)
    done = run_script(repo, "jobs/orders.py")
    assert done.returncode == 0 and done.stdout.strip() == "7"


@pytest.mark.parametrize("source", [TIE_JOB, FAR_JOB], ids=["tie", "below-bar"])
def test_no_guess_on_a_tie_or_below_the_bar(tmp_path: Path, source: str) -> None:
    repo = init_repo(tmp_path / "repo")
    event = script_failure(repo, "jobs/report.py", source, "report")
    assert event.error_type == "NameError"
    assert FixNameStrategy().fix(gather_airflow_evidence(event, repo), []) == []
