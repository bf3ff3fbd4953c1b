"""Find the git repository holding a file and its HEAD commit by reading `.git`, no subprocess.

Used in the Airflow task process, where forking `git` for every failed task would cost more
than the whole callback may: standard library only, and never raises (None when unknown).
"""

from __future__ import annotations

import re
from pathlib import Path

_SHA = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")


def find_git_root(start: str | Path) -> Path | None:
    """The nearest directory at or above `start` holding `.git` (a directory or, for a
    worktree or submodule, a file)."""
    try:
        path = Path(start).resolve()
    except (OSError, RuntimeError):
        return None
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def git_dir_of(root: Path) -> Path | None:
    """The git directory of a work tree: `.git` itself, or where a `gitdir:` file points."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text.split(":", 1)[1].strip())
    return target if target.is_absolute() else (root / target).resolve()


def _common_dir(git_dir: Path) -> Path:
    """A linked worktree keeps its refs in the main repository's git dir (`commondir`)."""
    try:
        rel = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return git_dir
    common = Path(rel)
    return common if common.is_absolute() else (git_dir / common).resolve()


def _resolve_ref(ref: str, git_dir: Path, depth: int = 0) -> str | None:
    if depth > 5:
        return None
    for base in (git_dir, _common_dir(git_dir)):
        try:
            value = (base / ref).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if value.startswith("ref:"):
            return _resolve_ref(value[4:].strip(), git_dir, depth + 1)
        if _SHA.match(value):
            return value
    try:
        packed = (_common_dir(git_dir) / "packed-refs").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in packed.splitlines():
        parts = line.split(" ", 1)
        if len(parts) == 2 and parts[1].strip() == ref and _SHA.match(parts[0]):
            return parts[0]
    return None


def read_head(root: Path) -> str | None:
    """The commit HEAD points at (branch, detached, packed ref); None for an unborn branch."""
    git_dir = git_dir_of(root)
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if _SHA.match(head):
        return head
    if head.startswith("ref:"):
        return _resolve_ref(head[4:].strip(), git_dir)
    return None


def read_branch(root: Path) -> str | None:
    git_dir = git_dir_of(root)
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip() if git_dir else ""
    except (OSError, UnicodeDecodeError):
        return None
    prefix = "ref: refs/heads/"
    return head[len(prefix) :] if head.startswith(prefix) else None


_SECTION = re.compile(r'^\s*\[\s*remote\s+"([^"]+)"\s*\]\s*$')
_URL = re.compile(r"^\s*url\s*=\s*(.+?)\s*$", re.IGNORECASE)
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")  # C:\dags: a Windows path, not host "C"
_SCP = re.compile(r"^(?:[^@/\s]+@)?([^:/\s]+):(?!//)(.+)$")


def read_remote_url(root: Path) -> str | None:
    """The normalised URL of the checkout's `origin` remote (else its first remote); None
    without one. Read from the git config file, no subprocess."""
    git_dir = git_dir_of(root)
    if git_dir is None:
        return None
    try:
        lines = (_common_dir(git_dir) / "config").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    urls: dict[str, str] = {}
    remote: str | None = None
    for line in lines:
        if line.lstrip().startswith("["):
            found = _SECTION.match(line)
            remote = found.group(1) if found else None
        elif remote is not None and (url := _URL.match(line)) and remote not in urls:
            urls[remote] = url.group(1).strip('"')
    raw = urls.get("origin") or next(iter(urls.values()), None)
    return normalise_remote(raw) if raw else None


def normalise_remote(url: str) -> str | None:
    """One name for every spelling of a repository's remote: `git@github.com:Acme/dags.git`,
    `https://user@github.com/Acme/dags` and `ssh://git@github.com:22/Acme/dags.git` are all
    `github.com/Acme/dags` (the host lowercased; credentials, port and `.git` dropped).

    None for an empty URL and for a path remote (`../up`, `/srv/git/dags.git`, `file://...`):
    a path names different repositories from different places and hosts (every checkout
    whose origin is `../up` is not one repository), so those checkouts are told apart by
    their own path, as without a remote."""
    url = url.strip()
    if "://" in url:
        scheme, _, rest = url.partition("://")
        if scheme.lower() == "file":
            return None
        host, _, path = rest.partition("/")
        host = host.rpartition("@")[2].split(":")[0].lower()
    elif (scp := _SCP.match(url)) and not url.startswith(("/", ".", "~")) and not _DRIVE.match(url):
        host, path = scp.group(1).lower(), scp.group(2)
    else:
        return None  # empty, or a path
    if not host:
        return None
    path = path.strip("/").removesuffix(".git").strip("/")
    return f"{host}/{path}" if path else host
