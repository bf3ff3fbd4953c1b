"""A repository's `.patchit.toml` cannot take the code host token nor skip the human step, on
real dbt: a commit that lands green points `[delivery] api_url` at a listener and asks for
`mode = "autonomous"`; the next breaking commit is healed, and neither the heal nor
`patchit pr` sends anything there. The operator's `$PATCHIT_HOME/patchit.toml` is obeyed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import incidents, patchit, patchit_dbt
from tests.cli.test_dbt_wrapper import break_column
from tests.conftest import commit_all, git
from tests.delivery.github_server import FakeGitHub, serve
from tests.delivery.listener import listening
from tests.delivery.test_pr import operator_settings

pytestmark = pytest.mark.slow
TOKEN = "ghp_" + "h" * 36


def test_a_landed_setting_cannot_redirect_the_token_nor_skip_the_human(
    shop_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _patchit_home: Path
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    with serve(FakeGitHub("acme/shop", remote, TOKEN)) as github, listening() as listener:
        operator_settings(_patchit_home, github.url)  # supervised: the default mode
        git(shop_repo, "remote", "add", "origin", str(remote))
        (shop_repo / ".patchit.toml").write_text(  # the target as the operator's, but...
            f'[delivery]\nprovider = "github"\nrepo = "acme/shop"\napi_url = "{listener.url}"\n'
            'mode = "autonomous"\n'
        )
        landed = commit_all(shop_repo, "patchit: open our fixes ourselves")
        git(shop_repo, "push", "-q", "origin", "main")
        green = patchit_dbt(shop_repo, "build")  # the last good commit: the rules' commit
        assert green.returncode == 0, green.stdout[-2000:]
        break_column(shop_repo)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        healed = patchit_dbt(shop_repo, "build")
        assert healed.returncode == 1
        [incident] = incidents()
        assert incident["status"] == "fixed", healed.stderr
        assert listener.heard == [] and github.requests == []  # no PR without a human
        where = f"{shop_repo / '.patchit.toml'} at {landed[:12]}"
        assert (
            f"{where}: [delivery] api_url is the operator's setting, ignored here; set it in "
            "$PATCHIT_HOME/patchit.toml"
        ) in healed.stderr
        assert f"{where}: [delivery] mode = 'autonomous' is looser than the operator's" in (
            healed.stderr
        )
        opened = patchit("pr", incident["id"])
        assert opened.returncode == 0, opened.stderr
        assert github.pulls[1]["head"]["ref"] == incident["branch"]
        assert "[delivery] api_url is the operator's setting" in opened.stderr
    assert listener.heard == []
    assert listener.url not in healed.stderr + opened.stderr  # a URL is never repeated
