"""The closing quote a rewritten YAML value left out, added with the new text kept (found on
the public yurizza/classicmodels-dbt-duckdb: a description extended with "(IDR)" and its
closing quote forgotten; the partial revert put the old description back and the incident
read `fixed`). Real git for the change; the message is dbt 1.11's."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.evidence.model import Evidence
from patchit.patching.apply import apply_edits
from patchit.patching.base import Strategy
from patchit.patching.fixits.yaml_quote import CloseYamlQuoteStrategy, _closed
from tests.conftest import commit_all
from tests.evidence.airflow_failures import init_repo
from tests.patching.contract import StrategyContract
from tests.patching.scenarios import repo_evidence

PATH = "models/marts/schema.yml"
GOOD = """version: 2

models:
  - name: fct_payments
    columns:
      - name: amount
        description: "Nilai nominal pembayaran"
        tests:
          - not_null
      - name: check_number
        description: 'ID unik transaksi'
"""
BROKEN = GOOD.replace('"Nilai nominal pembayaran"', '"Nilai nominal pembayaran (IDR)')
FIXED = GOOD.replace('"Nilai nominal pembayaran"', '"Nilai nominal pembayaran (IDR)"')
MESSAGE = "Parsing Error\n  Error reading shop: marts/schema.yml - Runtime Error"


def _repo(tmp_path: Path, broken: str = BROKEN, good: str = GOOD) -> Path:
    repo = init_repo(tmp_path / "shop")
    (repo / PATH).parent.mkdir(parents=True)
    (repo / PATH).write_text(good)
    commit_all(repo, "good")
    (repo / PATH).write_text(broken)
    commit_all(repo, "fct_payments: the amount's currency")
    return repo


def _evidence(repo: Path) -> Evidence:
    return repo_evidence(repo, PATH, MESSAGE, f"file:{PATH}")


def test_the_quote_is_closed_and_the_new_text_kept(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (candidate,) = CloseYamlQuoteStrategy().fix(_evidence(repo), [])
    assert "models/marts/schema.yml:7" in candidate.rationale and candidate.review == ""
    apply_edits(repo, candidate.edits)
    assert (repo / PATH).read_text() == FIXED


def test_a_value_read_on_to_a_later_quote_is_closed_where_the_change_opened_it(
    tmp_path: Path,
) -> None:
    """With another quoted value below, the parser closes the open one there and fails on what
    follows ("while parsing a block mapping"), not on the quoted scalar."""
    good = GOOD.replace("'ID unik transaksi'", '"ID unik transaksi"')
    broken = good.replace('"Nilai nominal pembayaran"', '"Nilai nominal: the amount paid')
    repo = _repo(tmp_path, broken=broken, good=good)
    (candidate,) = CloseYamlQuoteStrategy().fix(_evidence(repo), [])
    apply_edits(repo, candidate.edits)
    fixed = good.replace('"Nilai nominal pembayaran"', '"Nilai nominal: the amount paid"')
    assert (repo / PATH).read_text() == fixed


@pytest.mark.parametrize(
    ("line", "closed"),
    [
        ("  - name: 'x\n", "  - name: 'x'\n"),
        ('    description: "esc \\" here\r\n', '    description: "esc \\" here"\r\n'),
        ("    description: 'it''s open\n", "    description: 'it''s open'\n"),
        ('    description: "a" b\n', None),  # closed: what is wrong is elsewhere
        ('    description: "a  # b\n', None),  # text or a comment: not known which
        ('    description: "\n', None),  # nothing after the quote: a multi-line value
        ("    description: plain\n", None),
    ],
)
def test_only_a_value_left_open_on_its_line_is_closed(line: str, closed: str | None) -> None:
    assert _closed(line) == closed


def test_an_open_quote_the_change_did_not_write_is_left_alone(tmp_path: Path) -> None:
    # the file was already broken at the last good commit: the change wrote another line
    old_open = GOOD.replace("'ID unik transaksi'", "'ID unik transaksi")
    repo = _repo(tmp_path, broken=old_open.replace("not_null", "unique"), good=old_open)
    assert CloseYamlQuoteStrategy().fix(_evidence(repo), []) == []


class TestCloseYamlQuoteContract(StrategyContract):
    @pytest.fixture
    def strategy(self) -> Strategy:
        return CloseYamlQuoteStrategy()

    @pytest.fixture
    def evidence(self, tmp_path: Path) -> Evidence:
        return _evidence(_repo(tmp_path))

    @pytest.fixture
    def unrelated_evidence(self, tmp_path: Path) -> Evidence:
        # a YAML file the change broke another way: a bad indentation
        return _evidence(_repo(tmp_path, broken=GOOD.replace("        tests:", "      tests:")))
