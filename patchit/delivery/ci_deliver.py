"""Deliver what `patchit ci` (dbt) or `patchit airflow check` (DAG files) healed into the pull
request itself.

- a small fix (`patchit.delivery.suggestions`) becomes one review whose comments carry
  ```suggestion blocks on the head commit's lines: the author applies it with one click;
- a larger fix is carried onto the head commit, pushed to `patchit/pr-<number>` and opened as
  a pull request into the pull request's head branch;
- one summary comment, found by its marker and edited in place on every run;
- a commit status `patchit` on the head commit with the outcome (a failing build or DAG check
  stays a failure: a suggestion is help, not a pass).

The summary is also written to the job's step summary and to a file (the artifact), always: a
fork's job, or one without a token, gets only those and sends nothing anywhere.

Where the token goes is the operator's to say (DESIGN "Trust boundaries"): the operator's
`[delivery] api_url` in `$PATCHIT_HOME/patchit.toml` when set, else the runner's
`GITHUB_API_URL`; never a repository's `.patchit.toml`. When the operator named a `[delivery]
repo` that is not the job's repository, nothing is sent.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from patchit.config import load_deployment
from patchit.delivery.ci_env import PullRequestJob
from patchit.delivery.ci_summary import DBT, IncidentNote, Runtime, render_summary
from patchit.delivery.forge import ForgeError, PullRequestDraft, capped_body
from patchit.delivery.pr_review import PullRequestThread
from patchit.delivery.suggestions import as_suggestions, fix_on_head, pull_request_lines
from patchit.errors import PatchitError
from patchit.memory.records import Incident
from patchit.sandbox.git import run_git
from patchit.sync.branch import AUTHOR_EMAIL

Say = Callable[[str], None]
SUMMARY_FILE = "patchit-summary.md"


@dataclass(frozen=True)
class ApiTarget:
    """Where the token may go (`api_url`, None: nowhere) and the remote fixes are pushed to."""

    api_url: str | None
    remote: str
    why_not: str = ""


def api_target(job: PullRequestJob, home: Path, say: Say) -> ApiTarget:
    delivery = load_deployment(home).delivery
    chosen = delivery.model_fields_set
    if "repo" in chosen and delivery.repo and delivery.repo.lower() != job.repository.lower():
        why = (f"the operator's [delivery] repo {delivery.repo} is not this job's repository "
               f"{job.repository}")  # fmt: skip
        return ApiTarget(None, delivery.remote, why)
    if "api_url" in chosen:
        if delivery.api_url.rstrip("/") != job.api_url:
            say(f"GITHUB_API_URL {job.api_url} ignored: the operator's [delivery] api_url "
                f"{delivery.api_url} applies")  # fmt: skip
        return ApiTarget(delivery.api_url.rstrip("/"), delivery.remote)
    return ApiTarget(job.api_url, delivery.remote)


def deliver_in_pull_request(
    job: PullRequestJob,
    repo: Path,
    merge_base: str,
    incidents: list[Incident],
    exit_code: int,
    home: Path,
    artifact_dir: Path,
    say: Say,
    transport: httpx.BaseTransport | None = None,
    runtime: Runtime = DBT,
) -> Path:
    """Deliver and summarise; the path of the summary file. `exit_code` is what `runtime` (dbt,
    the DAG check) exited with. Never raises for the code host's refusals (each is one line
    said and noted in the summary)."""
    target = api_target(job, home, say)
    read_only = "" if job.can_write else job.read_only_reason()
    read_only = read_only or (target.why_not if target.api_url is None else "")
    notes = [IncidentNote(i) for i in incidents]
    fixes = _plan(job, repo, merge_base, notes, home)
    thread = None
    if not read_only and target.api_url is not None:
        thread = PullRequestThread(job.repository, job.token, target.api_url, transport=transport)
    try:
        if thread is not None:
            _post_suggestions(job, thread, fixes, say)
            _open_fix_pull(job, repo, thread, target.remote, fixes, home, say)
        body = render_summary(notes, exit_code, job.head_sha, read_only, job.token, runtime)
        path = _write_summary(body, job, artifact_dir, incidents)
        if thread is not None:
            _post_summary(job, thread, body, exit_code, notes, say, runtime)
    finally:
        if thread is not None:
            thread.close()
    if read_only:
        say(f"read-only: {read_only}; the summary is in {path}"
            + (" and the job's step summary" if job.step_summary else ""))  # fmt: skip
    return path


@dataclass
class _Fix:
    note: IncidentNote
    commit: str  # the verified fix, one commit on the commit it was verified at
    on_head: str  # the same fix on the pull request's head commit
    suggestions: list[dict[str, object]]
    why_not_suggested: str = ""


def _plan(
    job: PullRequestJob, repo: Path, merge_base: str, notes: list[IncidentNote], home: Path
) -> list[_Fix]:
    """Each fixed incident's fix on the head commit, as suggestions when it is small."""
    shown = pull_request_lines(repo, merge_base, job.head_sha)
    fixes = []
    for note in notes:
        incident = note.incident
        if incident.status.value != "fixed" or not incident.branch:
            continue
        ref = f"refs/heads/{incident.branch}"
        commit = run_git(repo, "rev-parse", "--verify", "--quiet", ref, check=False).strip()
        if not commit:
            note.notes.append(f"its branch {incident.branch} is gone: nothing to suggest")
            continue
        scratch = home / "worktrees" / f"ci-{job.number}-{incident.id}"
        on_head, _left = fix_on_head(repo, [commit], job.head_sha, scratch)
        if on_head is None:
            note.notes.append("the fix does not apply on the pull request's head commit "
                              f"{job.head_sha[:12]}: see branch {incident.branch}")  # fmt: skip
            continue
        note.diff = run_git(repo, "diff", "--no-ext-diff", "--no-color", job.head_sha, on_head)
        found, why = as_suggestions(repo, job.head_sha, on_head, shown)
        marker = _review_marker(job.head_sha, note.diff)
        comments = [s.comment() for s in found]
        if comments:
            comments[0]["body"] = f"{marker}\n{comments[0]['body']}"
        fixes.append(_Fix(note, commit, on_head, comments, why))
        note.delivered = ("suggested in a review" if comments
                          else f"a pull request into `{job.head_ref}`")  # fmt: skip
    return fixes


