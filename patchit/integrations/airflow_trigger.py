"""`[airflow] heal = "dag"`: the failure callback triggers the `patchit_heal` DAG through the
Airflow REST API instead of spooling, standard library only.

The callback runs in the user's task process with no configuration loaded, so this module
reads its settings itself, cheaply, in this order (first found wins):
- `heal`: the callback's argument, else `PATCHIT_AIRFLOW_HEAL` (when either says "spool",
  `.patchit.toml` is not read), else `[airflow] heal` in the failing repository's
  `.patchit.toml` (read non-blocking, a regular file up to 256 KiB; one that cannot be read
  means "spool"), else "spool";
- `api_url`: the argument, else `PATCHIT_AIRFLOW_API_URL`, else `[airflow] api_url` only when
  it names the API server that serves the task (a repository's committer must not get the
  deployment's credentials sent elsewhere: another URL there is refused, said, and the failure
  spooled), else that server (`AIRFLOW__CORE__EXECUTION_API_SERVER_URL` less `/execution/`);
- `heal_dag_id` and `trigger_timeout_s`: the argument, else `.patchit.toml`, else the defaults.
`patchit.config.AirflowConfig` declares the same keys (a test keeps the defaults equal).

The request is `POST {api_url}/api/v2/dags/{heal_dag_id}/dagRuns` with the redacted event as
`conf = {"event": ...}`, a bearer token (`AIRFLOW_API_TOKEN`, or one issued for
`AIRFLOW_API_USERNAME`/`AIRFLOW_API_PASSWORD` by `POST /auth/token`), and a short timeout.
urllib rather than apache-airflow-client: the callback must import nothing but the standard
library (the client pulls pydantic and urllib3 into every failing task). Any failure raises
`TriggerFailed` with a one-line reason; the callback then spools as in "spool" mode.

A failure of the heal DAG itself is never handed over (`is_heal_dag`): it would heal itself.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import stat
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from patchit.intake.spool import spool_payload

HEAL_ENV = "PATCHIT_AIRFLOW_HEAL"
API_URL_ENV = "PATCHIT_AIRFLOW_API_URL"
TOKEN_ENV = "AIRFLOW_API_TOKEN"
USERNAME_ENV = "AIRFLOW_API_USERNAME"
PASSWORD_ENV = "AIRFLOW_API_PASSWORD"
EXECUTION_API_ENV = "AIRFLOW__CORE__EXECUTION_API_SERVER_URL"
HEAL_MODES = ("spool", "dag")
DEFAULT_HEAL = "spool"
DEFAULT_HEAL_DAG_ID = "patchit_heal"
DEFAULT_TRIGGER_TIMEOUT_S = 3.0
MAX_TRIGGER_TIMEOUT_S = 30.0  # the callback must never block a task's end for long
MAX_ANSWER_BYTES = 64 * 1024  # what a trigger or login answer may be, read at most
HEAL_TAG = "patchit-heal"  # every heal DAG carries it, whatever its id
CONFIG_NAME = ".patchit.toml"
_RUN_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.~:+-]+")


class TriggerFailed(Exception):
    """The heal DAG could not be triggered; the message is the one-line reason."""


@dataclass(frozen=True)
class HealSettings:
    """How the callback hands a failure over; `problems`: settings it ignored, and why."""

    mode: str = DEFAULT_HEAL
    api_url: str | None = None
    dag_id: str = DEFAULT_HEAL_DAG_ID
    timeout_s: float = DEFAULT_TRIGGER_TIMEOUT_S
    problems: tuple[str, ...] = field(default=())


MAX_CONFIG_BYTES = 256 * 1024  # a .patchit.toml is read up to this much


class _Unreadable(Exception):
    """`.patchit.toml` is there but cannot be read as a config (the message says why)."""


def _read_config(path: Path) -> str | None:
    """The text of `path`, None when there is none. Never blocks (a FIFO) nor reads forever
    (a link to /dev/zero): opened non-blocking, a regular file only, up to 256 KiB."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _Unreadable(f"unreadable ({type(exc).__name__})") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _Unreadable("not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_CONFIG_BYTES and (chunk := os.read(fd, MAX_CONFIG_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_CONFIG_BYTES:
            raise _Unreadable("larger than 256 KiB")
        return b"".join(chunks).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _Unreadable(f"unreadable ({type(exc).__name__})") from exc
    finally:
        os.close(fd)


def _airflow_table(repo_path: str | None, problems: list[str]) -> Mapping[str, Any] | None:
    """`[airflow]` of the repository's `.patchit.toml`, {} when there is none; None (said in
    `problems`) when it is there but unreadable or invalid: the callback then spools."""
    if not repo_path:
        return {}
    path = Path(repo_path) / CONFIG_NAME
    try:
        text = _read_config(path)
    except _Unreadable as exc:
        problems.append(f"{path}: {exc}; its [airflow] ignored, spooling")
        return None
    if text is None:
        return {}
    import tomllib  # only when there is a file: the plain spool path stays as cheap as it was

    try:
        table = tomllib.loads(text).get("airflow", {})
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"{path}: invalid TOML ({exc}); its [airflow] ignored, spooling")
        return None
    return table if isinstance(table, dict) else {}


def url_origin(url: str) -> tuple[str, str, int | None] | None:
    """Scheme, host and port of a URL (the default port filled in), None when it has none."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts.scheme.lower(), parts.hostname.lower(), port


def _api_from_execution_url(environ: Mapping[str, str]) -> str | None:
    """The API server that serves this task: Airflow 3 tasks know its execution API URL."""
    url = environ.get(EXECUTION_API_ENV, "").strip()
    if not url:
        return None
    return re.sub(r"/execution/?$", "", url.rstrip("/")) or None


def resolve_heal_settings(
    repo_path: str | None,
    heal: str | None = None,
    api_url: str | None = None,
    dag_id: str | None = None,
    timeout_s: float | None = None,
    environ: Mapping[str, str] = os.environ,
) -> HealSettings:
    """The callback's settings for a failure in `repo_path` (see the module docstring)."""
    problems: list[str] = []
    given = heal or environ.get(HEAL_ENV)
    if given == "spool":  # decided without the repository's file: not read at all
        return HealSettings()
    found = _airflow_table(repo_path, problems)
    table: Mapping[str, Any] = found or {}
    mode = given or table.get("heal") or DEFAULT_HEAL
    if found is None:  # the file is there but could not be read: spool, said once
        mode = DEFAULT_HEAL
    if mode not in HEAL_MODES:
        problems.append(f"heal = {str(mode)[:40]!r} is not 'spool' or 'dag'; spooling")
        mode = DEFAULT_HEAL
    url = api_url or environ.get(API_URL_ENV)  # the operator's, which the credentials go to
    own = _api_from_execution_url(environ)
    if not url and (repo_url := table.get("api_url")):
        if own and url_origin(str(repo_url)) == url_origin(own):
            url = str(repo_url)
        elif mode == "dag":  # a committer's URL must not collect the deployment's credentials
            problems.append(
                f"api_url = {str(repo_url)[:200]!r} in {CONFIG_NAME} is neither the callback's "
                f"argument, {API_URL_ENV} nor this task's API server ({own or 'unknown'}): "
                "not trusted with the Airflow credentials; spooling"
            )
            mode = DEFAULT_HEAL
    url = url or own
    heal_dag = dag_id or table.get("heal_dag_id") or DEFAULT_HEAL_DAG_ID
    timeout: Any = timeout_s
    if timeout is None:
        timeout = table.get("trigger_timeout_s", DEFAULT_TRIGGER_TIMEOUT_S)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0:
        problems.append(f"trigger_timeout_s = {timeout!r} is not a positive number; using 3")
        timeout = DEFAULT_TRIGGER_TIMEOUT_S
    elif timeout > MAX_TRIGGER_TIMEOUT_S:
        problems.append(f"trigger_timeout_s = {timeout!r} is above 30 s; using 30")
        timeout = MAX_TRIGGER_TIMEOUT_S
    return HealSettings(
        str(mode), str(url) if url else None, str(heal_dag), float(timeout), tuple(problems)
    )


def is_heal_dag(dag_id: Any, tags: Any, heal_dag_id: str = DEFAULT_HEAL_DAG_ID) -> bool:
    """Whether a failed task belongs to a heal DAG (by id, or by the tag every one carries)."""
    if dag_id in (heal_dag_id, DEFAULT_HEAL_DAG_ID):
        return True
    try:
        return HEAL_TAG in set(tags or ())
    except TypeError:
        return False


def heal_run_id(event: Mapping[str, Any]) -> str:
    """A readable run id: `patchit__<dag>.<task>__<event id>`, in Airflow's allowed characters."""
    unit = f"{event.get('pipeline_id', '')}.{event.get('unit_id', '')}"
    unit = _RUN_ID_UNSAFE.sub("_", unit)[:180]
    return f"patchit__{unit}__{str(event.get('event_id', ''))[:32]}"


class Triggered(NamedTuple):
    """The heal run of an event; `existed`: the server had it already (HTTP 409 on its run id,
    which is the event's own: an earlier hand-over of this very event)."""

    run_id: str
    existed: bool = False


def trigger_heal(
    event: Mapping[str, Any], settings: HealSettings, token: str | None = None
) -> Triggered:
    """Trigger one run of the heal DAG for `event` (redacted first). TriggerFailed with the
    reason when there is no API URL, or the server refuses, errs, redirects, answers without
    the run, or the whole of it (name lookup, login, trigger, answer) takes longer than
    `settings.timeout_s`: it runs in a daemon thread, left behind when late (its result is
    ignored), so that no socket, name lookup or slow answer can hold the task."""
    if not settings.api_url:
        raise TriggerFailed(
            f"no Airflow API URL: set [airflow] api_url or {API_URL_ENV} (or run on Airflow 3, "
            f"whose tasks know theirs from {EXECUTION_API_ENV})"
        )
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(_trigger(event, settings, token))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=run, name="patchit-heal-trigger", daemon=True)
    thread.start()
    thread.join(settings.timeout_s)
    if not outcome:
        raise TriggerFailed(
            f"{settings.api_url}: timed out: no answer within {settings.timeout_s:g} s "
            "(login and trigger together)"
        )
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]  # type: ignore[no-any-return]


