"""`classify_failure`: evidence -> Verdict, by the first matching signature (no LLM here)."""

from __future__ import annotations

import re

from patchit.classify.airflow_signatures import AIRFLOW_SIGNATURES, airflow_changed_code
from patchit.classify.model import FailureClass, Verdict
from patchit.classify.signatures import SIGNATURES, Signature, changed_data_files, near_macros
from patchit.classify.signatures import changed_code as dbt_changed_code
from patchit.events.model import FailureSource
from patchit.evidence.model import Evidence
from patchit.evidence.runtime import runtime_pins

_EXCERPT_CHARS = 160
_PROFILES_HINT = "pass --profiles-dir or set DBT_PROFILES_DIR"


def _excerpt(text: str, match: re.Match[str]) -> str:
    """The line holding the match, trimmed, so the reason cites what dbt actually said."""
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.start())
    line = text[start : end if end != -1 else len(text)].strip()
    if not line:
        line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.replace("`", "'")
    return line if len(line) <= _EXCERPT_CHARS else line[: _EXCERPT_CHARS - 3] + "..."


def _is_airflow(evidence: Evidence) -> bool:
    return evidence.event.source is FailureSource.AIRFLOW


def changed_code(evidence: Evidence) -> list[str]:
    """Changed code files that matter to this failure (per source)."""
    return airflow_changed_code(evidence) if _is_airflow(evidence) else dbt_changed_code(evidence)


def _subject(evidence: Evidence) -> str:
    return evidence.unit_name or evidence.event.unit_id


def _base(evidence: Evidence) -> str:
    """The commit the change is measured from, as a short id (the last good commit, else the
    failing commit's parent); `<failing>~1` only when git could not say."""
    known = evidence.change_base or evidence.last_good_commit
    return known[:12] if known else f"{(evidence.event.commit or 'HEAD')[:12]}~1"


def _first_commit(evidence: Evidence) -> bool:
    """Whether the failing commit is the repository's first (git answered, and no commit
    comes before it): nothing to measure a change from."""
    return (
        evidence.change_base is None
        and evidence.last_good_commit is None
        and bool(evidence.changed_files)
        and bool(evidence.event.commit)
    )


def _change_phrase(evidence: Evidence, changed: list[str]) -> str:
    base = _base(evidence)
    if changed and _first_commit(evidence):
        first = (evidence.event.commit or "")[:12]
        return f"{', '.join(changed)} came with {first}, the repository's first commit"
    if changed:
        return f"{', '.join(changed)} changed since {base}"
    path = evidence.tested_model_path or evidence.unit_path or f"the code of {_subject(evidence)}"
    if not evidence.changed_files and any("changed files" in n for n in evidence.notes):
        return f"it is unknown whether {path} changed (no git history)"
    return f"{path} did not change since {base}"


def _fields(evidence: Evidence, text: str, match: re.Match[str]) -> dict[str, str]:
    changed = changed_code(evidence)
    group = next((g for g in match.groups() if g), "") if match.groups() else ""
    select = evidence.tested_model if evidence.test_kind else evidence.unit_name
    dbt = evidence.event.dbt
    return {
        "excerpt": _excerpt(text, match),
        "unit": _subject(evidence),
        "unit_path": evidence.unit_path or "the failing file",
        "name": group,
        "changed": _change_phrase(evidence, changed),
        "changed_paths": " ".join(changed) or (evidence.unit_path or ""),
        "select": select or _subject(evidence),
        "project_dir": evidence.project_dir or ".",
        "last_good": _base(evidence),
        "failing": (evidence.event.commit or "HEAD")[:12],
        "profiles_yml": dbt.profiles_yml() if dbt else "~/.dbt/profiles.yml",
        # only when the user did not already point dbt at a profiles dir
        "profiles_hint": "" if dbt and dbt.profiles_dir else _PROFILES_HINT,
        "flags": dbt.user_flags(project=False) if dbt else "",
        "dag": evidence.event.pipeline_id,
        "data_files": " ".join(changed_data_files(evidence)),
        "type_changes": "; ".join(c.describe() for c in evidence.type_changes),
        "runtime_change": evidence.runtime_change,
        "built": evidence.built_in_run,
        "runtime_pins": runtime_pins(evidence.runtime_change),
        "yaml_at": f"; the YAML parser marks {evidence.yaml_error_at}"
        if evidence.yaml_error_at
        else "",
    }


def _verdict(sig: Signature, evidence: Evidence, text: str, match: re.Match[str]) -> Verdict:
    fields = _fields(evidence, text, match)
    reason = sig.reason.format(**fields)
    unchanged = not changed_code(evidence)
    if sig.cls is FailureClass.CODE_BUG and unchanged and "{changed}" in sig.reason:
        # The failing file is as before: an upstream rename or a new dependency likely broke it.
        reason = reason.rstrip(".") + ", so an upstream change may have triggered it, but the fix "
        reason += "belongs in this repo."
    actions = [text for a in sig.next_actions if (text := a.format(**fields))]
    if sig.name == "undefined_macro_near_name":
        actions.insert(0, f"did you mean: {', '.join(near_macros(evidence, fields['name']))}")
    return Verdict(cls=sig.cls, signature=sig.name, reason=reason, next_actions=actions)


def _texts(evidence: Evidence) -> list[str]:
    """Where to look, most specific first: the error itself, then traceback and log."""
    event = evidence.event
    primary = "\n".join(t for t in (evidence.error or event.error_message, event.error_type) if t)
    secondary = "\n".join(t for t in (event.traceback, event.log_excerpt) if t)
    return [t for t in (primary, secondary) if t.strip()]


def match_signature(evidence: Evidence, text: str) -> tuple[Signature, re.Match[str]] | None:
    for sig in AIRFLOW_SIGNATURES if _is_airflow(evidence) else SIGNATURES:
        if sig.statuses and evidence.event.status not in sig.statuses:
            continue
        match = sig.pattern.search(text)
        if match is None:
            continue
        if sig.when is None or sig.when(evidence, match):
            return sig, match
    return None


def classify_failure(evidence: Evidence) -> Verdict:
    """The class of the failure, from the first signature that matches the evidence."""
    texts = _texts(evidence)
    if evidence.event.status == "fail" and not texts:
        texts = ["test failed"]
    for text in texts:
        found = match_signature(evidence, text)
        if found is not None:
            return _verdict(found[0], evidence, text, found[1])
    first = texts[0].strip().splitlines()[0][:_EXCERPT_CHARS] if texts else "no error text"
    log = evidence.event.log_location
    return Verdict(
        cls=FailureClass.UNKNOWN,
        signature="none",
        reason=f"no known signature matches the error of {_subject(evidence)} ({first}).",
        next_actions=[
            f"read the full log: {log}" if log else "read the full dbt log (logs/dbt.log)",
            f"airflow tasks test {evidence.event.pipeline_id} {_subject(evidence)}"
            if _is_airflow(evidence)
            else f"dbt build --select {_subject(evidence)}",
        ],
    )
