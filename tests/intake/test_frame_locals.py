"""Runtime evidence: the failing frame's locals as names and types, never values, capped, and
read without running any of the task's own code."""

from __future__ import annotations

import json
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from patchit.events.model import RuntimeFrame, RuntimeValue
from patchit.intake.frame_locals import (
    MAX_LOCALS,
    MAX_NAMES,
    MAX_TOTAL_NAMES,
    failing_frame_locals,
    in_repo,
    safe_name,
)

SECRETS = (
    "hunter2-correct-horse",
    "ghp_0123456789abcdefghijklmnopqrstuvwxyz",
    "AKIAIOSFODNN7EXAMPLE",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "ada@example.com",
)


@pytest.fixture(autouse=True)
def _forget_job_module() -> Iterator[None]:
    yield
    sys.modules.pop("job", None)


def fail_in(repo: Path, source: str) -> tuple[BaseException, Path]:
    """Import `source` as module `job` from a file of `repo` (its frames are the repository's)
    and call its `job()` until it raises."""
    path = repo / "dags" / "job.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    module = types.ModuleType("job")
    module.__file__ = str(path)
    sys.modules["job"] = module
    try:
        exec(compile(path.read_text(), str(path), "exec", dont_inherit=True), module.__dict__)
        module.job()
    except Exception as exc:
        return exc, path
    raise AssertionError("the job did not fail")


def capture(repo: Path, source: str) -> RuntimeFrame:
    exc, _ = fail_in(repo, source)
    found = failing_frame_locals(exc, str(repo))
    assert found is not None
    json.dumps(found)  # JSON-ready as the callback spools it
    return RuntimeFrame.model_validate(found)


def test_a_csv_rows_keys_are_recorded_with_their_types(tmp_path: Path) -> None:
    frame = capture(
        tmp_path,
        """
        import csv, io

        def job():
            total = 0.0
            for row in csv.DictReader(io.StringIO("invoice_id,amount\\n1,12.5\\n")):
                total += float(row["amout"])
        """,
    )
    assert (frame.path, frame.line, frame.function) == (str(tmp_path / "dags/job.py"), 7, "job")
    row = frame.locals["row"]
    assert (row.type, row.size, row.keys) == ("dict", 2, {"invoice_id": "str", "amount": "str"})
    assert frame.locals["total"].model_dump(exclude_defaults=True) == {"type": "float"}


def test_nested_payloads_lists_and_objects(tmp_path: Path) -> None:
    frame = capture(
        tmp_path,
        """
        import dataclasses, json, types
        from collections import namedtuple

        Invoice = namedtuple("Invoice", "invoice_id amount_cents")

        @dataclasses.dataclass
        class Order:
            order_id: int
            def total(self, rate):
                return rate

        def job():
            payload = json.loads('{"data": {"amount": 3}, "rows": [{"k": 1}]}')
            rows = [{"amount": 1, "country": "DE"}]
            order = types.SimpleNamespace(**{"amount": 1, "customer": "ada"})
            invoice = Invoice(1, 250)
            typed = Order(7)
            helper = typed.total
            done, missing = True, None
            return payload["data"]["amout"]
        """,
    )
    found = frame.locals
    assert found["payload"].inner["data"].keys == {"amount": "int"}
    assert found["rows"].item is not None and found["rows"].item.keys == {
        "amount": "int", "country": "str",
    }  # fmt: skip
    assert found["order"].type == "types.SimpleNamespace"
    assert found["order"].attrs == {"amount": "int", "customer": "str"}
    assert found["invoice"].attrs == {"invoice_id": "int", "amount_cents": "int"}
    assert found["typed"].type == "job.Order"
    assert set(found["typed"].attrs or {}) == {"order_id", "total"}  # the repo class's method
    assert found["helper"].params == ["rate"]
    assert (found["done"].value, found["missing"].value) == ("True", "None")


def test_no_value_is_ever_recorded_and_secret_names_only_by_type(tmp_path: Path) -> None:
    frame = capture(
        tmp_path,
        f"""
        def job():
            password = {SECRETS[0]!r}
            api_token = {SECRETS[1]!r}
            creds = {{"user": "ada", "password": {SECRETS[0]!r}}}
            headers = {{"Authorization": "Bearer " + {SECRETS[1]!r}, {SECRETS[2]!r}: 1,
                        {SECRETS[4]!r}: 2, {SECRETS[5]!r}: 3, {SECRETS[3]!r}: 4, 7: 5}}
            note = "the customer ada@example.com paid"
            amount, rate = 1250, 0.085
            return headers["x"]
        """,
    )
    text = frame.model_dump_json()
    for secret in (*SECRETS, "1250", "0.085", "ada", "Bearer"):
        assert secret not in text, secret
    found = frame.locals
    assert found["password"].model_dump(exclude_defaults=True) == {"type": "str"}  # no length
    assert found["api_token"].model_dump(exclude_defaults=True) == {"type": "str"}
    assert found["creds"].model_dump(exclude_defaults=True) == {"type": "dict", "size": 2}
    assert found["headers"].keys == {"Authorization": "str"}
    assert found["headers"].withheld == 5  # four credential- or data-shaped keys and an int
    assert found["note"].model_dump(exclude_defaults=True) == {"type": "str", "size": 33}


