"""The one redactor: each secret form masked, ordinary text kept, linear time, safe text out."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from patchit.text.redaction import (
    CUT_MARKER,
    DEEP_MARKER,
    MASK,
    MAX_DEPTH,
    MAX_TEXT_CHARS,
    clean_text,
    environment_secrets,
    is_secret_name,
    redact,
    scrub,
)
from tests.fuzzing import fuzz_settings

M = MASK
# (text, the secret that must go, what must stay)
SECRETS = [
    ("export PASS=28 && psql", "28", "export PASS="),  # a digit password outside dbt's summary
    ("key id AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7EXAMPLE", "key id"),
    ("session ASIAY34FZKBOKMUTVV7A expired", "ASIAY34FZKBOKMUTVV7A", "session"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdef", ""),
    ("gho_abcdefghijklmnopqrstuvwxyz0123456789 in", "gho_abcdef", " in"),
    ("ghu_abcdefghijklmnopqrstuvwxyz0123456789", "ghu_abcdef", ""),
    ("ghs_abcdefghijklmnopqrstuvwxyz0123456789", "ghs_abcdef", ""),
    ("ghr_abcdefghijklmnopqrstuvwxyz0123456789", "ghr_abcdef", ""),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11", ""),
    ("slack xoxb-1234567890-0987654321-AbCdEfGhIjKl", "xoxb-1234", "slack"),
    ("xoxp-1234567890-abc", "1234567890", ""),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl end", "eyJzdWIi", "end"),
    ("ANTHROPIC is sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", "AbCdEfGh", "ANTHROPIC"),
    ("openai sk-proj-AbCdEfGhIjKlMnOpQrStUv", "AbCdEfGh", "openai"),
    ("google AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1", "google"),
    ("postgres://dana:s3cr3t@db.internal/shop", "s3cr3t", "postgres://dana:"),
    ("redis://:pw-123@cache:6379/0", "pw-123", "@cache:6379"),
    ("amqp://u:p@ss@host/vh", "p@ss", "@host/vh"),
    ("host=db password=pw-123 dbname=shop", "pw-123", "dbname=shop"),
    ("passwd=hunter22 next", "hunter22", "next"),
    ("pwd=hunter22;next", "hunter22", ";next"),
    ("client_secret=s3cr3t-value&x=1", "s3cr3t-value", "&x=1"),
    ("TOKEN=tok-123 run", "tok-123", "run"),
    ("api_key=abc123def", "abc123def", "api_key="),
    ("apikey=abc123def", "abc123def", "apikey="),
    ("AWS_ACCESS_KEY_ID=AKIDEXAMPLE12", "AKIDEXAMPLE12", "AWS_ACCESS_KEY_ID="),
    ("access_key=abc123def", "abc123def", "access_key="),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI", ""),
    ("PGPASSWORD=Pg-Secret-123 psql -h db", "Pg-Secret-123", "psql -h db"),
    ("export SNOWFLAKE_PASSWORD=Pa55word!", "Pa55word!", "export SNOWFLAKE_PASSWORD="),
    ("password: hunter2-prod", "hunter2-prod", "password: "),
    ("  db_password: 'hunter2-prod'  # prod", "hunter2", "# prod"),
    ('      token: "tok_live_abc123"', "tok_live_abc123", "token: "),
    ("- api_key: abcdef123456", "abcdef123456", "- api_key: "),
    ("login failed, password: hunter2 for dana", "hunter2", "for dana"),
    ('{"client_secret": "s3cr3t\\"x", "name": "orders"}', "s3cr3t", '"name": "orders"'),
    ("{'password': 'hunter2', 'user': 'dana'}", "hunter2", "'user': 'dana'"),
    ('{\\"password\\": \\"hunter2\\", \\"x\\": 1}', "hunter2", '\\"x\\": 1'),
    ("{password: Hunter22}", "Hunter22", "{password: "),
    ("Authorization: Bearer eyJhbGciOi.J9eyJzdWIi.Oi", "eyJhbG", "Authorization: Bearer "),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNz' x", "dXNlcjpwYXNz", "' x"),
    ("curl -H 'authorization: tok123456' x", "tok123456", "' x"),
    ("bearer abcdefghijklmnop0123", "abcdefghijklmnop0123", "bearer "),
    ('curl -H "X-Api-Key: apikey-secret-456" https://api', "apikey-secret-456", "https://api"),
    ("X-Auth-Token: abc.def.123", "abc.def.123", "X-Auth-Token: "),
    ("--password hunter2 --host db", "hunter2", "--host db"),
    ('--api-key "k 123" run', "k 123", "run"),
    ("DBT_ENV_SECRET_GIT_TOKEN=abc123xyz", "abc123xyz", "DBT_ENV_SECRET_GIT_TOKEN="),
    ("DBT_ENV_SECRET_ANYTHING: abc123xyz", "abc123xyz", "DBT_ENV_SECRET_ANYTHING"),
    ("auth: basic-creds-value", "basic-creds-value", "auth: "),
    ("credentials: /etc/gcp/key.json", "key.json", "credentials: "),
    ("https://x.test/s3?X-Amz-Signature=abcdef123&X-Amz-Credential=AKID/2020", "abcdef123", ""),
]  # fmt: skip

PEM_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nxyz==\n-----END RSA PRIVATE KEY-----"
GCP_KEY_JSON = (
    '{"type": "service_account", "private_key_id": "0123abcd4567ef89",\n'
    ' "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n'
    '-----END PRIVATE KEY-----\\n", "client_email": "etl@shop.iam.gserviceaccount.com"}'
)


@pytest.mark.parametrize(("text", "leaked", "kept"), SECRETS)
def test_each_secret_form_is_masked(text: str, leaked: str, kept: str) -> None:
    out = redact(text)
    assert leaked not in out, out
    assert MASK in out and kept in out, out


def test_private_keys_are_masked_whole() -> None:
    assert redact(f"key:\n{PEM_KEY}\nok") == f"key:\n{MASK}\nok"
    out = redact(GCP_KEY_JSON)
    assert "MIIEvQ" not in out and "0123abcd4567ef89" not in out
    assert "etl@shop.iam.gserviceaccount.com" in out
    # a block cut short (a truncated log) is masked to the end of its body
    cut = redact("before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r\nAAAA=\n")
    assert "b3BlbnNzaC1r" not in cut and cut.startswith("before\n")


UNTOUCHED = [
    "select token_count, password_reset_at, author, auth_method\n"
    "from {{ ref('users') }} where status <> 'returned' and a = b",
    "{{ config(materialized='table') }}\nselect sum(amount) as revenue from orders",
    "password: \"{{ env_var('DBT_PASSWORD') }}\"",
    "password:\n  nested: value-of-other-key",
    "author: Dana Engineer",
    'Binder Error: Referenced column "nme" not found in FROM clause! Candidate bindings: "name"',
    "https://duckdb.org/docs/current/connect/concurrency",
    "http://localhost:8080/dags/orders/runs/x?try_number=2",
    "ref('stg_orders') skipping sk-short",
    "def connect(host: str, token: str, api_key: Optional[str] = None) -> Session:",
    "expected token 'end of statement block', got 'x'",
    "KeyError: 'password'",
    "mysql --password --host db",
    "the task ran for 3 minutes",
    '  File "/srv/dags/load.py", line 12, in load\n    total += float(row["amout"])',
    # dbt's run summary counts passes; `PASS=28` is not a password
    "18:11:27  Done. PASS=28 WARN=0 ERROR=1 SKIP=2 NO-OP=0 TOTAL=31",
    "PASS=7 WARN=1 ERROR=0 SKIP=0 TOTAL=8",
]


@pytest.mark.parametrize("text", UNTOUCHED)
def test_ordinary_text_is_not_mangled(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("text", [t for t, _, _ in SECRETS] + [PEM_KEY, GCP_KEY_JSON])
def test_redacting_twice_changes_nothing_more(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


def test_literal_secrets_are_masked_longest_first() -> None:
    out = redact(
        "connect with hunter22 or hunter22-old, not hun", ["hunter22", "hunter22-old", "hu"]
    )
    assert out == f"connect with {MASK} or {MASK}, not hun"


# -- linear time ------------------------------------------------------------------------------

# Repeated pieces of each form: a backtracking pattern goes quadratic on some of them (the URL
# pattern took 5 s on 20,000 characters, a 50 KB message 40 s). 200,000 characters each here.
PUMPS = [
    "a", " ", ":", "a:", "://", "a://", "a://b:", "://b:c", "@", "=", "password", "password=",
    "password:", "password: ", "password=\"", "'password': '", '\\"password\\": \\"', "x" * 63,
    "X-Api-Key: ", "Authorization: ", "bearer ", "--password ", "  - token: '", "token:",
    "-----BEGIN PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----\nMIIE\n", "eyJ", "eyJabcde.",
    "sk-", "ghp_", "AKIA", "xoxb-", "DBT_ENV_SECRET_", "\\", "\"", "'", "#", " #", "\t",
    "db_password: a  ", "a.b-c_d", "a.", "PGPASSWORD", "\n", "password\n", "a" * 70 + "password=",
]  # fmt: skip
PUMP_CHARS = 200_000


@pytest.mark.parametrize("piece", PUMPS)
def test_redaction_runs_in_linear_time(piece: str) -> None:
    text = piece * (PUMP_CHARS // len(piece))
    started = time.perf_counter()
    redact(text, max_chars=PUMP_CHARS)
    elapsed = time.perf_counter() - started
    # a quadratic pattern takes minutes here; linear ones take milliseconds
    assert elapsed < 2.0, f"{piece!r} * {len(text) // len(piece)}: {elapsed:.1f} s"


def test_a_huge_text_is_cut_with_a_marker_and_stays_fast() -> None:
    huge = "password=hunter2 " + "x" * 5_000_000 + " tail"
    started = time.perf_counter()
    out = redact(huge)
    assert time.perf_counter() - started < 2.0
    assert len(out) <= MAX_TEXT_CHARS
    assert "hunter2" not in out and out.endswith(" tail")
    assert CUT_MARKER.split("{")[0] in out


# -- safe text out ----------------------------------------------------------------------------


def test_lone_surrogates_become_escapes() -> None:
    assert clean_text(os.fsdecode(b"caf\xe9.csv")) == "caf\\xe9.csv"
    assert clean_text("a\ud800b") == "a\\ud800b"
    assert clean_text("plain café") == "plain café"
    redact(os.fsdecode(b"password=\xff\xfe") + "\ud800").encode("utf-8")


@pytest.mark.fuzz
@given(st.text(max_size=300))
@fuzz_settings(examples=200)
def test_any_text_comes_out_encodable_and_stable(text: str) -> None:
    out = redact(text)
    out.encode("utf-8")
    assert redact(out) == out


@pytest.mark.fuzz
@given(
    st.text(max_size=80),
    st.sampled_from([t for t, _, _ in SECRETS]),
    st.text(max_size=80),
)
@fuzz_settings(examples=200)
def test_a_secret_inside_any_text_is_masked(before: str, secret: str, after: str) -> None:
    leaked = next(lk for t, lk, _ in SECRETS if t == secret)
    out = redact(f"{before}\n{secret}\n{after}")
    assert leaked not in out or leaked in before + after


# -- structures -------------------------------------------------------------------------------


def test_scrub_redacts_strings_keys_and_secret_named_values() -> None:
    data = {
        "error_message": "password=hunter2",
        "context": {
            "extra": {"db_password": "plain-value", "port": 5432, "api_token": 1234, "ok": True},
            "rows": [("x", "ghp_abcdefghijklmnopqrstuvwxyz0123456789")],
            os.fsdecode(b"k\xe9y"): "v",
        },
        "n": 3,
    }
    out = scrub(data, ["plain-secret"])
    assert out["error_message"] == f"password={MASK}"
    extra = out["context"]["extra"]
    assert extra == {"db_password": MASK, "port": 5432, "api_token": MASK, "ok": True}
    assert out["context"]["rows"] == [("x", MASK)]
    assert out["context"]["k\\xe9y"] == "v" and out["n"] == 3
    assert data["error_message"] == "password=hunter2"  # the input is not changed


def test_scrub_caps_depth_and_items() -> None:
    deep: object = "bottom"
    for _ in range(200):
        deep = {"d": deep}
    out = scrub({"x": deep, "wide": list(range(20_000))})
    node = out["x"]
    for _ in range(MAX_DEPTH - 1):
        node = node["d"]
    assert node == DEEP_MARKER.format(n=MAX_DEPTH)
    assert len(out["wide"]) == 10_001 and "left out" in out["wide"][-1]


def test_secret_names() -> None:
    for name in ("password", "db_password", "PGPASSWORD", "api_key", "X-Api-Key", "auth",
                 "MYSQL_PWD", "client_secret", "private_key_id", "refresh_token"):  # fmt: skip
        assert is_secret_name(name), name
    for name in ("token_count", "password_reset_at", "author", "oauth_url", "max_tokens",
                 "signature", "tokens_in", "keys"):  # fmt: skip
        assert not is_secret_name(name), name


def test_environment_secrets_take_secret_named_values_and_airflow_connections() -> None:
    env = {
        "SNOWFLAKE_PASSWORD": "very-long-pw-value",
        "SHOP_API_TOKEN": "tok-1234567890",
        "AIRFLOW_CONN_WAREHOUSE": "postgres://u:p@db/x",
        "SHOP_REGION": "eu-west-1-region",
        "SHORT_TOKEN": "abc",
        "PATCHIT_WEBHOOK_URL": "https://hooks.example.test/services/T0/B0/xyz",
    }
    found = environment_secrets(environ=env)
    assert set(found) == {"very-long-pw-value", "tok-1234567890", "postgres://u:p@db/x",
                          "https://hooks.example.test/services/T0/B0/xyz"}  # fmt: skip