def _review_marker(head_sha: str, diff: str) -> str:
    digest = hashlib.sha256(f"{head_sha}\n{diff}".encode()).hexdigest()[:16]
    return f"<!-- patchit:suggestion {digest} -->"


def _post_suggestions(
    job: PullRequestJob, thread: PullRequestThread, fixes: list[_Fix], say: Say
) -> None:
    small = [f for f in fixes if f.suggestions]
    if not small:
        return
    try:
        posted = [str(r.get("body") or "") for r in thread.reviews(job.number)]
        posted += [str(c.get("body") or "") for c in thread.review_comments(job.number)]
        for fix in small:
            marker = _review_marker(job.head_sha, fix.note.diff)
            if any(marker in text for text in posted):
                fix.note.notes.append("its suggestion is in the review already posted for "
                                      f"{job.head_sha[:12]}")  # fmt: skip
                continue
            body = (f"patchit verified this fix for incident `{fix.note.incident.id}` "
                    f"({fix.note.incident.summary or 'see the summary comment'}). Apply the "
                    "suggestion, then the next run builds it.")  # fmt: skip
            review = thread.post_review(job.number, job.head_sha, body, fix.suggestions)
            url = str(review.get("html_url") or "")
            fix.note.delivered = f"suggested in a review {url}".strip()
            say(f"incident {fix.note.incident.id}: {len(fix.suggestions)} suggestion(s) posted")
    except ForgeError as exc:
        _refused(fixes, f"the review was refused: {exc}", say, job.token)


def _open_fix_pull(
    job: PullRequestJob,
    repo: Path,
    thread: PullRequestThread,
    remote: str,
    fixes: list[_Fix],
    home: Path,
    say: Say,
) -> None:
    """The fixes too large to suggest, on one branch `patchit/pr-<number>` from the head
    commit, opened as a pull request into the head branch."""
    large = [f for f in fixes if not f.suggestions]
    if not large:
        return
    scratch = home / "worktrees" / f"ci-{job.number}-pull"
    top, left = fix_on_head(repo, [f.commit for f in large], job.head_sha, scratch)
    for fix in large:
        if fix.commit in left:
            fix.note.notes.append("it conflicts with another fix: not in the pull request")
    if top is None:
        return
    branch = f"patchit/pr-{job.number}"
    if why := _push(repo, remote, top, job.head_sha, branch, job.token):
        _refused(large, why, say, job.token)
        return
    ids = ", ".join(f"`{f.note.incident.id}`" for f in large if f.commit not in left)
    body = (f"patchit verified these fixes for #{job.number} (incidents {ids}) in a sandbox; "
            f"merge this pull request into `{job.head_ref}` to take them. The summary comment "
            f"on #{job.number} has the reports.\n\n"
            + "\n\n".join(f"```diff\n{f.note.diff.rstrip()}\n```" for f in large))  # fmt: skip
    draft = PullRequestDraft(
        head=branch, base=job.head_ref, title=f"patchit: fix the build of #{job.number}",
        body=capped_body(body, large[0].note.incident.id),
    )  # fmt: skip
    try:
        pull = thread.open_or_update(draft)
    except ForgeError as exc:
        _refused(large, f"the pull request was refused: {exc}", say, job.token)
        return
    for fix in large:
        if fix.commit not in left:
            fix.note.delivered = f"pull request #{pull.number} into `{job.head_ref}` {pull.url}"
    say(f"pull request #{pull.number} {'opened' if pull.created else 'updated'} {pull.url}")


