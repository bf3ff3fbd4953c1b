"""The worker decodes the failing run's parse only when it is the file the harness copied."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchit.harnesses.dbt import saved_parse as dbt_saved_parse

pytestmark = pytest.mark.slow  # imports dbt


@pytest.fixture
def kept() -> Iterator[dict[object, object]]:
    dbt_saved_parse._kept.clear()
    yield dbt_saved_parse._kept
    dbt_saved_parse._kept.clear()


def _parse_of_a_project() -> bytes:
    """A real saved parse's bytes, as dbt writes them (an empty manifest of this dbt)."""
    from dbt.contracts.graph.manifest import Manifest, ManifestMetadata
    from dbt.parser.manifest import extended_mashumaro_encoder

    manifest = Manifest(metadata=ManifestMetadata(project_name="shop"))
    data: bytes = manifest.to_msgpack(extended_mashumaro_encoder)
    return data


def _request(path: Path, digest: str) -> dict[str, object]:
    return {"saved_parse": {"source": str(path), "sha256": digest, "root": "/r", "file": "/f"}}


def test_only_the_copy_the_harness_hashed_is_decoded(
    tmp_path: Path, kept: dict[object, object]
) -> None:
    path = tmp_path / "0.msgpack"
    data = _parse_of_a_project()
    path.write_bytes(data)
    dbt_saved_parse.preload(_request(path, "0" * 64))  # changed since the harness copied it
    assert kept == {}
    dbt_saved_parse.preload(_request(path, hashlib.sha256(data).hexdigest()))
    assert len(kept) == 1
    (manifest,) = kept.values()
    assert manifest.metadata.project_name == "shop"
    garbage = tmp_path / "1.msgpack"
    garbage.write_bytes(b"not msgpack")
    dbt_saved_parse.preload(_request(garbage, hashlib.sha256(b"not msgpack").hexdigest()))
    assert list(kept.values()) == [manifest]  # a file dbt cannot decode is left to dbt
