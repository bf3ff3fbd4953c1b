"""Secret redaction: everything evidence holds passes through here before it is stored or sent.

Patterns err on the side of masking values (a masked non-secret costs little; a leaked key
costs a lot), but they only touch the *value* after a secret-like key, so SQL and identifiers
such as `token_count` or `password_reset_at` columns stay readable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

import yaml

from patchit.evidence.model import Evidence

MASK = "***REDACTED***"

# Key names whose values are secrets; matched as a whole word or a suffix (`db_password`).
_SECRET_KEY = (
    r"(?:[A-Za-z0-9_.-]*[_.-])?"
    r"(?:password|passwd|pwd|secret|client_secret|token|access_token|refresh_token|api[_-]?key"
    r"|access[_-]?key(?:[_-]?id)?|secret[_-]?access[_-]?key|private[_-]?key|auth|credentials?)"
)

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # PEM private key blocks, whole.
    (
        re.compile(
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL
        ),
        MASK,
    ),
    # Authorization headers: keep the scheme, mask the credential.
    (
        re.compile(r"(?i)(authorization\s*[:=]\s*[\"']?(?:bearer|basic|token)\s+)[^\s\"',]+"),
        rf"\1{MASK}",
    ),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{12,}"), rf"\1{MASK}"),
    # Passwords inside URLs: scheme://user:pass@host.
    (re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)[^@\s/]+(@)"), rf"\1{MASK}\2"),
    # Well-known key formats.
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bsk-(?:ant-)?[A-Za-z0-9_-]{16,}"), MASK),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}\b"), MASK),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"), MASK),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b"), MASK),
    # dbt's own convention: env vars named DBT_ENV_SECRET_* hold secrets.
    (re.compile(r"(\bDBT_ENV_SECRET_\w+[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"), rf"\1{MASK}"),
    # JSON: "password": "value"
    (
        re.compile(rf"(?i)(\"{_SECRET_KEY}\"\s*:\s*\")(?:[^\"\\]|\\.)*(\")"),
        rf"\1{MASK}\2",
    ),
    # YAML / env / ini lines: `password: value`, `export API_KEY=value`, `- token: "value"`.
    # Templates ({{ env_var(...) }}) are kept: they name a variable, not its value.
    (
        re.compile(
            rf"(?im)^([ \t]*(?:-[ \t]+)?(?:export[ \t]+)?[\"']?{_SECRET_KEY}[\"']?[ \t]*[:=][ \t]*)"
            r"(?![\"']?\{\{)(?!\*\*\*)"
            r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'#][^\n]*?)([ \t]+#.*)?[ \t]*$"
        ),
        rf"\1{MASK}\2",
    ),
    # Inline key=value pairs (connection strings, CLI args): password=value;
    (
        re.compile(rf"(?i)(\b{_SECRET_KEY}=)(?!\*\*\*)[^\s;&,\"')]+"),
        rf"\1{MASK}",
    ),
]


def redact(text: str, extra_secrets: Iterable[str] = ()) -> str:
    """Mask secrets in `text`; literal `extra_secrets` (e.g. profile passwords) are masked first."""
    if not text:
        return text
    # Longest first, so a secret that contains another is masked whole.
    for secret in sorted({s for s in extra_secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_PROFILE_SECRET_KEY = re.compile(rf"(?i)^{_SECRET_KEY}$")


def profile_secrets(profiles_yml_text: str) -> list[str]:
    """Literal secret values in a profiles.yml (password, token, keys, ...), to mask anywhere.

    `{{ env_var(...) }}` templates are not secrets themselves and are skipped. Unparseable YAML
    yields no values; the regex patterns still apply to its text.
    """
    try:
        data = yaml.safe_load(profiles_yml_text)
    except yaml.YAMLError:
        return []
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str) and _PROFILE_SECRET_KEY.match(key):
                    if isinstance(value, str | int) and not isinstance(value, bool):
                        text = str(value)
                        if "{{" not in text and text.strip():
                            found.append(text)
                    elif isinstance(value, dict | list):
                        walk(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(data)
    return found


_ENV_SECRET_NAME = re.compile(r"(?i)(password|passwd|secret|token|api_?key|private_?key)")


def environment_secrets(min_chars: int = 8) -> list[str]:
    """Values of this process's environment variables whose names say they are secrets."""
    return [
        value
        for name, value in os.environ.items()
        if _ENV_SECRET_NAME.search(name) and len(value) >= min_chars
    ]


def _redact_value(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [_redact_value(v, secrets) for v in value]
    if isinstance(value, tuple):
        return tuple(_redact_value(v, secrets) for v in value)
    if isinstance(value, dict):
        return {k: _redact_value(v, secrets) for k, v in value.items()}
    return value


def redact_model(evidence: Evidence, extra_secrets: Iterable[str] = ()) -> Evidence:
    """A copy of `evidence` with every text field (the event's included) redacted."""
    secrets = tuple(extra_secrets)
    data = evidence.model_dump(mode="python")
    return Evidence.model_validate(_redact_value(data, secrets))
