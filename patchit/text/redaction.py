"""The one redactor: every text patchit takes in passes through here before anything is written.

Exception messages, rendered template fields, log lines, dbt arguments and environment values
reach the spool, the memory, the reports and the model only after `redact` (one text) or
`scrub` (a JSON-like structure). Patterns err on the side of masking values (a masked
non-secret costs little; a leaked key costs a lot), but they only touch the *value* after a
secret-like name, so SQL and identifiers such as `token_count` or `password_reset_at` columns
stay readable. What it masks:

- private keys (PEM blocks, a GCP service account's `private_key`);
- well-known key formats: AWS (`AKIA...`, `ASIA...`), GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`,
  `ghr_`, `github_pat_`), Slack (`xox?-`), Anthropic and OpenAI (`sk-ant-`, `sk-`), Google
  (`AIza...`, `ya29.`), JWTs;
- passwords in URLs (`scheme://user:password@host`);
- `Authorization:` headers and bearer tokens;
- the value after a secret-like name (password, passwd, pwd, secret, token, api_key, apikey,
  access_key, private_key, credentials, auth, ... also as a suffix: `PGPASSWORD`,
  `db_password`, `X-Api-Key`) in `KEY=value`, `key: value`, `"key": "value"`, `--key value`
  and `Header: value` forms;
- literal values the caller knows are secret (profile passwords, secret-named environment
  variables, configured tokens), and their encoded copies: base64 (standard and URL-safe,
  padded or not, alone or inside a longer stream), hex and reversed (`patchit.text.secret_forms`);
  the secret and its base64 also split across string literals or lines (base64 wrapped at 76
  columns). A `Redactor` computes those forms once for its secrets; `redact` and `scrub` keep
  the last sets they were given, so a caller passing `environment_secrets()` each time pays
  once.

It runs in linear time: every pattern starts at a literal or at the start of a name and its
repetitions are possessive or bounded, and a text longer than `MAX_TEXT_CHARS` keeps its head
and tail around a marker. Lone surrogates (undecodable bytes from `os.fsdecode`, a JSON
`"\\ud800"`) become backslash escapes, so whatever is written encodes as UTF-8.

Standard library only: the Airflow callback imports it inside the task process.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from patchit.text.secret_forms import SplitIndex, mask_split, secret_forms, split_index

MASK = "***REDACTED***"
MAX_TEXT_CHARS = 200_000
MAX_DEPTH = 32
MAX_ITEMS = 10_000
MAX_KEY_CHARS = 1_000
CUT_MARKER = "\n[... patchit cut {n} characters ...]\n"
DEEP_MARKER = "[patchit: nested deeper than {n} levels, left out]"

# -- text safety ------------------------------------------------------------------------------


def clean_text(text: str) -> str:
    """`text` made encodable as UTF-8: lone surrogates become backslash escapes.

    Surrogates that stand for undecodable bytes (`os.fsdecode(b"caf\\xe9")`) become those
    bytes' escapes (`caf\\xe9`); any other lone surrogate its code point's (`\\ud800`).
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def cap_text(text: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """`text`, or its head and tail around a marker saying how much was cut."""
    if len(text) <= max_chars:
        return text
    keep = max(0, max_chars - len(CUT_MARKER) - 12)
    head, tail = keep // 2, keep - keep // 2
    marker = CUT_MARKER.format(n=len(text) - head - tail)
    return text[:head] + marker + (text[-tail:] if tail else "")


# -- patterns ---------------------------------------------------------------------------------

# Names whose value is a secret. The long ones count as the end of any name (`PGPASSWORD`,
# `db_password`, `X-Api-Key`); the short ones only as a whole name or after a separator
# (`MYSQL_PWD`, `x-auth`, not `oauth` or `bypass`).
_LONG_NAMES = (
    r"pass(?:word|wd|phrase)|secret|token|api[_-]?key|access[_-]?key(?:[_-]?id)?"
    r"|private[_-]?key(?:[_-]?id)?|credentials?"
)
_SHORT_NAMES = r"pass|pwd|auth|signature|cookie|session[_-]?(?:id|key)"
_NAME = rf"(?:[\w.-]{{0,64}}?(?:{_LONG_NAMES})|(?:[\w.-]{{0,64}}?[_.-])?(?:{_SHORT_NAMES}))"
# a dict key naming a secret (structure: {"db_password": "..."}); `signature` and `cookie`
# are left out here: report fields and such are called that
_SECRET_KEY = re.compile(
    rf"(?i)(?:[\w. -]{{0,64}}?(?:{_LONG_NAMES})|(?:[\w. -]{{0,64}}?[_. -])?(?:pass|pwd|auth))"
)
# cheap pre-checks: a text holding none of these words cannot match a name pattern
_NAME_HINTS = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "signature",
               "cookie", "session")  # fmt: skip

