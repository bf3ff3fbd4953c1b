"""Line endings kept: every edit (fix-it, partial revert, the model's) writes a file byte for
byte in its own line ends, and its diff applies with git. Real git, no dbt."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from patchit.patching.apply import apply_edits, derive_edit, derive_edits, preview_edits
from patchit.patching.base import Edit
from patchit.patching.diffs import diff_hash, unified_diff
from patchit.patching.lineends import convention, match_edit, split_lines
from patchit.patching.llm.answers import EditAnswer
from patchit.patching.llm.edits import resolve_edits
from patchit.patching.renames import file_at
from patchit.patching.revert import PartialRevertStrategy, read_breaking_change
from tests.conftest import commit_all, git
from tests.evidence.airflow_failures import init_repo
from tests.patching.test_revert import GOOD, JOB, SCALED, drive, failing_evidence, runs

YAML = "models:\r\n  - name: orders\r\n    columns:\r\n      - name: id\r\n"


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "schema.yml").write_bytes(YAML.encode())
    (tmp_path / "models" / "last.sql").write_bytes(b"select 1\r\nfrom t")  # no final newline
    (tmp_path / "models" / "mixed.sql").write_bytes(b"select 1\r\nfrom t\n")
    return tmp_path


def test_an_lf_search_matches_a_crlf_file_and_is_written_back_in_crlf(repo: Path) -> None:
    edit = Edit(path="models/schema.yml", search="    columns:\n      - name: id\n",
                replace="    columns:\n      - name: order_id\n      - name: amount\n")  # fmt: skip
    apply_edits(repo, [edit])
    assert (repo / "models" / "schema.yml").read_bytes() == (
        b"models:\r\n  - name: orders\r\n    columns:\r\n      - name: order_id\r\n"
        b"      - name: amount\r\n"
    )


def test_an_exact_crlf_search_with_an_lf_replacement_keeps_crlf(repo: Path) -> None:
    edit = Edit(path="models/schema.yml", search="  - name: orders\r\n",
                replace="  - name: orders\n    description: one row per order\n")  # fmt: skip
    after = preview_edits(repo, [edit])["models/schema.yml"][1]
    assert after == YAML.replace("orders\r\n", "orders\r\n    description: one row per order\r\n")


def test_a_missing_final_newline_stays_missing(repo: Path) -> None:
    for search, replace in (("from t", "from u"), ("from t\n", "from u\n")):
        after = preview_edits(repo, [Edit(path="models/last.sql", search=search,
                                          replace=replace)])  # fmt: skip
        assert after["models/last.sql"][1] == "select 1\r\nfrom u"


def test_a_file_that_mixes_line_ends_is_matched_exactly(repo: Path) -> None:
    assert convention("a\r\nb\n") is None and convention("a\nb") == "\n"
    assert match_edit("select 1\r\nfrom t\n", "select 1\nfrom", "x").count == 0
    edit = Edit(path="models/mixed.sql", search="from t\n", replace="from u\n")
    assert preview_edits(repo, [edit])["models/mixed.sql"][1] == "select 1\r\nfrom u\n"


def test_derived_edits_are_the_changed_lines_only_in_the_files_line_ends() -> None:
    before = crlf("select\n    a,\n    b\nfrom t\n")
    built = "select\n    a,\n    b + 1 as b\nfrom t\n"  # a fix-it that rebuilt the file with LF
    edit = derive_edit("m.sql", before, built)
    assert (edit.search, edit.replace) == ("    b\r\n", "    b + 1 as b\r\n")
    [edit] = derive_edits("m.sql", before, built)
    assert edit.replace == "    b + 1 as b\r\n"


def test_split_lines_splits_where_git_does() -> None:
    text = "a\x0cb\r\nc\u2028d\ne"
    assert split_lines(text) == ["a\x0cb\r\n", "c\u2028d\n", "e"]
    assert "".join(split_lines(text)) == text


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (YAML, YAML.replace("name: id", "name: order_id")),
        ("select 1\r\nfrom t", "select 2\r\nfrom t"),  # no final newline
        ("-- page\x0cbreak\nselect 1\nfrom t\n", "-- page\x0cbreak\nselect 2\nfrom t\n"),
    ],
)
def test_the_diff_applies_with_git_byte_for_byte(tmp_path: Path, before: str, after: str) -> None:
    repo = init_repo(tmp_path / "repo")
    (repo / "f.yml").write_bytes(before.encode())
    commit_all(repo, "base")
    patch = tmp_path / "fix.patch"
    patch.write_bytes(unified_diff("f.yml", before, after).encode())
    git(repo, "apply", "--whitespace=nowarn", str(patch))
    assert (repo / "f.yml").read_bytes() == after.encode()
    # the same change hashes the same whatever the line ends (memory's "tried before")
    assert diff_hash(unified_diff("f.yml", before, after)) == diff_hash(
        unified_diff("f.yml", before.replace("\r\n", "\n"), after.replace("\r\n", "\n"))
    )


def test_the_model_tiers_lf_edit_of_a_crlf_file_keeps_crlf(repo: Path) -> None:
    notes: list[str] = []
    answers = [
        EditAnswer(file="models/schema.yml", search="      - name: id\n",
                   replace="      - name: order_id\n"),
        EditAnswer(file="models/last.sql", search="from t\n", replace="from u\n"),
    ]  # fmt: skip
    edits = resolve_edits(repo, answers, notes)
    assert [e.replace for e in edits] == ["      - name: order_id\r\n", "from u"]
    apply_edits(repo, edits)
    assert (repo / "models" / "schema.yml").read_bytes() == YAML.replace("id", "order_id").encode()
    assert (repo / "models" / "last.sql").read_bytes() == b"select 1\r\nfrom u"
    assert notes == []  # matched exactly in the file's line ends, not by the whitespace retry


def test_the_breaking_change_is_read_from_git_byte_for_byte(tmp_path: Path) -> None:
    evidence = failing_evidence(tmp_path, crlf(GOOD), crlf(SCALED))
    change = read_breaking_change(evidence)
    assert change is not None
    [job] = change.files
    assert job.base_text == crlf(GOOD) and job.fail_text == crlf(SCALED)
    assert file_at(Path(evidence.repo_root), "HEAD", JOB) == crlf(SCALED)


def test_a_partial_revert_of_a_crlf_file_applies_and_keeps_crlf(tmp_path: Path) -> None:
    evidence = failing_evidence(tmp_path, crlf(GOOD), crlf(SCALED))
    proposed, history = drive(PartialRevertStrategy(), evidence, runs)
    assert history[-1].outcome == "verified"
    root = Path(evidence.repo_root)
    apply_edits(root, proposed[-1].edits)
    fixed = crlf(SCALED.replace('row["amout"]', 'row["amount"]'))
    assert (root / JOB).read_bytes() == fixed.encode()
    # the branch's commit keeps CRLF: what git stores is what the worktree has
    git(root, "add", JOB)
    shown = subprocess.run(["git", "-C", str(root), "diff", "--cached"], capture_output=True,
                           check=True).stdout  # fmt: skip
    assert b'+    return sum(row["amount"] * scale for row in rows)\r\n' in shown


def test_the_policy_reads_a_crlf_file_as_the_edit_applies_to_it(repo: Path) -> None:
    from patchit.config import PolicyConfig
    from patchit.patching.base import PatchCandidate
    from patchit.policy.policy import check_policy

    policy = PolicyConfig(max_lines=2)
    for search in ("      - name: id\r\n", "      - name: id\n"):
        edits = [Edit(path="models/schema.yml", search=search, replace="      - name: key\n")]
        candidate = PatchCandidate(strategy="s", tag="t", edits=edits, rationale="r")
        assert check_policy(candidate, repo, policy) is None  # found once; one line changed
