"""`heal = "dag"` against setting mistakes and odd servers: the callback always ends with the
failure triggered or spooled, within its time bound, and never sends credentials astray."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from patchit.integrations import airflow_trigger as trig
from patchit.integrations.airflow import make_failure_callback
from tests.fake_airflow import FakeAirflow, serve
from tests.integrations.test_airflow_callback import dag_repo, spooled
from tests.integrations.test_airflow_heal_trigger import TOKEN, _clean_env, context, free_port

__all__ = ["_clean_env", "dag_repo"]  # the fixtures, used here


def _read_request(conn: socket.socket) -> bytes:
    """The whole request (head and Content-Length body): a close with unread data would reset
    the connection before the client reads the answer."""
    data = b""
    while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length and (chunk := conn.recv(65536)):
        body += chunk
    return head + b"\r\n\r\n" + body


@contextmanager
def raw_server(
    answer: bytes, delay_s: float = 0.0, seen: list[bytes] | None = None
) -> Iterator[str]:
    """A server that reads the request (recorded in `seen`) and writes `answer` (bytes as
    they are, 64 at a time, `delay_s` apart), then closes; its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                try:
                    conn.settimeout(2)
                    request = _read_request(conn)
                    if seen is not None:
                        seen.append(request)
                    for chunk in [answer[i : i + 64] for i in range(0, len(answer), 64)]:
                        conn.sendall(chunk)
                        if delay_s:
                            stop.wait(delay_s)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        listener.close()


SHORT_BODY = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"