_UNQUOTED = r"[^\s;&,\"'`()<>{}\[\]|\\]++"

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s\\:,-]*+")

_AUTH_HEADER = re.compile(
    r"(?i)(?<![\w-])((?:proxy-)?authorization[\"']?[ \t]*+[:=][ \t]*+[\"']?"
    r"(?:(?:bearer|basic|token|digest|negotiate)[ \t]++)?+)(?!\*\*\*)[^\s\"',]++"
)
_BEARER = re.compile(r"(?i)\b(bearer[ \t]++)(?!\*\*\*)[A-Za-z0-9._~+/=-]{12,}+")
# scheme://user:password@host: the password runs to the last @ of the authority
_URL_PASSWORD = re.compile(
    r"(?<=[A-Za-z0-9+.-])(://[^/\s:@\"'<>]{0,256}+:)(?!\*\*\*)[^\s/\"'<>]{1,256}(?=@)"
)
_KNOWN_FORMATS = re.compile(
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"
    r"|\bsk-(?:ant-)?[A-Za-z0-9_-]{16,}+"
    r"|\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}+"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}+"
    r"|\bxox[abeprs]-[A-Za-z0-9-]{10,}+"
    r"|\bxapp-[A-Za-z0-9-]{10,}+"
    r"|\bAIza[0-9A-Za-z_-]{35}"
    r"|\bya29\.[0-9A-Za-z_-]{20,}+"
    r"|\beyJ[A-Za-z0-9_-]{5,}+\.eyJ[A-Za-z0-9_-]{5,}+\.[A-Za-z0-9_-]*+"
)
_FORMAT_HINTS = ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA", "sk-", "ghp_",
                 "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "xapp-", "AIza", "ya29.",
                 "eyJ")  # fmt: skip
# dbt's own convention: variables named DBT_ENV_SECRET_* hold secrets
_DBT_ENV_SECRET = re.compile(
    r"(\bDBT_ENV_SECRET_\w++[\"']?[ \t]*+[:=][ \t]*+[\"']?)(?!\*\*\*)[^\s\"',}]++"
)
# YAML / env / ini / header lines: `password: value`, `export API_KEY=value`, `- token: "v"`;
# the value runs to the end of the line (a trailing ` # comment` stays)
_LINE = re.compile(
    rf"(?im)^([ \t]*+(?:-[ \t]++)?(?:export[ \t]++)?(?P<q>[\"']?){_NAME}(?P=q)"
    r"(?P<sep>[ \t]*+[:=][ \t]*+))(?P<value>[^\r\n]++)"
)
_COMMENT = re.compile(r"(?<![ \t])[ \t]++#")
_SHELL_WORD_END = re.compile(r"[\s;&|]")
# `--password value`, `--api-key "value"`
_FLAG = re.compile(
    r"(?i)(?<![\w-])(--?[\w-]{0,40}?(?:password|passwd|token|secret|api[_-]?key)[ \t]++)"
    rf"(?![-*])(?:\"[^\"\n]*+\"|'[^'\n]*+'|{_UNQUOTED})"
)
# inline `name=value`, `name: value`, `"name": "value"`, `'name': 'value'`, `\"name\": \"v\"`
_INLINE = re.compile(
    rf"(?i)(?<![\w.-])(?P<name>{_NAME})(?P<close>\\?[\"'])?(?P<sep>=|[ \t]*+:[ \t]*+)"
    r"(?P<value>\\\"[^\"\n]*+\"|\"(?:[^\"\\\n]++|\\.)*+\"|'(?:[^'\\\n]++|\\.)*+'"
    rf"|{_UNQUOTED})"
)
# `token: str`, `api_key: Optional[str]`: a type after `name:` is code, not a secret
_TYPE_WORD = re.compile(
    r"(?:str|bytes|int|float|bool|dict|list|tuple|set|object|None"
    r"|[A-Z][A-Za-z_.]{0,23})"
)


