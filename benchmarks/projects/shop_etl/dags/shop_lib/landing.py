"""Where the shop's DAGs read their landing files and write staged and published JSON.

Landing files arrive per day (`data/landing/<day>/<source>.csv`); everything the DAGs write
goes under `output/` (`staging/` between tasks, `published/` for consumers, `archive/`).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LANDING_DIR = Path(os.environ.get("SHOP_LANDING_DIR", REPO_ROOT / "data" / "landing"))
OUTPUT_DIR = Path(os.environ.get("SHOP_OUTPUT_DIR", REPO_ROOT / "output"))


def read_rows(source: str, day: str) -> list[dict[str, str]]:
    """The rows of one day's landing file of `source`, as dicts of strings."""
    with (LANDING_DIR / day / f"{source}.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def stage(source: str, day: str, rows: list[dict[str, object]]) -> str:
    """Keep a task's rows for the next task; the path written."""
    return _write(OUTPUT_DIR / "staging" / day / f"{source}.json", rows)


def staged(source: str, day: str) -> list[dict[str, object]]:
    """What an upstream task staged for `day`."""
    rows = json.loads((OUTPUT_DIR / "staging" / day / f"{source}.json").read_text())
    assert isinstance(rows, list)
    return rows


def publish(name: str, day: str, payload: object) -> str:
    """Write a day's result for consumers; the path written."""
    return _write(OUTPUT_DIR / "published" / day / f"{name}.json", payload)


def _write(path: Path, payload: object) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return str(path)
