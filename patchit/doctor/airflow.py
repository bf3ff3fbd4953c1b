"""`patchit doctor`'s check of `[airflow] heal`: where the failure callback would hand a failure
over from this machine, and, for `heal = "dag"`, whether the Airflow API server has the heal
DAG, unpaused (`GET /api/v2/dags/{dag_id}` through apache-airflow-client, with the token the
callback would use)."""

from __future__ import annotations

from pathlib import Path

from patchit.delivery.airflow_runs import AirflowApi
from patchit.doctor.doctor import Check
from patchit.errors import BadInputError
from patchit.integrations.airflow_trigger import (
    API_URL_ENV,
    USERNAME_ENV,
    HealSettings,
    TriggerFailed,
    api_token,
    resolve_heal_settings,
    url_origin,
)

NAME = "airflow heal"
INSTALL = "add a file with `from patchit.integrations.airflow_heal import dag` to the dags folder"


def check_heal(repo: Path | None) -> list[Check]:
    """One line for the heal mode the callback resolves for `repo` (env, `.patchit.toml`),
    after one per setting it ignored."""
    settings = resolve_heal_settings(str(repo) if repo else None)
    fix_config = "fix [airflow] in .patchit.toml or the environment"
    checks = [Check("warn", NAME, problem, fix_config) for problem in settings.problems]
    return [*checks, _heal_target(settings)]


def _heal_target(settings: HealSettings) -> Check:
    if settings.mode == "spool":
        return Check("ok", NAME, "spool: failures wait in the spool for `patchit worker`")
    url, dag_id = settings.api_url, settings.dag_id
    if not url:
        why = "dag, but no Airflow API URL: the callback spools every failure"
        return Check("warn", NAME, why, f"set [airflow] api_url or {API_URL_ENV}")
    origin = url_origin(url)
    if origin is None or origin[0] not in ("http", "https"):
        why = f"dag, but the Airflow API URL {url!r} is not an http(s) URL with a host and port"
        return Check("fail", NAME, why, f"fix [airflow] api_url or {API_URL_ENV}")
    api = None
    try:
        token = api_token(url, settings.timeout_s)  # as the callback gets it
        api = AirflowApi(url, token, timeout_s=settings.timeout_s)
        paused = api.dag_paused(dag_id)
    except TriggerFailed as exc:
        return Check("fail", NAME, f"dag, but no token: {exc}", f"check {USERNAME_ENV}")
    except BadInputError as exc:
        return Check("fail", NAME, f"dag, but {exc}")  # it says what to check
    except Exception as exc:  # the client's or urllib's surprise: one line, not a traceback
        why = f"dag, but reading DAG {dag_id} on {url} failed ({type(exc).__name__}: {exc})"
        return Check("fail", NAME, " ".join(why.split())[:500])
    finally:
        if api is not None:
            api.close()
    if paused is None:
        why = f"dag, but {url} has no DAG {dag_id}: every trigger fails and the callback spools"
        return Check("fail", NAME, why, INSTALL)
    if paused:
        why = f"dag: {dag_id} on {url} is paused; its runs wait"
        return Check("warn", NAME, why, f"unpause it (`airflow dags unpause {dag_id}`)")
    return Check("ok", NAME, f"dag: {dag_id} on {url}, unpaused")
