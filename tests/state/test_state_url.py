"""Choosing the state: `PATCHIT_STATE_URL` over `$PATCHIT_HOME/patchit.toml`, masked URLs, one
exit-2 line for a bad or unreachable URL with nothing written, and the Airflow callback's
fallback file when the state server is down. No Postgres server is needed here."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchit.config import load_deployment
from patchit.errors import BadInputError
from patchit.integrations.airflow import make_failure_callback
from patchit.state.url import StateUrlError, mask_url, state_url
from tests.cli.helpers import patchit


def closed_port() -> int:
    """A local port nothing listens on (connections are refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_env_wins_over_the_deployment_file(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert state_url(_patchit_home) is None  # SQLite by default
    _patchit_home.mkdir()
    (_patchit_home / "patchit.toml").write_text('[state]\nurl = "postgresql://db/file"\n')
    assert state_url(_patchit_home) == "postgresql://db/file"
    assert load_deployment(_patchit_home).state.url == "postgresql://db/file"
    monkeypatch.setenv("PATCHIT_STATE_URL", "postgres://db/env")
    assert state_url(_patchit_home) == "postgres://db/env"
    monkeypatch.setenv("PATCHIT_STATE_URL", "")  # set but empty: the embedded state
    assert state_url(_patchit_home) is None


def test_a_deployment_file_with_unknown_keys_is_refused(_patchit_home: Path) -> None:
    _patchit_home.mkdir()
    (_patchit_home / "patchit.toml").write_text('[state]\nurl = "postgresql://db/x"\nuser = 1\n')
    with pytest.raises(BadInputError, match=r"patchit\.toml: invalid deployment config"):
        load_deployment(_patchit_home)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql://bob:s3cr%40t@db:5432/p", "postgresql://bob:***@db:5432/p"),
        ("postgresql://bob@db/p?password=s3cret&sslmode=require",
         "postgresql://bob@db/p?password=***&sslmode=require"),
        ("postgresql:///p", "postgresql:///p"),
    ],
)  # fmt: skip
def test_passwords_are_masked(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_a_url_that_is_not_postgres_is_one_exit_2_line(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHIT_STATE_URL", "mysql://bob:s3cret@db/p")
    with pytest.raises(StateUrlError):
        state_url(_patchit_home)
    res = patchit("incidents")
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "not a postgresql:// URL" in res.stderr
    assert "s3cret" not in res.stderr and "mysql://bob:***@db/p" in res.stderr


@pytest.mark.parametrize("command", [("worker", "--once"), ("incidents",), ("spool", "list")])
def test_an_unreachable_state_is_one_exit_2_line_and_nothing_written(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    url = f"postgresql://bob:s3cret@127.0.0.1:{closed_port()}/patchit"
    monkeypatch.setenv("PATCHIT_STATE_URL", url)
    res = patchit(*command)
    assert res.returncode == 2, res.stderr
    [line] = res.stderr.splitlines()
    assert line.startswith("patchit: error: the state database postgresql://bob:***@127.0.0.1:")
    assert "cannot connect" in line and "PATCHIT_STATE_URL" in line and "s3cret" not in line
    assert not list(_patchit_home.rglob("*.sqlite3"))  # no SQLite state made up instead


def test_the_callback_writes_the_fallback_file_when_the_state_is_down(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHIT_STATE_URL", f"postgresql://127.0.0.1:{closed_port()}/patchit")
    began = time.monotonic()
    make_failure_callback()({"exception": KeyError("amout")})  # never raises
    assert time.monotonic() - began < 5
    [line] = (_patchit_home / "spool" / "fallback.jsonl").read_text().splitlines()
    assert json.loads(line)["error_type"] == "KeyError"
    assert not list(_patchit_home.rglob("*.sqlite3"))


def test_the_callback_module_never_imports_the_postgres_driver(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHIT_STATE_URL", f"postgresql://127.0.0.1:{closed_port()}/patchit")
    code = "import sys; import patchit.integrations.airflow as a; print('psycopg2' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_doctor_says_which_state_is_used_and_whether_it_answers(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from patchit.doctor.doctor import check_state

    embedded = check_state(_patchit_home)
    assert embedded.status == "ok" and "embedded SQLite" in embedded.detail
    monkeypatch.setenv("PATCHIT_STATE_URL", f"postgresql://bob:s3cret@127.0.0.1:{closed_port()}/p")
    down = check_state(_patchit_home)
    assert down.status == "fail" and "cannot connect" in down.detail
    assert "s3cret" not in down.line() and "bob:***@" in down.line()


def test_a_deployment_file_that_is_not_utf8_is_one_exit_2_line(_patchit_home: Path) -> None:
    _patchit_home.mkdir()
    (_patchit_home / "patchit.toml").write_bytes(b'[state]\nurl = "postgresql://db/caf\xe9"\n')
    res = patchit("incidents")
    assert res.returncode == 2, res.stderr
    [line] = res.stderr.splitlines()
    assert "patchit.toml: not UTF-8 text; fix or remove it" in line
    make_failure_callback()({"exception": KeyError("amout")})  # the event is not dropped
    [event] = (_patchit_home / "spool" / "fallback.jsonl").read_text().splitlines()
    assert json.loads(event)["error_type"] == "KeyError"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('[state]\nuri = "postgresql://db/x"\n', "[state] has no key uri"),
        ('state = "postgresql://db/x"\n', "state must be a [state] table"),
    ],
)
def test_a_misspelt_state_setting_is_an_error_not_the_sqlite_state(
    _patchit_home: Path, text: str, why: str
) -> None:
    _patchit_home.mkdir()
    (_patchit_home / "patchit.toml").write_text(text)
    with pytest.raises(StateUrlError, match=re.escape(why)):
        state_url(_patchit_home)


def test_a_producer_falls_back_on_a_value_error(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backstop: a ValueError (a decoder's, a driver's) sends the event to the fallback
    file instead of dropping it."""
    from patchit.intake import spool

    def broken(*_: object, **__: object) -> None:
        raise UnicodeDecodeError("utf-8", b"\xe9", 0, 1, "invalid")

    monkeypatch.setattr(spool.Spool, "open", broken)
    assert spool.spool_event({"source": "airflow", "unit_id": "v"}, _patchit_home) is None
    [event] = (_patchit_home / "spool" / "fallback.jsonl").read_text().splitlines()
    assert json.loads(event)["unit_id"] == "v"


def test_doctors_state_check_is_bounded_and_one_line(
    _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reads after the login run under a statement timeout, and their error (libpq's
    may span lines: DETAIL, HINT) is one line."""
    from patchit.doctor.doctor import check_state
    from patchit.state import pg

    seen: dict[str, object] = {}

    class Cursor:
        def execute(self, _sql: str) -> None:
            raise RuntimeError("permission denied for schema public\nHINT: ask the owner")

    class Raw:
        def cursor(self) -> Cursor:
            return Cursor()

        def close(self) -> None:
            pass

    def fake_connect(url: str, **kw: object) -> Raw:
        seen.update(kw)
        return Raw()

    monkeypatch.setattr(pg, "connect", fake_connect)
    monkeypatch.setenv("PATCHIT_STATE_URL", "postgresql://bob:s3cret@db/p")
    check = check_state(_patchit_home)
    assert check.status == "fail" and "\n" not in check.detail and "s3cret" not in check.detail
    assert "permission denied for schema public HINT: ask the owner" in check.detail
    assert seen.get("statement_timeout_s")