@pytest.mark.parametrize("api_url", ["airflow", "http://airflow:80a", "ftp//x", "http://[::1"])
def test_a_mistyped_api_url_spools(
    api_url: str, dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_failure_callback(heal="dag", api_url=api_url)(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "could not trigger patchit_heal" in caplog.text
    assert "could not spool" not in caplog.text


def test_an_infinite_timeout_spools(
    dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    callback = make_failure_callback(heal="dag", api_url=url, trigger_timeout_s=float("inf"))
    callback(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "could not spool" not in caplog.text


def test_a_short_body_spools(
    dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with raw_server(SHORT_BODY) as url:
        make_failure_callback(heal="dag", api_url=url)(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "could not trigger patchit_heal" in caplog.text
    assert "could not spool" not in caplog.text


def test_an_unexpected_error_in_the_trigger_spools(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    def broken(*_args: object, **_kw: object) -> str:
        raise RuntimeError("surprise")

    monkeypatch.setattr("patchit.integrations.airflow.trigger_heal", broken)
    make_failure_callback(heal="dag", api_url="http://x")(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "RuntimeError: surprise" in caplog.text


def answer(status: str, body: bytes, *headers: str) -> bytes:
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json", *headers]
    head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@pytest.mark.parametrize("status", ["301 Moved Permanently", "302 Found", "303 See Other"])
def test_a_redirect_is_not_followed_and_the_token_stays_home(
    status: str, dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    monkeypatch.setenv(trig.TOKEN_ENV, TOKEN)
    elsewhere: list[bytes] = []
    with raw_server(answer("200 OK", b'{"dag_runs": []}'), seen=elsewhere) as other:
        redirect = answer(status, b"{}", f"Location: {other}/api/v2/dags/patchit_heal/dagRuns")
        with raw_server(redirect) as url:
            make_failure_callback(heal="dag", api_url=url)(context(dag_repo))
    assert elsewhere == []  # neither followed nor given the token
    assert len(spooled(_patchit_home)) == 1
    assert "redirect" in caplog.text and "could not trigger patchit_heal" in caplog.text


@pytest.mark.parametrize(
    "body", [b"", b"{}", b"[]", b'{"dag_run_id": "someone_else"}', b'{"dag_runs": []}']
)
def test_an_answer_without_this_run_spools(
    body: bytes, dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with raw_server(answer("200 OK", body)) as url:
        make_failure_callback(heal="dag", api_url=url)(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "could not trigger patchit_heal" in caplog.text


def test_a_run_that_exists_already_was_handed_over(
    dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO")
    with serve(FakeAirflow(status=409)) as airflow:
        make_failure_callback(heal="dag", api_url=airflow.url)(context(dag_repo))
    assert len(airflow.requests) == 1
    assert not (_patchit_home / "spool").exists()
    assert "already exists: this failure was handed over before" in caplog.text


def test_login_and_trigger_share_one_time_bound(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    fake = FakeAirflow(delay_s=0.6)  # each answer within the timeout, both together not
    monkeypatch.setenv(trig.USERNAME_ENV, "patchit")
    monkeypatch.setenv(trig.PASSWORD_ENV, fake.password)
    with serve(fake) as airflow:
        callback = make_failure_callback(heal="dag", api_url=airflow.url, trigger_timeout_s=0.8)
        callback(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "no answer within 0.8 s" in caplog.text


def test_a_slow_drip_answer_is_bounded(dag_repo: Path, _patchit_home: Path) -> None:
    drip = answer("200 OK", b'{"pad": "' + b"a" * 3000 + b'"}')
    with raw_server(drip, delay_s=0.1) as url:  # ~5 s in 64-byte sips, each within timeout
        started = time.monotonic()
        callback = make_failure_callback(heal="dag", api_url=url, trigger_timeout_s=0.5)
        callback(context(dag_repo))
        took = time.monotonic() - started
    assert took < 2.0, took
    assert len(spooled(_patchit_home)) == 1


def test_an_answer_is_read_up_to_64_kib(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    monkeypatch.setattr(trig, "heal_run_id", lambda _event: "R")
    big = answer("200 OK", b'{"dag_run_id": "R", "pad": "' + b"a" * 70_000 + b'"}')
    with raw_server(big) as url:
        make_failure_callback(heal="dag", api_url=url)(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "larger than 64 KiB" in caplog.text


@pytest.mark.parametrize(
    ("given", "used", "said"),
    [
        (0, 3.0, "trigger_timeout_s = 0 is not a positive number; using 3"),
        (-1, 3.0, "trigger_timeout_s = -1 is not a positive number; using 3"),
        (float("nan"), 3.0, "trigger_timeout_s = nan is not a positive number; using 3"),
        (100, 30.0, "trigger_timeout_s = 100 is above 30 s; using 30"),
        (float("inf"), 30.0, "trigger_timeout_s = inf is above 30 s; using 30"),
        (30, 30.0, None),
        (0.25, 0.25, None),
    ],
)
def test_the_timeout_is_clamped_and_said(given: float, used: float, said: str | None) -> None:
    settings = trig.resolve_heal_settings(None, heal="dag", timeout_s=given, environ={})
    assert settings.timeout_s == used
    assert list(settings.problems) == ([said] if said else [])


def settle(callback: object, *args: object) -> bool:
    """Whether `callback(*args)` ends within 5 s (run in a daemon thread: it may not)."""
    thread = threading.Thread(target=callback, args=args, daemon=True)  # type: ignore[arg-type]
    thread.start()
    thread.join(5)
    return not thread.is_alive()


def test_a_fifo_for_a_config_does_not_block(
    dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    os.mkfifo(dag_repo / ".patchit.toml")
    assert settle(make_failure_callback(), context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "not a regular file" in caplog.text


def test_a_config_that_never_ends_is_not_read_to_its_end(
    dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (dag_repo / ".patchit.toml").symlink_to("/dev/zero")
    assert settle(make_failure_callback(), context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "not a regular file" in caplog.text


def test_a_huge_config_is_read_up_to_256_kib(
    dag_repo: Path, _patchit_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = '[airflow]\nheal = "dag"\napi_url = "http://127.0.0.1:9"\n'
    (dag_repo / ".patchit.toml").write_text(text + "#" * 300_000 + "\n")
    make_failure_callback()(context(dag_repo))
    assert len(spooled(_patchit_home)) == 1
    assert "larger than 256 KiB" in caplog.text
    assert "could not trigger" not in caplog.text  # treated as spool mode


@pytest.mark.parametrize("where", ["argument", "env"])
def test_spool_from_the_argument_or_env_reads_no_config(
    where: str, dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[object] = []
    monkeypatch.setattr(trig, "_airflow_table", lambda *args: read.append(args) or {})
    if where == "env":
        monkeypatch.setenv(trig.HEAL_ENV, "spool")
    make_failure_callback(heal="spool" if where == "argument" else None)(context(dag_repo))
    assert read == []
    assert len(spooled(_patchit_home)) == 1


def test_the_operators_api_url_outranks_the_repositorys(tmp_path: Path) -> None:
    env = {trig.API_URL_ENV: "http://operator:8080", trig.HEAL_ENV: "dag"}
    (tmp_path / ".patchit.toml").write_text('[airflow]\napi_url = "http://committer.example"\n')
    assert trig.resolve_heal_settings(str(tmp_path), environ=env).api_url == env[trig.API_URL_ENV]
    given = trig.resolve_heal_settings(str(tmp_path), api_url="http://arg:1", environ=env)
    assert given.api_url == "http://arg:1"


def test_a_repository_cannot_send_the_credentials_elsewhere(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    monkeypatch.setenv(trig.TOKEN_ENV, TOKEN)
    with serve(FakeAirflow()) as harvester, serve(FakeAirflow()) as own:
        monkeypatch.setenv(trig.EXECUTION_API_ENV, f"{own.url}/execution/")  # another port
        (dag_repo / ".patchit.toml").write_text(
            f'[airflow]\nheal = "dag"\napi_url = "{harvester.url}"\n'
        )
        make_failure_callback()(context(dag_repo))
    assert harvester.requests == [] and own.requests == []
    assert len(spooled(_patchit_home)) == 1
    assert f"api_url = '{harvester.url}' in" in caplog.text
    assert "not trusted with the Airflow credentials" in caplog.text


def test_a_repository_may_name_the_tasks_own_api_server(
    dag_repo: Path, _patchit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(trig.TOKEN_ENV, TOKEN)
    with serve(FakeAirflow()) as own:
        monkeypatch.setenv(trig.EXECUTION_API_ENV, f"{own.url}/execution/")
        (dag_repo / ".patchit.toml").write_text(
            f'[airflow]\nheal = "dag"\napi_url = "{own.url}/"\n'
        )
        make_failure_callback()(context(dag_repo))
    [seen] = own.requests
    assert seen.headers["Authorization"] == f"Bearer {TOKEN}"
    assert not (_patchit_home / "spool").exists()
