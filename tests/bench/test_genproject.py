"""The generated project: layered, deterministic, and breakable with a column typo."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchit.bench.genproject import TYPO_TO, break_model, generate_project, layer_sizes


def test_layers_add_up_and_refs_point_upstream(tmp_path: Path) -> None:
    project = generate_project(tmp_path / "p", 40)
    assert sum(layer_sizes(40)) == 40 == len(project.models)
    assert [len(project.layers[k]) for k in ("staging", "intermediate", "marts")] == [8, 22, 10]
    seen: set[str] = set()
    for model in project.models:
        sql = (project.root / project.model_path(model)).read_text()
        refs = set(re.findall(r"ref\('(\w+)'\)", sql))
        upstream = refs - {p.stem for p in (project.root / "seeds").glob("*.csv")}
        assert upstream == set(project.parents[model]), model
        assert upstream <= seen, f"{model} refs a model defined after it"
        seen.add(model)
    schema = (project.root / "models" / "marts" / "schema.yml").read_text()
    assert schema.count("data_tests:") == 10
    assert project.n_tests > 40


def test_same_seed_same_project(tmp_path: Path) -> None:
    first = generate_project(tmp_path / "a", 20)
    second = generate_project(tmp_path / "b", 20)
    assert first.parents == second.parents
    assert first.middle_model() == second.middle_model()


def test_break_model_puts_in_one_typo(tmp_path: Path) -> None:
    project = generate_project(tmp_path / "p", 12)
    model = project.middle_model()
    assert model in project.layers["intermediate"]
    assert project.descendants(model)
    good, broken = break_model(project, model)
    assert broken.count(TYPO_TO) == 1 and TYPO_TO not in good
    assert (project.root / project.model_path(model)).read_text() == broken
    with pytest.raises(ValueError, match="intermediate"):
        break_model(project, project.layers["marts"][0])
    with pytest.raises(ValueError, match="at least 6"):
        layer_sizes(5)
