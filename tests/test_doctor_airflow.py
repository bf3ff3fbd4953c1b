"""`patchit doctor`'s `[airflow] heal` line, without Airflow (the line for a deployment that has
the heal DAG is checked by tests/delivery/test_e2e_airflow_heal.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.doctor.airflow import check_heal
from patchit.integrations import airflow_trigger as trig
from tests.fake_airflow import FakeAirflow, serve
from tests.integrations.test_airflow_heal_trigger import free_port


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        trig.HEAL_ENV, trig.API_URL_ENV, trig.TOKEN_ENV, trig.EXECUTION_API_ENV,
        trig.USERNAME_ENV, trig.PASSWORD_ENV,
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


def test_spool_is_the_default() -> None:
    [check] = check_heal(None)
    assert (
        check.line() == "ok    airflow heal: spool: failures wait in the spool for `patchit worker`"
    )


def test_dag_without_an_api_url_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trig.HEAL_ENV, "dag")
    [check] = check_heal(None)
    assert check.status == "warn" and "the callback spools every failure" in check.detail
    assert check.fix == "set [airflow] api_url or PATCHIT_AIRFLOW_API_URL"


def test_an_api_server_without_the_heal_dag_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trig.HEAL_ENV, "dag")
    with serve(FakeAirflow()) as airflow:
        monkeypatch.setenv(trig.API_URL_ENV, airflow.url)
        [check] = check_heal(None)
    assert [(r.method, r.path) for r in airflow.requests] == [("GET", "/api/v2/dags/patchit_heal")]
    assert check.status == "fail"
    assert (
        check.detail
        == f"dag, but {airflow.url} has no DAG patchit_heal: every trigger fails "
        + ("and the callback spools")
    )
    assert "from patchit.integrations.airflow_heal import dag" in check.fix


def test_an_unreachable_api_server_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trig.HEAL_ENV, "dag")
    monkeypatch.setenv(trig.API_URL_ENV, f"http://127.0.0.1:{free_port()}")
    [check] = check_heal(None)
    assert check.status == "fail" and "could not read DAG patchit_heal" in check.detail
    assert "Connection refused" in check.detail


def test_ignored_settings_are_warned(tmp_path: Path) -> None:
    (tmp_path / ".patchit.toml").write_text('[airflow]\nheal = "later"\n')
    first, last = check_heal(tmp_path)
    assert first.status == "warn" and "heal = 'later' is not 'spool' or 'dag'" in first.detail
    assert last.status == "ok" and last.detail.startswith("spool")


def test_a_refused_login_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trig.HEAL_ENV, "dag")
    monkeypatch.setenv(trig.USERNAME_ENV, "patchit")
    monkeypatch.setenv(trig.PASSWORD_ENV, "not-the-password")
    with serve(FakeAirflow()) as airflow:
        monkeypatch.setenv(trig.API_URL_ENV, airflow.url)
        [check] = check_heal(None)
    assert [r.path for r in airflow.requests] == ["/auth/token"]
    assert check.status == "fail" and "answered HTTP 401 (Invalid credentials)" in check.detail


@pytest.mark.parametrize("url", ["airflow", "http://a:80a"])
@pytest.mark.parametrize("auth", ["token", "login"])
def test_a_mistyped_api_url_is_one_fail_line(
    url: str, auth: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(trig.HEAL_ENV, "dag")
    monkeypatch.setenv(trig.API_URL_ENV, url)
    if auth == "token":
        monkeypatch.setenv(trig.TOKEN_ENV, "a-token")
    else:
        monkeypatch.setenv(trig.USERNAME_ENV, "patchit")
        monkeypatch.setenv(trig.PASSWORD_ENV, "pw")
    [check] = check_heal(None)
    assert check.status == "fail"
    assert url in check.detail and "\n" not in check.detail


def test_an_unexpected_error_of_the_api_is_one_fail_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object) -> None:
        raise RuntimeError("client surprise")

    monkeypatch.setattr("patchit.doctor.airflow.AirflowApi.dag_paused", broken)
    monkeypatch.setenv(trig.HEAL_ENV, "dag")
    monkeypatch.setenv(trig.API_URL_ENV, "http://127.0.0.1:9")
    [check] = check_heal(None)
    assert check.status == "fail"
    assert check.detail == (
        "dag, but reading DAG patchit_heal on http://127.0.0.1:9 failed "
        "(RuntimeError: client surprise)"
    )
