"""`envrefs.referenced_env_names` with files of known content: read once per content key."""

from __future__ import annotations

import subprocess
from pathlib import Path

from patchit.harnesses.dbt.clean_files import clean_blobs
from patchit.sandbox.envrefs import referenced_env_names


def test_a_file_of_known_content_is_read_once_per_key(tmp_path: Path) -> None:
    model = tmp_path / "a.sql"
    model.write_text("select '{{ env_var(\"FIRST\") }}'")
    script = tmp_path / "run.sh"
    script.write_text("echo $SHELL_ONE")
    known = {str(model): "blob-1", str(script): "blob-2"}
    assert referenced_env_names([tmp_path], known=known) == {"FIRST", "SHELL_ONE"}
    model.write_text("select '{{ env_var(\"SECOND\") }}'")  # the key says: as before
    assert referenced_env_names([tmp_path], known=known) == {"FIRST", "SHELL_ONE"}
    assert referenced_env_names([tmp_path], known={str(model): "blob-3"}) == {
        "SECOND",
        "SHELL_ONE",
    }
    assert referenced_env_names([tmp_path]) == {"SECOND", "SHELL_ONE"}


def test_a_worktree_s_modified_file_is_read_and_its_clean_ones_remembered(
    tmp_path: Path,
) -> None:
    """With git's clean blobs as the keys (as the dbt harness passes them), an edit the
    candidate made is read from disk."""

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.sql").write_text("select '{{ env_var(\"KEPT\") }}'")
    (tmp_path / "models" / "b.sql").write_text("select 1")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    (tmp_path / "models" / "b.sql").write_text("select '{{ env_var(\"EDITED\") }}'")
    clean = clean_blobs(tmp_path)
    assert set(clean) == {"models/a.sql"}
    known = {str(tmp_path / rel): key for rel, key in clean.items()}
    assert referenced_env_names([tmp_path], known=known) == {"KEPT", "EDITED"}


def test_the_walk_is_a_directory_s_files_then_each_directory_in_name_order(
    tmp_path: Path,
) -> None:
    from patchit.sandbox.envrefs import _walk

    for rel in ("z.sql", "a/x.sql", "a/b/y.sql", "a/c.yml", "b/w.sql", "target/t.sql", "n.bin"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    walked = [str(Path(p).relative_to(tmp_path)) for p in _walk(str(tmp_path))]
    assert walked == ["z.sql", "a/c.yml", "a/x.sql", "a/b/y.sql", "b/w.sql"]
