"""Where the ETL reads its landing files and writes its reports."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LANDING_DIR = Path(os.environ.get("ETL_LANDING_DIR", REPO_ROOT / "data" / "landing"))
OUTPUT_DIR = Path(os.environ.get("ETL_OUTPUT_DIR", REPO_ROOT / "output"))


def read_rows(name: str) -> list[dict[str, str]]:
    """The rows of a landing CSV file as dicts of strings."""
    with (LANDING_DIR / name).open(newline="") as fh:
        return list(csv.DictReader(fh))


def write_json(relative: str, payload: object) -> str:
    """Write `payload` as sorted, indented JSON under OUTPUT_DIR; the path written."""
    path = OUTPUT_DIR / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return str(path)
