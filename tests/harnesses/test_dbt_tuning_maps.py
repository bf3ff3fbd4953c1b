"""`tuning_maps`: the edge maps a parse asks for without reading are built when read, and are
then what dbt's eager build makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harnesses.test_dbt_tuning import DIAMOND, on_parsed_project

pytestmark = pytest.mark.slow

_MAPS = """
import json, sys
from types import SimpleNamespace
import dbt.contracts.graph.manifest as dbt_manifest
from dbt.cli.main import dbtRunner
from dbt.parser.manifest import ManifestLoader
from patchit.harnesses.dbt import saved_parse, tuning
builds = []
edges = dbt_manifest.build_node_edges
def counted(members):  # every build of the maps, under whatever wraps it
    builds.append(1)
    return edges(members)
dbt_manifest.build_node_edges = counted
args = sys.argv[1:]
eager = dbtRunner().invoke(args).result  # dbt's own, before the tunings
eager.build_parent_and_child_maps()
dbts = len(builds)
tuning.install()  # as the worker installs them: the saved parse's first, then the maps'
saved_parse._first_maps_kept()  # again, as arming a parse does: still one of each
found = []
builds.clear()
lazy = dbtRunner().invoke(args).result
built = len(builds)
found.append([lazy.child_map == eager.child_map, lazy.parent_map == eager.parent_map])
found.append([dbts - 1, built, len(builds)])
# the deprecation check's ask, read for the deprecated model: built then, as dbt's
loader = SimpleNamespace(manifest=lazy)
builds.clear()
ManifestLoader.check_for_model_deprecations(loader)
found.append([len(builds), lazy.child_map == eager.child_map])
# an ask nothing reads is not built; a read after a node changed sees the change
builds.clear()
lazy.nodes["model.p.c"].deprecation_date = None  # no deprecated model: the check reads nothing
ManifestLoader.check_for_model_deprecations(loader)
asked = len(builds)
lazy.nodes["model.p.b"].depends_on.nodes = []
children = lazy.child_map["model.p.a"]
found.append([asked, len(builds), children])
print(json.dumps(found))
"""


def test_the_asks_nothing_reads_are_dropped_and_a_read_builds_the_maps(tmp_path: Path) -> None:
    files = {
        **DIAMOND,
        "models/c.yml": "version: 2\nmodels:\n  - name: c\n    deprecation_date: 2999-01-01\n",
    }
    parsed, counts, deprecation, after_change = on_parsed_project(tmp_path, _MAPS, files)
    assert parsed == [True, True]  # a whole parse under the tunings: dbt's maps
    dbts, built, read = counts
    # dbt's parse builds them at load, at the deprecation check and for the manifest it
    # writes; under the tunings (installed as the worker does, the saved parse's first) only
    # the deprecation check's, which reads them for the deprecated model (and the manifest is
    # not written), and reading them after builds nothing more
    assert dbts >= 3 and built == 1 and read == built, counts
    assert deprecation == [1, True]  # asked and read for the deprecated model: built once
    # asked, not read: nothing built; read after b stopped depending on a: built then
    assert after_change == [0, 1, ["model.p.c"]]
