"""Redaction masks each secret form and leaves SQL and identifiers alone."""

from __future__ import annotations

import pytest

from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.evidence.model import Evidence, Relation
from patchit.evidence.redact import (
    MASK,
    environment_secrets,
    profile_secrets,
    redact,
    redact_model,
)

M = MASK
CASES = [
    ("password: hunter2-prod", "password: " + MASK, "hunter2-prod"),
    ("  db_password: 'hunter2-prod'  # prod", f"  db_password: {M}  # prod", "hunter2"),
    ('      token: "tok_live_abc123"', "      token: " + MASK, "tok_live_abc123"),
    ("- api_key: abcdef123456", "- api_key: " + MASK, "abcdef123456"),
    ('{"client_secret": "s3cr3t\\"x", "name": "orders"}', None, "s3cr3t"),
    ("export SNOWFLAKE_PASSWORD=Pa55word!", "export SNOWFLAKE_PASSWORD=" + MASK, "Pa55word!"),
    ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", None, "wJalrXUtnFEMI"),
    ("key id AKIAIOSFODNN7EXAMPLE in use", "key id " + MASK + " in use", "AKIAIOSFODNN7EXAMPLE"),
    ("Authorization: Bearer eyJhbGciOi.J9eyJzdWIi.Oi", "Authorization: Bearer " + MASK, "eyJhbG"),
    ("ANTHROPIC_KEY is sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", None, "sk-ant-api03"),
    ("openai sk-proj-AbCdEfGhIjKlMnOpQrStUv", "openai " + MASK, "AbCdEfGh"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", MASK, "ghp_"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", MASK, "github_pat_"),
    ("postgres://dana:s3cr3t@db.internal/shop", f"postgres://dana:{M}@db.internal/shop", "s3cr3t"),
    ("host=db password=pw-123 dbname=shop", f"host=db password={M} dbname=shop", "pw-123"),
    ("DBT_ENV_SECRET_GIT_TOKEN=abc123xyz", "DBT_ENV_SECRET_GIT_TOKEN=" + MASK, "abc123xyz"),
    ("auth: basic-creds-value", "auth: " + MASK, "basic-creds-value"),
    ("credentials: /etc/gcp/key.json", "credentials: " + MASK, "key.json"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected", "leaked"), CASES)
def test_each_secret_form_is_masked(text: str, expected: str | None, leaked: str) -> None:
    out = redact(text)
    assert leaked not in out
    assert MASK in out
    if expected is not None:
        assert out == expected


def test_pem_private_key_block_is_masked_whole() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nxyz==\n-----END RSA PRIVATE KEY-----"
    text = f"key:\n{pem}\nok"
    out = redact(text)
    assert out == f"key:\n{MASK}\nok"


UNTOUCHED = [
    "select token_count, password_reset_at, author, auth_method\n"
    "from {{ ref('users') }} where status <> 'returned' and a = b",
    "{{ config(materialized='table') }}\nselect sum(amount) as revenue from orders",
    "password: \"{{ env_var('DBT_PASSWORD') }}\"",
    "password:\n  nested: value-of-other-key",
    "author: Dana Engineer",
    'Binder Error: Referenced column "nme" not found in FROM clause! Candidate bindings: "name"',
    "https://duckdb.org/docs/current/connect/concurrency",
    "ref('stg_orders') skipping sk-short",
]


@pytest.mark.parametrize("text", UNTOUCHED)
def test_ordinary_text_is_not_mangled(text: str) -> None:
    assert redact(text) == text


def test_extra_secrets_are_masked_literally_longest_first() -> None:
    out = redact(
        "connect with hunter22 or hunter22-old, not hun", ["hunter22", "hunter22-old", "hu"]
    )
    assert out == f"connect with {MASK} or {MASK}, not hun"


PROFILES = """
shop:
  target: dev
  outputs:
    dev:
      type: duckdb
      path: shop.duckdb
    prod:
      type: postgres
      user: dana
      password: Tr0ub4dor-3
      token: "{{ env_var('PG_TOKEN') }}"
      keyfile_json:
        private_key: "-----BEGIN PRIVATE KEY-----abc"
        client_email: svc@example.com
      port: 5432
"""


def test_profile_secrets_reads_literal_secret_values_only() -> None:
    found = profile_secrets(PROFILES)
    assert "Tr0ub4dor-3" in found
    assert "-----BEGIN PRIVATE KEY-----abc" in found
    assert not any("env_var" in s for s in found)
    assert "dana" not in found and "5432" not in found
    assert profile_secrets("not: [valid") == []


def test_redact_model_covers_event_and_nested_fields() -> None:
    secret = "Tr0ub4dor-3"
    event = UniversalFailureEvent(
        source=FailureSource.DBT,
        pipeline_id="shop",
        unit_id="model.shop.orders",
        error_message=f"connection failed for postgres://dana:{secret}@db/shop",
        context={"compiled_code": f"select '{secret}' as x"},
    )
    evidence = Evidence(
        event=event,
        repo_root="/repo",
        raw_code=f"select '{secret}'",
        properties={"models/schema.yml": f"password: {secret}"},
        upstream=[Relation(name="orders", columns=["order_id", secret])],
        notes=[secret],
    )
    out = redact_model(evidence, profile_secrets(PROFILES))
    assert secret not in out.model_dump_json()
    assert out.upstream[0].columns[0] == "order_id"
    assert out.event.unit_id == "model.shop.orders"


def test_environment_secrets_take_values_of_secret_named_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SNOWFLAKE_PASSWORD", "very-long-pw-value")
    monkeypatch.setenv("DBT_ENV_SECRET_GITHUB_TOKEN", "gh-token-value-123")
    monkeypatch.setenv("SHOP_REGION", "eu-west-1-region")
    monkeypatch.setenv("SHORT_TOKEN", "abc")
    found = environment_secrets()
    assert {"very-long-pw-value", "gh-token-value-123"} <= set(found)
    assert "eu-west-1-region" not in found and "abc" not in found