def _trigger(event: Mapping[str, Any], settings: HealSettings, token: str | None) -> Triggered:
    """The trigger itself, in `trigger_heal`'s thread."""
    assert settings.api_url
    dag = urllib.parse.quote(settings.dag_id, safe="")
    url = f"{settings.api_url.rstrip('/')}/api/v2/dags/{dag}/dagRuns"
    run_id = heal_run_id(event)
    body = {
        "dag_run_id": run_id,
        "logical_date": None,
        "conf": {"event": json.loads(spool_payload(dict(event)))},
        "note": f"patchit: heal {event.get('pipeline_id')}.{event.get('unit_id')}",
    }
    if token is None:
        token = api_token(settings.api_url, settings.timeout_s)
    answer = _post_json(url, body, token, settings.timeout_s, conflict_ok=True)
    if answer is _CONFLICT:  # the run id is this event's: it was handed over already
        return Triggered(run_id, existed=True)
    found = answer.get("dag_run_id") if isinstance(answer, dict) else None
    if found != run_id:  # an empty or odd 2xx: no run was created for this event
        raise TriggerFailed(f"{url} answered without run {run_id} ({_brief(answer)})")
    return Triggered(run_id)


def api_token(
    api_url: str, timeout_s: float, environ: Mapping[str, str] = os.environ
) -> str | None:
    """`AIRFLOW_API_TOKEN`, else one the API server issues for `AIRFLOW_API_USERNAME` and
    `AIRFLOW_API_PASSWORD` (`POST /auth/token`: Airflow 3's tokens expire, a login does not),
    else None (a deployment that needs no token)."""
    if token := environ.get(TOKEN_ENV):
        return token
    user, password = environ.get(USERNAME_ENV), environ.get(PASSWORD_ENV)
    if not (user and password):
        return None
    url = f"{api_url.rstrip('/')}/auth/token"
    answer = _post_json(url, {"username": user, "password": password}, None, timeout_s)
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise TriggerFailed(f"{url} answered no access_token")
    return token


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib would follow a 301/302/303 of a POST as a GET (whose answer, a run list, looks
    like success) and send the token to the redirect's host: refuse instead."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> None:
        where = urllib.parse.urlsplit(newurl)
        raise TriggerFailed(
            f"{req.full_url} answered HTTP {code}, a redirect to "
            f"{where.scheme}://{where.netloc}{where.path[:100]}; not followed: set the API URL "
            "the server answers at"
        )