def _mask_pem(text: str) -> str:
    if "-----BEGIN" not in text:
        return text
    out: list[str] = []
    pos = 0
    ends_left = True  # once no END follows, none follows any later BEGIN: search once
    while (begin := _PEM_BEGIN.search(text, pos)) is not None:
        end = _PEM_END.search(text, begin.end()) if ends_left else None
        if end is None:
            ends_left = False
            body = _PEM_BODY.match(text, begin.end())
            stop = body.end() if body else begin.end()
        else:
            stop = end.end()
        out += [text[pos : begin.start()], MASK]
        pos = stop
    out.append(text[pos:])
    return "".join(out)


# dbt's run summary, `Done. PASS=28 WARN=0 ERROR=1 SKIP=0 ...`: a count, not a password
_DBT_SUMMARY = re.compile(r"PASS=\d++ WARN=\d")


def _dbt_count(text: str, at: int) -> bool:
    return _DBT_SUMMARY.match(text, at) is not None


def _mask_line(match: re.Match[str]) -> str:
    value = match["value"]
    if value.lstrip("\"'").startswith(("***", "{{")) or _dbt_count(match.group(0).lstrip(), 0):
        return match.group(0)
    if value[0] in "\"'":
        close = value.find(value[0], 1)
        rest = value[close + 1 :] if close != -1 else ""
    elif match["sep"] == "=":  # shell: `PGPASSWORD=x psql ...` masks the word, not the command
        end = _SHELL_WORD_END.search(value)
        rest = value[end.start() :] if end else ""
    else:
        comment = _COMMENT.search(value)
        rest = value[comment.start() :] if comment else ""
    return match.group(1) + MASK + rest


def _mask_quoted(value: str) -> str:
    """A quoted value with its quotes (and escapes around them) kept."""
    opening = 2 if value.startswith("\\") else 1
    closing = 2 if value[-2:-1] == "\\" and len(value) > opening + 1 else 1
    return value[:opening] + MASK + value[len(value) - closing :]


def _mask_inline(match: re.Match[str]) -> str:
    value = match["value"]
    inner = value.lstrip("\\\"'")
    if inner.startswith(("***", "{{")) or not inner.strip("\\\"'"):
        return match.group(0)
    if _dbt_count(match.string, match.start("name")):
        return match.group(0)
    head = match.group(0)[: match.start("value") - match.start()]
    if value[0] in "\"'\\":
        return head + _mask_quoted(value)
    if ":" in match["sep"] and match["close"] is None and _TYPE_WORD.fullmatch(value):
        return match.group(0)  # `def f(token: str)`
    return head + MASK


def _mask_flag(match: re.Match[str]) -> str:
    value = match.group(0)[len(match.group(1)) :]
    if value[0] in "\"'":
        return match.group(1) + _mask_quoted(value)
    return match.group(1) + MASK


# the hints as one search each (an event's 20-odd short fields, a storm's 10,000 events)
_NAME_HINT = re.compile("|".join(map(re.escape, _NAME_HINTS)))
_FORMAT_HINT = re.compile("|".join(map(re.escape, _FORMAT_HINTS)))


