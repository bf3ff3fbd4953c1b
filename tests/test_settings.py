"""Whose settings a heal obeys: the operator's `$PATCHIT_HOME/patchit.toml`, narrowed by the
repository's `.patchit.toml` as of the last good commit (real git, real SQLite memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchit.config import PatchitConfig
from patchit.errors import BadInputError
from patchit.events.model import FailureSource, UniversalFailureEvent
from patchit.loop.context import Context
from patchit.memory import Memory
from patchit.policy.settings import (
    merge_settings,
    narrow,
    operator_config,
    project_key,
    rules_commit,
    settings_in_worktree,
)
from tests.conftest import commit_all, git

HOSTILE = "http://127.0.0.1:9/collect"


def _merged(operator: dict[str, object], repo: dict[str, object]) -> tuple[PatchitConfig, str]:
    settings = merge_settings(PatchitConfig.model_validate(operator), repo, "repo/.patchit.toml")
    return settings.config, "\n".join(settings.refused)


def test_a_repository_cannot_say_where_the_token_goes() -> None:
    config, said = _merged(
        {"delivery": {"provider": "github", "repo": "acme/shop"}},
        {"delivery": {"api_url": HOSTILE, "mode": "autonomous", "repo": "evil/x",
                      "remote": "upstream", "base": "dev"}},
    )  # fmt: skip
    delivery = config.delivery
    assert (delivery.api_url, delivery.mode, delivery.repo, delivery.remote) == (
        "https://api.github.com", "supervised", "acme/shop", "origin",
    )  # fmt: skip
    assert delivery.base == "dev"  # not an authority: the repository's to say
    lines = said.splitlines()
    assert len(lines) == 4
    assert lines[0] == (
        "repo/.patchit.toml: [delivery] api_url is the operator's setting, ignored here; "
        "set it in $PATCHIT_HOME/patchit.toml"
    )
    assert "[delivery] mode = 'autonomous' is looser than the operator's 'supervised'" in said
    assert HOSTILE not in said  # a URL may carry a secret: never repeated


@pytest.mark.parametrize(
    ("section", "key", "env"),
    [("notify", "webhook_url", "PATCHIT_WEBHOOK_URL"),
     ("airflow", "api_url", "PATCHIT_AIRFLOW_API_URL"),
     ("llm", "base_url", "ANTHROPIC_BASE_URL")],
)  # fmt: skip
def test_notification_airflow_and_model_urls_are_the_operators(
    section: str, key: str, env: str
) -> None:
    config, said = _merged({}, {section: {key: HOSTILE}})
    assert getattr(getattr(config, section), key) is None
    assert f"[{section}] {key} is the operator's setting" in said
    assert said.endswith(f"set it in $PATCHIT_HOME/patchit.toml or {env}")


def test_the_operators_own_value_repeated_is_accepted_quietly() -> None:
    operator = {"delivery": {"provider": "github", "repo": "acme/shop", "api_url": HOSTILE}}
    config, said = _merged(operator, {"delivery": {"provider": "github", "repo": "acme/shop"}})
    assert said == "" and config.delivery.api_url == HOSTILE


def test_policy_limits_may_narrow_never_loosen() -> None:
    config, said = _merged({}, {"policy": {"max_files": 1, "max_lines": 500}})
    assert (config.policy.max_files, config.policy.max_lines) == (1, 40)
    assert said == (
        "repo/.patchit.toml: [policy] max_lines = 500 is looser than the operator's 40: a "
        "repository may only narrow it; set it in $PATCHIT_HOME/patchit.toml"
    )
    config, said = _merged({"policy": {"max_files": 8}}, {"policy": {"max_files": 5}})
    assert config.policy.max_files == 5 and said == ""
    config, said = _merged({}, {"policy": {"max_files": 10}})
    assert config.policy.max_files == 3 and "[policy] max_files = 10 is looser" in said


def test_deny_and_protected_globs_are_added_never_dropped() -> None:
    config, said = _merged({}, {"policy": {"deny": ["models/marts/*"], "protected": ["x.py"]}})
    assert "models/marts/*" in config.policy.deny and "*.env*" in config.policy.deny
    assert "x.py" in config.policy.protected and ".patchit.toml" in config.policy.protected
    assert "[policy] deny leaves out '*.env*'" in said and "(kept)" in said
    assert "[policy] protected leaves out '.github/**'" in said


def test_allow_globs_stay_inside_the_operators() -> None:
    config, said = _merged({}, {"policy": {"allow": ["models/*"]}})
    assert config.policy.allow == ["models/*"] and said == ""
    operator = {"policy": {"allow": ["models/*", "dags/**"]}}
    config, said = _merged(operator, {"policy": {"allow": ["models/staging/*", "dags/x.py"]}})
    assert config.policy.allow == ["models/staging/*", "dags/x.py"] and said == ""
    config, said = _merged(operator, {"policy": {"allow": ["*"]}})
    assert config.policy.allow == ["models/*", "dags/**"]
    assert "[policy] allow '*' reaches outside the operator's allow globs" in said
    config, said = _merged(operator, {"policy": {"allow": ["models/a.sql", "setup.py"]}})
    assert config.policy.allow == ["models/a.sql"] and "'setup.py' reaches outside" in said


def test_a_stricter_mode_and_threshold_are_the_repositorys_to_ask() -> None:
    operator = {"delivery": {"mode": "autonomous", "min_confidence": 0.5}}
    config, said = _merged(operator, {"delivery": {"mode": "supervised", "min_confidence": 0.9}})
    assert (config.delivery.mode, config.delivery.min_confidence, said) == ("supervised", 0.9, "")
    looser = {"delivery": {"mode": "autonomous", "min_confidence": 0.1}}
    config, said = _merged({"delivery": {"mode": "threshold"}}, looser)
    assert (config.delivery.mode, config.delivery.min_confidence) == ("threshold", 0.8)
    assert "[delivery] mode = 'autonomous'" in said and "min_confidence = 0.1" in said


def test_free_settings_are_the_repositorys(_patchit_home: Path) -> None:
    repo = {"sandbox": {"memory_mb": 8192}, "loop": {"max_attempts": 9}}
    config, said = _merged({"sandbox": {"memory_mb": 512}}, repo)
    assert (config.sandbox.memory_mb, config.loop.max_attempts, said) == (8192, 9, "")


def test_the_sandbox_may_only_be_narrowed_and_the_postgres_role_is_the_operators() -> None:
    """A breaking commit must not loosen the sandbox its own code runs in, nor name the role
    its SQL runs as on a shared database."""
    looser = {"sandbox": {"isolation": "subprocess", "network": True, "pg_clone": "auto",
                          "pg_clone_limit_mb": 4096, "pg_role": "admin"}}  # fmt: skip
    operator = {"sandbox": {"pg_clone": "never", "pg_role": "patchit_sandbox"}}
    config, said = _merged(operator, looser)
    box = config.sandbox
    assert (box.isolation, box.network, box.pg_clone, box.pg_clone_limit_mb, box.pg_role) == (
        "auto", False, "never", 256, "patchit_sandbox",
    )  # fmt: skip
    assert len(said.splitlines()) == 5, said
    assert "[sandbox] isolation = 'subprocess' is looser than the operator's 'auto'" in said
    assert "[sandbox] network = True is looser than the operator's False" in said
    assert "[sandbox] pg_role is the operator's setting, ignored here" in said
    stricter = {"sandbox": {"isolation": "bubblewrap", "pg_clone": "never",
                            "pg_clone_limit_mb": 16, "pg_role": "patchit_sandbox"}}  # fmt: skip
    config, said = _merged({"sandbox": {"network": True, "pg_role": "patchit_sandbox"}}, stricter)
    box = config.sandbox
    assert (box.isolation, box.pg_clone, box.pg_clone_limit_mb, box.pg_role, said) == (
        "bubblewrap", "never", 16, "patchit_sandbox", "",
    )  # fmt: skip
    config, said = _merged({"sandbox": {"network": True}}, {"sandbox": {"network": False}})
    assert (config.sandbox.network, said) == (False, "")


def test_a_bad_repository_setting_is_one_line_naming_the_file() -> None:
    with pytest.raises(BadInputError) as caught:
        merge_settings(PatchitConfig(), {"delivery": {"mode": "yolo"}}, "repo/.patchit.toml at a")
    assert str(caught.value).startswith("repo/.patchit.toml at a: invalid patchit config: ")
    assert "\n" not in str(caught.value)


def test_the_operators_file_sets_any_section(_patchit_home: Path) -> None:
    _patchit_home.mkdir(parents=True)
    (_patchit_home / "patchit.toml").write_text(
        f'[state]\nurl = ""\n[delivery]\napi_url = "{HOSTILE}"\nmode = "autonomous"\n'
        '[policy]\nmax_files = 9\n[repos]\n"github.com/a/b" = "/srv/b"\n'
    )
    config = operator_config(_patchit_home)
    assert (config.delivery.api_url, config.delivery.mode) == (HOSTILE, "autonomous")
    assert config.policy.max_files == 9


# -- the commit the rules are read at ---------------------------------------------------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "m.sql").write_text("select 1\n")
    commit_all(repo, "first")
    return repo


def _hostile_commit(repo: Path) -> str:
    (repo / ".patchit.toml").write_text(
        f'[delivery]\napi_url = "{HOSTILE}"\nmode = "autonomous"\n[policy]\nmax_files = 50\n'
    )
    (repo / "m.sql").write_text("select amout\n")
    return commit_all(repo, "break it, and relax the rules it is judged by")


def test_the_breaking_commits_file_never_judges_it(repo: Path, _patchit_home: Path) -> None:
    (repo / ".patchit.toml").write_text("[policy]\nmax_files = 1\n")
    good = commit_all(repo, "narrow the policy")
    failing = _hostile_commit(repo)
    (repo / ".patchit.toml").write_text('[delivery]\nmode = "autonomous"\n')  # the working tree
    assert rules_commit(repo, None, failing) == good  # the failing commit's parent
    settings = narrow(operator_config(_patchit_home), repo, rules_commit(repo, None, failing))
    delivery = settings.config.delivery
    assert (delivery.api_url, delivery.mode, settings.config.policy.max_files) == (
        "https://api.github.com", "supervised", 1,
    )  # fmt: skip
    assert settings.refused == ()


def test_the_last_good_commit_wins_over_the_parent(repo: Path, _patchit_home: Path) -> None:
    (repo / ".patchit.toml").write_text("[policy]\nmax_lines = 10\n")
    good = commit_all(repo, "narrow")
    (repo / ".patchit.toml").write_text("[policy]\nmax_lines = 30\n")
    commit_all(repo, "a commit never run green")
    failing = _hostile_commit(repo)
    assert rules_commit(repo, good, failing) == good
    config = narrow(PatchitConfig(), repo, rules_commit(repo, good, failing)).config
    assert config.policy.max_lines == 10
    assert rules_commit(repo, "0" * 40, failing) == git(repo, "rev-parse", f"{failing}^")
    assert rules_commit(repo, "--output=/tmp/x", failing) == git(repo, "rev-parse", f"{failing}^")


def test_a_root_commit_has_no_rules_but_the_operators(repo: Path) -> None:
    root = git(repo, "rev-parse", "HEAD")
    assert rules_commit(repo, None, root) is None
    assert narrow(PatchitConfig(), repo, None).config == PatchitConfig()


def _failing_event(repo: Path, failing: str) -> UniversalFailureEvent:
    return UniversalFailureEvent(
        source=FailureSource.DBT, pipeline_id="shop", unit_id="model.shop.m",
        repo_path=str(repo), commit=failing, error_type="Binder Error", error_message="amout",
    )  # fmt: skip


def test_a_failure_is_judged_by_its_projects_last_good_commit(
    repo: Path, _patchit_home: Path
) -> None:
    (repo / ".patchit.toml").write_text(f'[delivery]\napi_url = "{HOSTILE}"\n')
    good = commit_all(repo, "the hostile setting lands green")
    (repo / "m.sql").write_text("select amout\n")
    failing = commit_all(repo, "break")
    event = _failing_event(repo, failing)
    said: list[str] = []
    with Memory.open(_patchit_home) as memory:
        memory.record_last_good(project_key(event), good)
        ctx = Context(_patchit_home, memory, PatchitConfig(), [], [], say=said.append)
        judged = ctx.judged_by(event)
    assert judged.config.delivery.api_url == "https://api.github.com"
    assert said == [
        f"{repo / '.patchit.toml'} at {good[:12]}: [delivery] api_url is the operator's "
        "setting, ignored here; set it in $PATCHIT_HOME/patchit.toml"
    ]


def test_a_green_run_on_another_branch_does_not_judge_this_line(
    repo: Path, _patchit_home: Path
) -> None:
    """Memory's last good commit on a branch the failing commit does not descend from says
    nothing about this line: the rules are the failing commit's parent's (`Context.last_good`,
    the one accessor every caller but the evidence takes)."""
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / ".patchit.toml").write_text("[policy]\nmax_lines = 7\n")
    feature = commit_all(repo, "a feature branch, run green")
    git(repo, "checkout", "-q", "-")
    (repo / ".patchit.toml").write_text("[policy]\nmax_lines = 20\n")
    parent = commit_all(repo, "main's own rules")
    (repo / "m.sql").write_text("select amout\n")
    failing = commit_all(repo, "break")
    event = _failing_event(repo, failing)
    with Memory.open(_patchit_home) as memory:
        ctx = Context(_patchit_home, memory, PatchitConfig(), [], [])
        memory.record_last_good(project_key(event), feature)
        assert ctx.last_good(event) is None
        assert ctx.judged_by(event).config.policy.max_lines == 20  # `parent`'s, not 7
        memory.record_last_good(project_key(event), base)  # an ancestor: kept
        assert ctx.last_good(event) == base != parent


def test_doctor_reads_the_working_tree(repo: Path, _patchit_home: Path) -> None:
    (repo / ".patchit.toml").write_text('[policy]\nmax_files = 2\n[delivery]\nmode = "threshold"\n')
    settings = settings_in_worktree(_patchit_home, repo)
    assert settings.config.policy.max_files == 2 and settings.config.delivery.mode == "supervised"
    assert len(settings.refused) == 1


def test_the_model_budget_may_only_shrink() -> None:
    config, said = _merged({}, {"llm": {"max_cost_per_day_usd": 5.0, "max_tokens_per_day": 10**9}})
    assert config.llm.max_cost_per_day_usd == 5.0
    assert config.llm.max_tokens_per_day == PatchitConfig().llm.max_tokens_per_day
    assert "[llm] max_tokens_per_day = 1000000000 is looser" in said


def test_an_invalid_file_at_the_rules_commit_is_said_and_left_out(repo: Path) -> None:
    (repo / ".patchit.toml").write_text('[delivery]\nmode = "yolo"\n[policy]\nmax_files = 1\n')
    good = commit_all(repo, "a bad setting")
    settings = narrow(PatchitConfig(), repo, good)
    assert settings.config == PatchitConfig()  # the heal goes on, under the operator's
    [line] = settings.refused
    assert line.startswith(f"{repo / '.patchit.toml'} at {good[:12]}: invalid patchit config: ")
    assert line.endswith("(ignored: the operator's settings apply)")
    (repo / ".patchit.toml").write_text("[policy\n")
    settings = narrow(PatchitConfig(), repo, commit_all(repo, "not TOML"))
    assert "invalid patchit config (" in settings.refused[0]


def test_a_repository_may_name_itself_as_the_delivery_target(repo: Path) -> None:
    git(repo, "remote", "add", "origin", "git@github.com:acme/shop.git")
    operator = PatchitConfig.model_validate({"delivery": {"provider": "github"}})
    (repo / ".patchit.toml").write_text('[delivery]\nrepo = "acme/shop"\n')
    settings = narrow(operator, repo, commit_all(repo, "name itself"))
    assert settings.config.delivery.repo == "acme/shop" and settings.refused == ()
    (repo / ".patchit.toml").write_text('[delivery]\nrepo = "acme/secrets"\n')
    settings = narrow(operator, repo, commit_all(repo, "name another"))
    assert settings.config.delivery.repo is None
    assert "[delivery] repo is the operator's setting" in settings.refused[0]
    named = PatchitConfig.model_validate({"delivery": {"repo": "acme/other"}})
    (repo / ".patchit.toml").write_text('[delivery]\nrepo = "acme/shop"\n')
    settings = narrow(named, repo, commit_all(repo, "name itself, the operator named another"))
    assert settings.config.delivery.repo == "acme/other" and len(settings.refused) == 1
