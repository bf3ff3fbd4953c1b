from pathlib import Path

import pytest

from patchit.errors import PatchitError
from patchit.patching.apply import (
    EditError,
    apply_edits,
    derive_edit,
    derive_edits,
    preview_edits,
)
from patchit.patching.base import Edit


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.sql").write_text("select\n    nme,\n    id\nfrom t\n")
    (tmp_path / "crlf.sql").write_bytes(b"select 1\r\nfrom t\r\n")
    return tmp_path


def test_apply_edits_in_order_and_returns_touched_paths(repo: Path) -> None:
    edits = [
        Edit(path="models/a.sql", search="    nme,", replace="    name,"),
        Edit(path="models/a.sql", search="name,\n    id", replace="name,\n    id + 1 as id"),
        Edit(path="crlf.sql", search="select 1", replace="select 2"),
    ]
    assert apply_edits(repo, edits) == ["models/a.sql", "crlf.sql"]
    assert (repo / "models/a.sql").read_text() == "select\n    name,\n    id + 1 as id\nfrom t\n"
    assert (repo / "crlf.sql").read_bytes() == b"select 2\r\nfrom t\r\n"


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (Edit(path="models/a.sql", search="missing", replace="x"), "not found"),
        (Edit(path="models/a.sql", search="    ", replace="x"), "occurs 2 times"),
        (Edit(path="models/b.sql", search="x", replace="y"), "does not exist"),
        (Edit(path="../outside.sql", search="x", replace="y"), "outside the repository"),
        (Edit(path="/etc/passwd", search="x", replace="y"), "relative"),
        (Edit(path="models/a.sql", search="", replace="y"), "only allowed to create"),
    ],
)
def test_a_bad_edit_names_file_and_problem(repo: Path, edit: Edit, problem: str) -> None:
    with pytest.raises(EditError, match=problem) as caught:
        apply_edits(repo, [edit])
    assert isinstance(caught.value, PatchitError)
    assert edit.path in str(caught.value)


def test_a_bad_batch_writes_nothing(repo: Path) -> None:
    before = (repo / "models/a.sql").read_text()
    edits = [
        Edit(path="models/a.sql", search="nme", replace="name"),
        Edit(path="models/a.sql", search="nme", replace="name"),  # gone after the first edit
    ]
    with pytest.raises(EditError, match=r"edit 2 of 2"):
        apply_edits(repo, edits)
    assert (repo / "models/a.sql").read_text() == before


def test_empty_search_creates_a_new_file(repo: Path) -> None:
    assert apply_edits(repo, [Edit(path="models/new.sql", search="", replace="select 1\n")])
    assert (repo / "models/new.sql").read_text() == "select 1\n"


def test_preview_shows_before_and_after_without_writing(repo: Path) -> None:
    edit = Edit(path="models/a.sql", search="nme", replace="name")
    preview = preview_edits(repo, [edit])
    before, after = preview["models/a.sql"]
    assert before == (repo / "models/a.sql").read_text()
    assert after == before.replace("nme", "name")


def test_derive_edit_is_minimal_and_unique() -> None:
    before = "a\nx\nb\nx\nc\n"
    edit = derive_edit("f", before, before.replace("c", "d"))
    assert (edit.search, edit.replace) == ("c\n", "d\n")
    widened = derive_edit("f", before, "a\nx\nb\nY\nc\n")
    assert before.count(widened.search) == 1
    assert before.replace(widened.search, widened.replace) == "a\nx\nb\nY\nc\n"
    assert derive_edit("f", "x\nx\n", "x\n").search == "x\nx\n"
    with pytest.raises(EditError):
        derive_edit("f", "same", "same")


def test_derive_edits_gives_one_edit_per_changed_region_in_order(repo: Path) -> None:
    before = "import a\n\nx = 1\ny = 2\nz = 3\n\nprint(x)\n"
    after = "import b\n\nx = 1\ny = 2\nz = 3\n\nprint(x, y)\n"
    (repo / "job.py").write_text(before)
    edits = derive_edits("job.py", before, after)
    assert [(e.search, e.replace) for e in edits] == [
        ("import a\n", "import b\n"),
        ("print(x)\n", "print(x, y)\n"),
    ]
    apply_edits(repo, edits)
    assert (repo / "job.py").read_text() == after


@pytest.mark.parametrize(
    "rel", ["p/" * 2500 + "x.py", "a" * 300 + ".py", "caf\udce9.py", "nul\x00.py"]
)
def test_a_path_that_cannot_name_a_file_is_refused_before_anything_is_written(
    tmp_path: Path, rel: str
) -> None:
    """Found by `make fuzz`: a model's 5,000-character path raised OSError (name too long),
    a lone surrogate UnicodeEncodeError."""
    with pytest.raises(EditError) as refused:
        apply_edits(tmp_path, [Edit(path=rel, search="", replace="x")])
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 400
    assert list(tmp_path.iterdir()) == []