def _has_name_hint(lowered: str) -> bool:
    return _NAME_HINT.search(lowered) is not None


def _literal_secrets(extra_secrets: Iterable[str]) -> tuple[str, ...]:
    """Each named secret once (at least 4 characters), sorted: the key of its forms' cache."""
    found = {clean_text(s) for s in extra_secrets if isinstance(s, str) and len(s) >= 4}
    return tuple(sorted(found))


@functools.lru_cache(maxsize=32)
def _literal_forms(secrets: tuple[str, ...]) -> tuple[str, ...]:
    """The secrets and their encoded forms, longest first, so a secret (or form) that
    contains another is masked whole."""
    found = set(secrets)
    for secret in secrets:
        found.update(secret_forms(secret))
    return tuple(sorted(found, key=lambda form: (-len(form), form)))


@functools.lru_cache(maxsize=32)
def _split_forms(secrets: tuple[str, ...]) -> SplitIndex:
    return split_index(secrets)


def _mask_literals(text: str, literals: tuple[str, ...], splits: SplitIndex) -> str:
    for literal in literals:
        if literal in text:
            text = text.replace(literal, MASK)
    return mask_split(text, splits, MASK) if splits else text


def _redact(
    text: str,
    literals: tuple[str, ...],
    max_chars: int,
    splits: SplitIndex = (),
) -> str:
    text = _mask_literals(clean_text(cap_text(text, max_chars)), literals, splits)
    text = _mask_pem(text)
    lowered = text.lower()
    if "authorization" in lowered:
        text = _AUTH_HEADER.sub(rf"\1{MASK}", text)
    if "bearer" in lowered:
        text = _BEARER.sub(rf"\1{MASK}", text)
    if "://" in text:
        text = _URL_PASSWORD.sub(rf"\1{MASK}", text)
    if _FORMAT_HINT.search(text):
        text = _KNOWN_FORMATS.sub(MASK, text)
    if "DBT_ENV_SECRET_" in text:
        text = _DBT_ENV_SECRET.sub(rf"\1{MASK}", text)
    if _has_name_hint(lowered):
        text = _LINE.sub(_mask_line, text)
        text = _FLAG.sub(_mask_flag, text)
        text = _INLINE.sub(_mask_inline, text)
    return text


# A storm's 10,000 events repeat the same short texts (its message, dag and task ids, host
# names, field values): each is redacted once per process. Only short texts, so the cache
# stays small (its keys hold the texts as given, as the events being redacted do).
_CACHED_CHARS = 512


@functools.lru_cache(maxsize=8192)
def _redact_short(text: str, named: tuple[str, ...], max_chars: int) -> str:
    return _redact(text, _literal_forms(named), max_chars, _split_forms(named))


