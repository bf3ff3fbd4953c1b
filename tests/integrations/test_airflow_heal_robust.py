"""`heal = "dag"` against setting mistakes and odd servers: the callback always ends with the
failure triggered or spooled, within its time bound, and never sends credentials astray."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from patchit.integrations.airflow import make_failure_callback
from tests.integrations.test_airflow_callback import dag_repo, spooled
from tests.integrations.test_airflow_heal_trigger import _clean_env, context, free_port

__all__ = ["_clean_env", "dag_repo"]  # the fixtures, used here


@contextmanager
def raw_server(answer: bytes, delay_s: float = 0.0) -> Iterator[str]:
    """A server that reads the request head and writes `answer` (bytes as they are), then
    closes; its URL."""
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
                    conn.recv(65536)
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
