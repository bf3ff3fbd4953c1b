"""Files from outside: a FIFO, a device, a socket or a directory is refused unopened, in one
line; a path too long or with a NUL byte is refused; nothing blocks.

Every reader of an outside file goes through `patchit.text.inputs`: the event file, the dbt
artifacts an event names, the task log, a manifest, a file a model wants to edit.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from patchit.errors import BadInputError
from patchit.events.model import UniversalFailureEvent, load_event
from patchit.evidence.project_index import index_project
from patchit.evidence.pylog import read_log_tail
from patchit.intake.airflow_dbt import dbt_events_from_airflow
from patchit.intake.validate import check_json_artifact
from patchit.patching.apply import EditError, read_text
from patchit.text.inputs import (
    input_exists,
    is_regular_file,
    read_input_bytes,
    read_input_json,
    read_input_text,
    shown,
)
from tests.fuzzing import hang_guard

KINDS = ["fifo", "char device", "directory", "socket", "symlink to a fifo"]


def special_file(kind: str, where: Path) -> Path:
    """A file of `kind` at `where` (.json), as a hostile or careless user would name one."""
    if kind == "fifo":
        os.mkfifo(where)
    elif kind == "char device":
        where.symlink_to("/dev/zero")  # reading it never ends
    elif kind == "directory":
        where.mkdir()
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(where))  # left bound for the test's lifetime
        _SOCKETS.append(server)
    elif kind == "symlink to a fifo":
        os.mkfifo(where.with_suffix(".pipe"))
        where.symlink_to(where.with_suffix(".pipe"))
    return where


_SOCKETS: list[socket.socket] = []


@pytest.fixture(autouse=True)
def _close_sockets() -> Iterator[None]:
    yield
    while _SOCKETS:
        _SOCKETS.pop().close()


def quickly(call: Callable[[], Any]) -> Any:
    with hang_guard(5):
        return call()


@pytest.mark.parametrize("kind", KINDS)
def test_a_special_file_is_refused_in_one_line_without_blocking(kind: str, tmp_path: Path) -> None:
    path = special_file(kind, tmp_path / "event.json")
    with pytest.raises(BadInputError) as refused:
        quickly(lambda: read_input_bytes(path, what="event file"))
    message = str(refused.value)
    assert "\n" not in message and "not a regular file" in message and "event file" in message
    assert not is_regular_file(path) and input_exists(path)
    with pytest.raises(BadInputError, match="not a regular file"):
        quickly(lambda: load_event(path))
    with pytest.raises(BadInputError, match="run_results artifact"):
        quickly(lambda: check_json_artifact("run_results", path, "event.json"))
    assert quickly(lambda: read_log_tail(path)) is None
    with pytest.raises(EditError, match="not a regular file"):
        quickly(lambda: read_text(path, "event.json"))


@pytest.mark.parametrize("kind", ["fifo", "char device"])
def test_a_special_artifact_of_a_dbt_task_is_skipped(kind: str, tmp_path: Path) -> None:
    project = tmp_path / "shop"
    (project / "target").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: shop\n")
    special_file(kind, project / "target" / "run_results.json")
    special_file(kind, project / "target" / "manifest.json")
    event = UniversalFailureEvent(
        source="airflow", pipeline_id="d", unit_id="dbt_build", repo_path=str(tmp_path),
        context={"runs_dbt": True, "dbt_project_dir": str(project)},
    )  # fmt: skip
    assert quickly(lambda: dbt_events_from_airflow(event)) is None
    index = quickly(lambda: index_project(project, project / "target" / "manifest.json"))
    assert index.project_name == "shop"


def test_paths_that_cannot_name_a_file(tmp_path: Path) -> None:
    too_long = tmp_path / ("p" * 5000 + ".json")
    for path in (too_long, Path("nul\x00.json"), tmp_path / "missing.json"):
        assert not input_exists(path) and not is_regular_file(path)
        with pytest.raises(BadInputError, match="cannot read") as refused:
            read_input_bytes(path)
        assert "\n" not in str(refused.value) and len(str(refused.value)) < 400


def test_sizes_text_and_json_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b"0123456789")
    with pytest.raises(BadInputError, match="10 bytes, more than the 4 patchit reads"):
        read_input_bytes(path, 4)
    assert read_input_bytes(path, 4, tail=True) == b"6789"
    path.write_bytes(b'{"a": "caf\xe9"}')
    with pytest.raises(BadInputError, match=r"not UTF-8 text \(byte 0xe9 at offset 10\)"):
        read_input_text(path)
    assert read_input_text(path, strict=False) == '{"a": "caf\ufffd"}'
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BadInputError, match="nested too deep"):
        read_input_json(path)
    path.write_text("1" * 5000)
    with pytest.raises(BadInputError, match="not valid JSON"):
        read_input_json(path)


def test_shown_paths_are_one_short_line() -> None:
    assert shown("a\nb\x00c") == "a\\nb\\x00c"
    assert shown(os.fsdecode(b"caf\xe9")) == "caf\\udce9"
    long = shown("p" * 5000)
    assert len(long) < 200 and "more characters" in long


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(b"line\r\n")
    assert read_input_bytes(path) == b"line\r\n"
    assert stat.S_ISREG(os.stat(path).st_mode)