class Redactor:
    """The one redactor for a set of named secrets (profile passwords, secret-named
    environment values, configured tokens): their encoded forms are computed once, here,
    and every text or structure it is given is masked with them and with the patterns."""

    def __init__(self, secrets: Iterable[str] = (), max_chars: int = MAX_TEXT_CHARS) -> None:
        self.named = _literal_secrets(secrets)
        self.literals = _literal_forms(self.named)
        self.splits = _split_forms(self.named)
        self.max_chars = max_chars

    def redact(self, text: str) -> str:
        """`text` with every secret masked (see the module docstring); capped, UTF-8 safe."""
        if not text:
            return text
        if len(text) <= _CACHED_CHARS:
            return _redact_short(text, self.named, self.max_chars)
        return _redact(text, self.literals, self.max_chars, self.splits)

    def mask_named(self, text: str) -> str:
        """`text` with only the named secrets and their forms masked, for code (a diff) that
        the patterns would garble: `api_key = os.environ[...]` is code, not a secret."""
        return _mask_literals(text, self.literals, self.splits)

    def redact_leaves(self, value: Any) -> Any:
        """A JSON-like structure of patchit's own (a model's dump) with every string in it
        redacted, its keys and shape kept: its field names and unit ids are not secrets, and
        masking a value by its key's name would change what it says (`user_auth: pass`)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            return {key: self.redact_leaves(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_leaves(item) for item in value]
        return value

    def scrub(self, value: Any) -> Any:
        """A JSON-like structure redacted whole (see `scrub`)."""
        return _scrub(value, self.redact, 0)


def redact(text: str, extra_secrets: Iterable[str] = (), max_chars: int = MAX_TEXT_CHARS) -> str:
    """Mask secrets in `text`; literal `extra_secrets` (e.g. profile passwords) and their
    encoded forms are masked first. Longer texts keep `max_chars` (head and tail); lone
    surrogates are escaped."""
    if not text:
        return text
    named = _literal_secrets(extra_secrets)
    return _redact(text, _literal_forms(named), max_chars, _split_forms(named))


def is_secret_name(name: str) -> bool:
    """Whether a key or variable name says its value is a secret (`db_password`, `API_KEY`)."""
    return len(name) <= 200 and _SECRET_KEY.fullmatch(name) is not None


def _safe_key(key: str) -> tuple[str, bool]:
    """A key made safe, and whether it names a secret."""
    safe = clean_text(cap_text(key, MAX_KEY_CHARS))
    return safe, is_secret_name(safe)


_safe_short_key = functools.lru_cache(maxsize=4096)(_safe_key)  # an event's keys, every event


def scrub(value: Any, extra_secrets: Iterable[str] = (), max_chars: int = MAX_TEXT_CHARS) -> Any:
    """A JSON-like structure with every string redacted, every key made safe, the values of
    secret-named keys masked whole, and sizes capped (depth, items, characters).

    Dicts, lists and tuples are copied; other values are returned as they are.
    """
    return Redactor(extra_secrets, max_chars).scrub(value)


def _is_value(item: Any) -> bool:
    """A scalar that can be a secret: a non-empty string or a number (not a flag)."""
    return (isinstance(item, str) and bool(item)) or (
        isinstance(item, int) and not isinstance(item, bool)
    )


_SCALARS = frozenset({int, float, bool, type(None)})  # kept as they are, told by type alone


def _scrub(value: Any, text: Callable[[str], str], depth: int) -> Any:
    if type(value) in _SCALARS:  # before the ABC checks below, which cost more than the rest
        return value
    if isinstance(value, str):
        return text(value) if value else value
    if isinstance(value, Mapping | list | tuple) and depth >= MAX_DEPTH:
        return DEEP_MARKER.format(n=MAX_DEPTH)
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for number, (key, item) in enumerate(value.items()):
            if number >= MAX_ITEMS:
                out["patchit_items_left_out"] = len(value) - MAX_ITEMS
                break
            if isinstance(key, str):
                key, secret = (_safe_short_key if len(key) <= 200 else _safe_key)(key)
                if secret and _is_value(item):
                    item = MASK
            out[key] = _scrub(item, text, depth + 1)
        return out
    if isinstance(value, list | tuple):
        items = [_scrub(item, text, depth + 1) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            items.append(f"[patchit: {len(value) - MAX_ITEMS} more items left out]")
        return items if isinstance(value, list) else tuple(items)
    return value


# -- the environment --------------------------------------------------------------------------

# configured tokens count: a webhook URL is its own credential (`PATCHIT_WEBHOOK_URL`); a
# URL's password is masked by the URL pattern
_ENV_SECRET_NAME = re.compile(
    r"(?i)(password|passwd|secret|token|api_?key|private_?key|access_?key|credential|webhook)"
)


def environment_secrets(min_chars: int = 8, environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of this process's environment variables whose names say they are secrets
    (configured tokens and URLs that carry one included), and Airflow connection URIs
    (`AIRFLOW_CONN_*`), which carry credentials whole."""
    env = os.environ if environ is None else environ
    return [
        value
        for name, value in env.items()
        if len(value) >= min_chars
        and (_ENV_SECRET_NAME.search(name) or name.startswith("AIRFLOW_CONN_"))
    ]
