"""Python that `ast.parse` refuses with more than a SyntaxError is no Python a reader can read
(found by `make fuzz`: a generated DAG file made the intents raise MemoryError)."""

from __future__ import annotations

import pytest

from patchit.evidence.airflow import parse_module
from patchit.evidence.intents import read_intents
from patchit.evidence.py_renames import function_renames
from patchit.patching.renames import functions_in
from patchit.text.python_source import parse_python

GOOD = "def total(rows):\n    return sum(rows)\n"
REFUSED = [
    "-" * 100_000 + "1",  # MemoryError from the parser's stack
    "lambda: " * 3_000 + "1",  # MemoryError
    "p" + "/p" * 3_000,  # RecursionError while building the tree
    "x = 1\0",  # ValueError: a NUL byte
    "def (:\n",  # SyntaxError
]


@pytest.mark.parametrize("text", REFUSED, ids=["unary", "lambda", "deep", "nul", "syntax"])
def test_every_reader_of_python_takes_a_refused_file_as_unreadable(text: str) -> None:
    assert parse_python(text) is None and parse_module(text) is None
    assert functions_in(text) == {}
    assert function_renames(GOOD, text) == [] and function_renames(text, GOOD) == []
    for before, after in ((GOOD, text), (text, GOOD)):
        assert [i for i in read_intents([("dags/job.py", before, after)], [])
                if i.path.endswith(".py")] == []  # fmt: skip
    assert parse_python(GOOD) is not None
