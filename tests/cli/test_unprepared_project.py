"""A dbt project written here from scratch, unlike the example: patchit heals it all the same.

The project sits in a subdirectory of the repository, its profile lives outside it, and the
broken model is two levels below the seeds.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit
from tests.conftest import BIN, commit_all, git

pytestmark = pytest.mark.slow

FILES = {
    "dbt_project.yml": "name: fleet\nversion: '1.0.0'\nconfig-version: 2\nprofile: fleet\n",
    "seeds/trips.csv": "trip_id,driver_id,distance_km,fare_eur\n1,10,3.5,9.0\n2,10,12.0,24.5\n"
    "3,11,1.2,5.0\n4,12,30.0,61.0\n",
    "seeds/drivers.csv": "driver_id,driver_name,home_depot\n10,Ines,north\n11,Omar,south\n"
    "12,Yuki,north\n",
    "models/stg_trips.sql": "select trip_id, driver_id, distance_km, fare_eur\n"
    "from {{ ref('trips') }}\n",
    "models/driver_totals.sql": "select driver_id, count(*) as trips, sum(distance_km) as km,\n"
    "    sum(fare_eur) as revenue_eur\nfrom {{ ref('stg_trips') }}\ngroup by driver_id\n",
    "models/depot_revenue.sql": "select d.home_depot, sum(t.revenue_eur) as revenue_eur,\n"
    "    sum(t.km) as km\nfrom {{ ref('driver_totals') }} t\n"
    "join {{ ref('drivers') }} d using (driver_id)\ngroup by d.home_depot\n",
    "models/properties.yml": "version: 2\nmodels:\n  - name: driver_totals\n    columns:\n"
    "      - name: driver_id\n        data_tests: [not_null, unique]\n",
}


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Path, Path, Path]:
    repo = tmp_path / "platform"
    project = repo / "analytics" / "fleet"
    for name, text in FILES.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    (repo / "README.md").write_text("data platform\n")
    (repo / ".gitignore").write_text("target/\nlogs/\n*.duckdb*\n")
    profiles = tmp_path / "dbt-profiles"
    profiles.mkdir()
    warehouse = tmp_path / "warehouse" / "fleet.duckdb"
    warehouse.parent.mkdir()
    (profiles / "profiles.yml").write_text(
        f"fleet:\n  target: prod\n  outputs:\n    prod:\n      type: duckdb\n"
        f"      path: {warehouse}\n      threads: 2\n"
    )
    git(repo, "init", "-q", "-b", "trunk")
    commit_all(repo, "fleet analytics")
    ok = subprocess.run(
        [str(BIN / "dbt"), "build", "--profiles-dir", str(profiles)],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stdout[-2000:]
    return repo, project, profiles


def run(project: Path, profiles: Path) -> subprocess.CompletedProcess[str]:
    return patchit("dbt", "--profiles-dir", str(profiles), "--", "build", cwd=project)


def test_typo_two_levels_down_is_healed(fleet: tuple[Path, Path, Path]) -> None:
    repo, project, profiles = fleet
    model = project / "models" / "depot_revenue.sql"
    model.write_text(model.read_text().replace("sum(t.km) as km", "sum(kms) as km"))
    commit_all(repo, "depot_revenue: add distance")
    res = run(project, profiles)
    assert res.returncode == 1
    [incident] = incidents()
    assert incident["status"] == "fixed", res.stderr
    branch = incident["branch"]
    fixed = git(repo, "show", f"{branch}:analytics/fleet/models/depot_revenue.sql")
    assert "sum(km) as km" in fixed
    assert git(repo, "branch", "--show-current") == "trunk"
    assert git(repo, "status", "--porcelain") == ""


def test_not_null_failure_escalates(fleet: tuple[Path, Path, Path]) -> None:
    repo, project, profiles = fleet
    seed = project / "seeds" / "trips.csv"
    seed.write_text(seed.read_text() + "5,,4.0,8.0\n")
    commit_all(repo, "trips: April load")
    res = run(project, profiles)
    assert res.returncode == 1
    [incident] = incidents()
    assert (incident["status"], incident["classification"]) == ("escalated", "data_issue")
    assert incident["branch"] is None