_OPENER = urllib.request.build_opener(_NoRedirect)
_CONFLICT = object()  # `_post_json(conflict_ok=True)`'s answer to an HTTP 409


def _brief(answer: Any) -> str:
    return " ".join(json.dumps(answer).split())[:200] or "empty"


def _post_json(
    url: str, body: Any, token: str | None, timeout_s: float, conflict_ok: bool = False
) -> Any:
    """POST `body` as JSON; the JSON answer (`_CONFLICT` for an HTTP 409 when `conflict_ok`).
    TriggerFailed with the reason on any failure, a redirect included."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:  # the Request too: a mistyped URL raises ValueError there
        request = urllib.request.Request(
            url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
        )
        with _OPENER.open(request, timeout=timeout_s) as response:
            raw = response.read(MAX_ANSWER_BYTES + 1)
        if len(raw) > MAX_ANSWER_BYTES:
            raise TriggerFailed(f"{url}: an answer larger than 64 KiB; not read")
        return json.loads(raw or b"{}")
    except urllib.error.HTTPError as exc:
        if exc.code == 409 and conflict_ok:
            return _CONFLICT
        raise TriggerFailed(f"{url} answered HTTP {exc.code} ({_detail(exc)})") from exc
    except urllib.error.URLError as exc:
        raise TriggerFailed(f"{url} unreachable ({exc.reason})") from exc
    except (OSError, ValueError, OverflowError, http.client.HTTPException) as exc:
        # a timeout while reading, a body that is not JSON, a URL or timeout urllib refuses
        # (InvalidURL, an infinite timeout), a body cut short (IncompleteRead)
        raise TriggerFailed(f"{url}: {type(exc).__name__}: {exc}") from exc


def _detail(exc: urllib.error.HTTPError) -> str:
    """The server's own words on a refusal (FastAPI's `detail`), one short line."""
    try:
        raw = exc.read(2000)
        detail: Any = json.loads(raw).get("detail", raw)
    except (OSError, ValueError, AttributeError):
        detail = exc.reason
    return " ".join(str(detail).split())[:300] or "no detail"