def _push(repo: Path, remote: str, commit: str, head: str, branch: str, token: str) -> str:
    """Push `commit` (fixes on `head`) to `branch` ("" when done, else why not). A branch
    holding commits someone else wrote on top of the head is never overwritten; patchit's own
    earlier fixes (on this head or an older one) are replaced."""
    ref = f"refs/heads/{branch}"
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    listed = run_git(repo, "ls-remote", remote, ref, check=False, timeout_s=60, env=env).split()
    spec = [f"{commit}:{ref}"]
    if listed:
        tip = listed[0]
        if tip == commit:
            return ""
        run_git(repo, "fetch", "-q", "--no-write-fetch-head", remote, ref, check=False,
                timeout_s=120, env=env)  # fmt: skip
        authors = run_git(repo, "log", "--format=%ae", tip, f"^{head}", "--", check=False)
        if not authors.strip() or set(authors.split()) != {AUTHOR_EMAIL}:
            return f"{branch} on {remote} holds commits patchit did not write: not overwritten"
        spec = [f"--force-with-lease={ref}:{tip}", *spec]
    out = run_git(repo, "push", "--porcelain", remote, *spec, check=False, timeout_s=120,
                  config=["credential.interactive=never"], env=env)  # fmt: skip
    if not any(line.startswith(("=\t", "*\t", " \t", "+\t")) for line in out.splitlines()):
        return f"git push {remote} {branch} was refused".replace(token or "\0", "***")
    return ""


def _post_summary(
    job: PullRequestJob,
    thread: PullRequestThread,
    body: str,
    exit_code: int,
    notes: list[IncidentNote],
    say: Say,
    runtime: Runtime,
) -> None:
    try:
        # a green build with nothing said before says nothing: no comment on every pull request
        comment, created = thread.upsert_summary(job.number, body, create=exit_code != 0)
        url = str(comment.get("html_url") or "") if comment else ""
        if comment is not None:
            say(f"summary comment {'posted' if created else 'updated'} {url}".rstrip())
        fixed = sum(1 for n in notes if n.incident.status.value == "fixed")
        if exit_code == 0:
            state, text = "success", f"{runtime.name} passed"
        else:
            state = "failure"
            text = f"{runtime.name} failed: {len(notes)} incident(s), {fixed} with a verified fix"
        thread.set_status(job.head_sha, state, text, url)
    except ForgeError as exc:
        say(f"the pull request's summary or status was refused: {_masked(str(exc), job.token)}")


def _refused(fixes: list[_Fix], why: str, say: Say, token: str) -> None:
    why = _masked(why, token)
    say(why)
    for fix in fixes:
        fix.note.delivered = ""
        fix.note.notes.append(why)


def _masked(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


def _write_summary(
    body: str, job: PullRequestJob, artifact_dir: Path, incidents: list[Incident]
) -> Path:
    """The summary file and the incidents' reports in `artifact_dir`; the summary appended to
    the step summary (GitHub shows the file's content on the run's page)."""
    try:
        (artifact_dir / "reports").mkdir(parents=True, exist_ok=True)
        path = artifact_dir / SUMMARY_FILE
        path.write_text(body, encoding="utf-8")
        for incident in incidents:
            for report in (incident.report_md, incident.report_json):
                if report and Path(report).is_file():
                    shutil.copy2(report, artifact_dir / "reports" / Path(report).name)
        if job.step_summary is not None:
            with job.step_summary.open("a", encoding="utf-8") as out:
                out.write(body.replace("<!-- patchit:summary -->\n", "") + "\n")
    except OSError as exc:
        raise PatchitError(f"cannot write the summary ({exc}); check {artifact_dir} and "
                           "GITHUB_STEP_SUMMARY") from exc  # fmt: skip
    return path
