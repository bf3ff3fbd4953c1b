"""A bad `.patchit.toml` (or `$PATCHIT_HOME/patchit.toml`) is one line that names the file, the
setting as the file spells it, its value and what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.config import load_config, load_deployment
from patchit.errors import BadInputError

CASES = [
    ("[sandbox]\npg_copy_limit_mb = -1\n",
     "[sandbox] pg_copy_limit_mb = -1: Input should be greater than or equal to 0"),
    ('[sandbox]\npg_clone = "sometimes"\n',
     "[sandbox] pg_clone = 'sometimes': must match '^(auto|never)$'"),
    ("[sandbox]\npg_clones = 1\n", "[sandbox] pg_clones: unknown setting"),
    ("[sandbx]\nnetwork = true\n", "[sandbx]: unknown section"),
    ("network = true\n", "network: unknown setting"),
    ('[policy]\ndeny = ["a", 1]\n', "[policy] deny[1] = 1: Input should be a valid string"),
    ("[sandbox]\nnetwork = 2\nmemory_mb = 1\n", "[sandbox] network = 2: Input should be a "
     "valid boolean, unable to interpret input (and 1 more)"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "said"), CASES)
def test_a_bad_setting_is_named_with_its_value(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / ".patchit.toml").write_text(text)
    with pytest.raises(BadInputError) as caught:
        load_config(tmp_path)
    line = str(caught.value)
    assert "\n" not in line
    assert line == (
        f"{tmp_path / '.patchit.toml'}: invalid patchit config: {said}; fix or remove the file"
    )


def test_a_value_that_may_be_a_secret_is_not_repeated(tmp_path: Path) -> None:
    (tmp_path / "patchit.toml").write_text("[state]\nurl = ['postgresql://bob:s3cret@db/x']\n")
    with pytest.raises(BadInputError) as caught:
        load_deployment(tmp_path)
    assert "s3cret" not in str(caught.value)
    assert "[state] url: Input should be a valid string" in str(caught.value)
    (tmp_path / ".patchit.toml").write_text("[policy]\ndeny = ['x', 'a@b://c']\n")
    load_config(tmp_path)  # valid
    (tmp_path / ".patchit.toml").write_text("[llm]\nmodel = ['https://k:v@h']\n")
    with pytest.raises(BadInputError) as caught:
        load_config(tmp_path)
    assert "k:v@h" not in str(caught.value)


def test_a_toml_syntax_error_and_a_bad_deployment_setting(tmp_path: Path) -> None:
    (tmp_path / ".patchit.toml").write_text("[sandbox\n")
    with pytest.raises(BadInputError, match=r"invalid patchit config \(.*line 1"):
        load_config(tmp_path)
    (tmp_path / "patchit.toml").write_text("[repos]\n[stat]\nurl = 'x'\n")
    with pytest.raises(BadInputError, match=r"invalid deployment config: \[stat\]: unknown "):
        load_deployment(tmp_path)
