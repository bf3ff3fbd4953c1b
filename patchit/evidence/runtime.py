"""Did what runs the project change since its last good build?

A green `patchit dbt -- build` keeps what ran it with the project's last good commit
(`dbt=1.11.16 duckdb=1.11.1`, from dbt's `AdapterRegistered` event); a failure's event
carries the same for its run (`context["dbt_runtime"]`). When they differ, a failure of code
the change did not touch (an adapter refusing a config the project always had) is the
environment's: `runtime_change` says what moved, and the classifier calls it `env_mismatch`.
"""

from __future__ import annotations

from patchit.events.model import UniversalFailureEvent


def parse_runtime(text: str | None) -> dict[str, str]:
    """`dbt=1.11.16 duckdb=1.11.1` -> {"dbt": "1.11.16", "duckdb": "1.11.1"}."""
    found: dict[str, str] = {}
    for part in (text or "").split():
        name, sep, version = part.partition("=")
        if sep and name and version:
            found[name] = version
    return found


def runtime_change(last_good: str | None, event: UniversalFailureEvent) -> str:
    """`duckdb 1.10.0 -> 1.11.1` (every package that moved, `; `-joined); '' when nothing
    moved or either side is unknown."""
    now = event.context.get("dbt_runtime")
    before, after = parse_runtime(last_good), parse_runtime(now if isinstance(now, str) else "")
    if not before or not after:
        return ""
    moved = [f"{name} {before[name]} -> {after[name]}" for name in after
             if name in before and before[name] != after[name]]  # fmt: skip
    gone = [f"adapter {name} -> {', '.join(sorted(set(after) - set(before)))}"
            for name in before if name not in after and name != "dbt"]  # fmt: skip
    return "; ".join(moved + gone)


def runtime_pins(change: str) -> str:
    """`pip install 'dbt-duckdb==1.10.0'` for each package `runtime_change` says moved."""
    pins = []
    for part in change.split("; "):
        name, _, versions = part.partition(" ")
        old = versions.split(" -> ", 1)[0]
        if name and old and name != "adapter":
            pins.append(f"'dbt-core=={old}'" if name == "dbt" else f"'dbt-{name}=={old}'")
    return f"pip install {' '.join(pins)}" if pins else "the previous versions"