def test_sizes_are_capped(tmp_path: Path) -> None:
    many = "".join(f"    v{i} = {{'k': {i}}}\n" for i in range(MAX_LOCALS + 5))
    frame = capture(
        tmp_path,
        "def job():\n"
        '    huge = {f"key_{i}": i for i in range(100_000)}\n'
        '    wide = {f"col_{i}": {f"sub_{j}": j for j in range(60)} for i in range(60)}\n'
        f"{many}"
        '    return huge["x"]\n',
    )
    huge = frame.locals["huge"]
    assert huge.size == 100_000 and huge.truncated and len(huge.keys or {}) == MAX_NAMES
    assert huge.names() is None  # a list cut short offers no candidates
    assert len(frame.locals) == MAX_LOCALS
    assert any("left out" in note for note in frame.notes)
    recorded = sum(len(v.keys or {}) + sum(len(i.keys or {}) for i in v.inner.values())
                   for v in frame.locals.values())  # fmt: skip
    assert recorded <= MAX_TOTAL_NAMES
    assert len(frame.model_dump_json()) < 40_000


def test_reading_runs_none_of_the_tasks_code(tmp_path: Path) -> None:
    exc, _ = fail_in(
        tmp_path,
        """
        class Trap:
            @property
            def __dict__(self):
                raise SystemExit("__dict__ ran")
            @property
            def __class__(self):
                raise SystemExit("__class__ ran")
            def __getattr__(self, name):
                raise SystemExit("__getattr__ ran")
            def __len__(self):
                raise SystemExit("__len__ ran")
            def __repr__(self):
                raise SystemExit("__repr__ ran")

        class Keys(dict):
            def keys(self):
                raise SystemExit("keys ran")
            def items(self):
                raise SystemExit("items ran")

        class Meta(type):
            def __getattribute__(cls, name):
                raise SystemExit(f"the metaclass ran for {name}")

        class Odd(metaclass=Meta):
            pass

        def job():
            trap, keys, odd = Trap(), Keys(amount=1), Odd()
            return keys["amout"]
        """,
    )
    found = failing_frame_locals(exc, str(tmp_path))
    assert found is not None
    assert found["locals"]["keys"]["keys"] == {"amount": "int"}
    assert found["locals"]["trap"]["type"] == "job.Trap"
    assert found["locals"]["odd"]["type"] == "job.Odd"


def test_only_the_repositorys_innermost_frame(tmp_path: Path) -> None:
    exc, _ = fail_in(
        tmp_path,
        """
        import json

        def job():
            row = {"amount": 1}
            return json.loads("{")
        """,
    )
    found = failing_frame_locals(exc, str(tmp_path))  # json's own frames are not the repo's
    assert found is not None and found["function"] == "job" and "row" in found["locals"]
    assert failing_frame_locals(exc, str(tmp_path / "elsewhere")) is None


def test_vendored_libraries_are_not_the_repository() -> None:
    assert in_repo("/srv/repo/dags/job.py", "/srv/repo")
    assert in_repo("/srv/repo/dags/job.py", "/srv/repo/")
    assert not in_repo("/srv/repo/.venv/lib/python3.11/site-packages/x.py", "/srv/repo")
    assert not in_repo("/srv/repository/job.py", "/srv/repo")
    assert not in_repo("<string>", "/srv/repo")


@pytest.mark.parametrize(
    "name",
    ["amount", "net_cents", "Amount (EUR)", "order-id", "_private", "amount_gross_cents_total"],
)
def test_names_that_read_like_keys_are_kept(name: str) -> None:
    assert safe_name(name) == name


@pytest.mark.parametrize(
    "name", [*SECRETS, "", "x" * 65, "two\nlines", "https://api.example.com", 7, b"amount"]
)
def test_data_and_credentials_are_not_names(name: object) -> None:
    assert safe_name(name) is None


def test_an_event_cannot_carry_a_value_in_runtime_locals() -> None:
    assert RuntimeValue(type="bool", value="True").value == "True"
    with pytest.raises(ValidationError):
        RuntimeValue.model_validate({"type": "str", "value": "hunter2"})
