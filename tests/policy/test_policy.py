"""The safety policy: each refusal on real files, symlinks and binaries in a tmp repository."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchit.config import PatchitConfig, PolicyConfig
from patchit.patching.base import Edit, PatchCandidate
from patchit.policy import check_policy
from tests.conftest import commit_all, git

ORDERS = "select\n    id,\n    nme\nfrom {{ ref('stg_orders') }}\n"


def edits(*triples: tuple[str, str, str]) -> PatchCandidate:
    return PatchCandidate(
        strategy="test",
        tag="rename_column",
        edits=[Edit(path=p, search=s, replace=r) for p, s, r in triples],
        rationale="test",
    )


def one(path: str, search: str = "nme", replace: str = "name") -> PatchCandidate:
    return edits((path, search, replace))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel in [
        "models/orders.sql", "models/customers.sql", "models/a.sql", "models/b.sql",
        "macros/m.sql", ".env", "config/.env.local", "models/secret_keys.sql",
        "db/migrations/001_init.sql", "migrations/002.sql", "profiles.yml", "dbt/profiles.yml",
        "CREDENTIALS.sql",
    ]:  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(ORDERS)
    return root


def test_an_ordinary_edit_passes(repo: Path) -> None:
    assert check_policy(one("models/orders.sql"), repo, PolicyConfig()) is None


@pytest.mark.parametrize(
    ("path", "glob"),
    [
        (".env", "*.env*"),
        ("config/.env.local", "*.env*"),
        ("models/secret_keys.sql", "*secret*"),
        ("CREDENTIALS.sql", "*credential*"),
        ("migrations/002.sql", "migrations/*"),
        ("db/migrations/001_init.sql", "migrations/*"),
        ("profiles.yml", "profiles.yml"),
        ("dbt/profiles.yml", "profiles.yml"),
    ],
)
def test_default_deny_globs_bite_anywhere(repo: Path, path: str, glob: str) -> None:
    reason = check_policy(one(path), repo, PolicyConfig())
    assert reason is not None
    assert reason.startswith(f"{path}: matches deny glob")
    assert glob in reason


def test_a_path_outside_the_allow_globs_is_refused(repo: Path) -> None:
    policy = PolicyConfig(allow=["models/*"])
    assert check_policy(one("models/orders.sql"), repo, policy) is None
    assert "matches no allow glob (models/*)" in (
        check_policy(one("macros/m.sql"), repo, policy) or ""
    )


def test_too_many_files(repo: Path) -> None:
    four = edits(*[(f"models/{n}.sql", "nme", "name") for n in ("orders", "customers", "a", "b")])
    assert check_policy(four, repo, PolicyConfig()) == "touches 4 files, more than max_files=3"
    assert check_policy(four, repo, PolicyConfig(max_files=4)) is None


def test_too_many_lines(repo: Path) -> None:
    (repo / "models/big.sql").write_text("".join(f"    col_{i},\n" for i in range(30)))
    whole = (repo / "models/big.sql").read_text()
    rewrite = one("models/big.sql", whole, whole.replace("col_", "c_"))
    assert check_policy(rewrite, repo, PolicyConfig()) == "changes 60 lines, more than max_lines=40"
    assert check_policy(rewrite, repo, PolicyConfig(max_lines=60)) is None
    # a one-word fix counts its removed and added line
    assert check_policy(one("models/orders.sql"), repo, PolicyConfig(max_lines=2)) is None
    assert "changes 2 lines" in (
        check_policy(one("models/orders.sql"), repo, PolicyConfig(max_lines=1)) or ""
    )


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/etc/passwd", "absolute paths are refused"),
        ("../outside.sql", "'..' would leave the repository"),
        ("models/../../outside.sql", "'..' would leave the repository"),
        (".git/config", "git's own files are never edited"),
        ("models\\orders.sql", "backslashes"),
        ("C:/x.sql", "absolute paths are refused"),
        ("   ", "empty path"),
    ],
)
def test_paths_that_leave_the_repository(repo: Path, path: str, expected: str) -> None:
    (repo.parent / "outside.sql").write_text(ORDERS)
    assert expected in (check_policy(one(path), repo, PolicyConfig()) or "")


def test_symlink_pointing_outside_is_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "victim.sql").write_text(ORDERS)
    os.symlink(outside / "victim.sql", repo / "models/escape.sql")
    os.symlink(outside, repo / "models/linked_dir")
    reason = check_policy(one("models/escape.sql"), repo, PolicyConfig())
    assert reason is not None and "outside the repository" in reason
    reason = check_policy(one("models/linked_dir/victim.sql"), repo, PolicyConfig())
    assert reason is not None and "outside the repository" in reason
    assert (outside / "victim.sql").read_text() == ORDERS


def test_symlinks_inside_the_repository_are_refused_too(repo: Path) -> None:
    os.symlink("orders.sql", repo / "models/alias.sql")
    os.symlink("../models", repo / "macros/models_link")
    assert "is a symlink" in (check_policy(one("models/alias.sql"), repo, PolicyConfig()) or "")
    reason = check_policy(one("macros/models_link/orders.sql"), repo, PolicyConfig())
    assert reason is not None and "goes through symlink" in reason


def test_binary_and_undecodable_files_are_refused(repo: Path) -> None:
    (repo / "models/blob.sql").write_bytes(b"nme\x00\x01\x02" * 10)
    (repo / "models/latin1.sql").write_bytes("select 'café' as nme\n".encode("latin-1"))
    assert "binary file" in (check_policy(one("models/blob.sql"), repo, PolicyConfig()) or "")
    assert "not UTF-8 text" in (check_policy(one("models/latin1.sql"), repo, PolicyConfig()) or "")


def test_missing_file_is_refused(repo: Path) -> None:
    reason = check_policy(one("models/nope.sql"), repo, PolicyConfig())
    assert reason == "models/nope.sql: no such file in the repository"
    assert "no such file" in (check_policy(one("models"), repo, PolicyConfig()) or "")


def test_search_text_must_occur_exactly_once(repo: Path) -> None:
    missing = check_policy(one("models/orders.sql", search="nmee"), repo, PolicyConfig())
    assert missing == (
        "models/orders.sql: search text does not occur in the file (it must occur exactly once)"
    )
    twice = check_policy(one("models/orders.sql", search="    "), repo, PolicyConfig())
    assert twice is not None and "occurs 2 times" in twice and "models/orders.sql" in twice
    empty = check_policy(one("models/orders.sql", search=""), repo, PolicyConfig())
    assert empty == "models/orders.sql: an edit has empty search text"


def test_edits_to_one_file_apply_in_order(repo: Path) -> None:
    chained = edits(
        ("models/orders.sql", "nme", "name_tmp"),
        ("models/orders.sql", "name_tmp", "name"),
    )
    assert check_policy(chained, repo, PolicyConfig()) is None
    stale = edits(("models/orders.sql", "nme", "name"), ("models/orders.sql", "nme", "x"))
    assert "does not occur" in (check_policy(stale, repo, PolicyConfig()) or "")
    assert check_policy(edits(), repo, PolicyConfig()) == "the candidate has no edits"


PROTECTED_PATHS = [
    (".github/workflows/ci.yml", ".github/**"),
    (".github/dependabot.yml", ".github/**"),
    (".gitlab-ci.yml", ".gitlab-ci.yml"),
    (".patchit.toml", ".patchit.toml"),
    (".pre-commit-config.yaml", ".pre-commit-config.yaml"),
    (".gitmodules", ".gitmodules"),
    ("setup.py", "setup.py"),
    ("pkg/setup.py", "setup.py"),
    ("conftest.py", "conftest.py"),
    ("tests/unit/conftest.py", "conftest.py"),
    ("pyproject.toml", "pyproject.toml"),
    ("requirements-dev.txt", "requirements*.txt"),
    ("packages.yml", "packages.yml"),
    ("transform/dependencies.yml", "dependencies.yml"),
    ("dags/sitecustomize.py", "sitecustomize.py"),
    ("lib/hook.pth", "*.pth"),
    ("Makefile", "Makefile"),
]


@pytest.mark.parametrize(("path", "glob"), PROTECTED_PATHS)
def test_protected_paths_are_refused_by_default(repo: Path, path: str, glob: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(ORDERS)
    reason = check_policy(one(path), repo, PolicyConfig())
    assert reason is not None and reason.startswith(f"{path}: protected path")
    assert f"glob {glob!r}" in reason
    # a user's own deny list does not lift the protection
    assert check_policy(one(path), repo, PolicyConfig(deny=[])) == reason


@pytest.mark.parametrize(("path", "glob"), PROTECTED_PATHS)
def test_a_user_can_allow_a_protected_path(repo: Path, path: str, glob: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(ORDERS)
    allowed = PolicyConfig(protected=[g for g in PolicyConfig().protected if g != glob])
    assert check_policy(one(path), repo, allowed) is None


def test_protected_paths_from_the_operators_file(repo: Path, _patchit_home: Path) -> None:
    from patchit.policy.settings import merge_settings, operator_config

    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "ci.yml").write_text(ORDERS)
    (repo / "setup.py").write_text(ORDERS)
    _patchit_home.mkdir(parents=True)
    (_patchit_home / "patchit.toml").write_text('[policy]\nprotected = ["setup.py"]\n')
    policy = operator_config(_patchit_home).policy
    assert check_policy(one(".github/workflows/ci.yml"), repo, policy) is None
    assert "protected path" in (check_policy(one("setup.py"), repo, policy) or "")
    # a repository may not drop a protected glob: the same table in its file leaves it in
    dropped = {"policy": {"protected": ["setup.py"]}}
    narrowed = merge_settings(PatchitConfig(), dropped, ".patchit.toml").config.policy
    assert "protected path" in (check_policy(one(".github/workflows/ci.yml"), repo, narrowed) or "")


# -- a file the candidate creates (a deleted model restored) --------------------------------

BIG = "".join(f"select {n} as c{n}\nunion all\n" for n in range(30)) + "select 0 as c\n"


def test_a_new_file_may_be_created_where_nothing_is(repo: Path) -> None:
    new = edits(("models/staging/stg_new.sql", "", "select 1 as id\n"))
    assert check_policy(new, repo, PolicyConfig()) is None
    # never over something: a file, or a symlink (even a dangling one)
    over = check_policy(edits(("models/orders.sql", "", "x\n")), repo, PolicyConfig())
    assert over == "models/orders.sql: an edit has empty search text"
    (repo / "models" / "dangling.sql").symlink_to(repo / "nowhere.sql")
    assert "symlink" in (check_policy(edits(("models/dangling.sql", "", "x\n")), repo,
                                      PolicyConfig()) or "")  # fmt: skip
    (repo / "linked").symlink_to(repo / "models")
    assert "goes through symlink" in (check_policy(edits(("linked/n.sql", "", "x\n")), repo,
                                                   PolicyConfig()) or "")  # fmt: skip
    # the globs bite as for any edit, and the content is text
    assert "protected path" in (check_policy(edits((".github/workflows/ci.yml", "", "on: push\n")),
                                             repo, PolicyConfig()) or "")  # fmt: skip
    for runs_at_start in ("sitecustomize.py", "dags/usercustomize.py", "evil.pth"):
        assert "protected path" in (check_policy(edits((runs_at_start, "", "import os\n")), repo,
                                                 PolicyConfig()) or "")  # fmt: skip
    assert "binary" in (check_policy(edits(("models/b.bin", "", "a\x00b")), repo,
                                     PolicyConfig()) or "")  # fmt: skip
    # its lines are new code: they count
    assert "more than max_lines=40" in (check_policy(edits(("models/big.sql", "", BIG)), repo,
                                                     PolicyConfig()) or "")  # fmt: skip


def test_a_file_restored_as_the_repository_had_it_is_not_new_lines(repo: Path) -> None:
    git(repo, "init", "-q")
    (repo / "models" / "big.sql").write_text(BIG)
    commit_all(repo, "big model")
    (repo / "models" / "big.sql").unlink()
    commit_all(repo, "drop the big model")
    restored = edits(("models/big.sql", "", BIG))
    assert check_policy(restored, repo, PolicyConfig()) is None
    other = edits(("models/big.sql", "", BIG.replace("select 0", "select 9")))
    assert "more than max_lines=40" in (check_policy(other, repo, PolicyConfig()) or "")
