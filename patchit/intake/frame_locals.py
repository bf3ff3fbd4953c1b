"""Runtime evidence: the failing frame's locals as names and types, read from a live traceback.

A KeyError on a row read from a CSV file, a JSON payload or an XCom names a key that exists
nowhere in the code: only the running task knows the row's keys. At failure time the
exception's traceback still holds the frames, so the innermost frame running the repository's
own code is summarised here, for the Python fix-its to see real candidates.

What is recorded, per local of that frame (`summarise_frame`):

- the type's name (`dict`, `types.SimpleNamespace`, `etl_lib.money.Invoice`);
- a mapping's string keys, an object's attribute names (instance `__dict__`, slots, namedtuple
  and dataclass fields, public names of its repository classes) and a function's parameter
  names, each with the type name of its value;
- one level further for values that hold names themselves (`payload["data"]`, `rows[0]`);
- the length of a container or a string, and the value itself only for `None`, `True` and
  `False`.

Never a value: strings, numbers, dates and bytes are data (a customer's name, an amount, an
account number, a token), and no pattern tells a safe one from a secret. A name is kept only
when it reads like a key or an attribute (one line, at most MAX_NAME_CHARS, no `@`, no URL)
and not like a credential (`AKIA...`, `ghp_...`, a long run of letters and digits); the
others are only counted (`withheld`). A local whose name says it is a secret (`password`,
`api_key`, `token`) is recorded by its type alone. Keys are names, but a dict keyed by data
(customer -> count) shows some of that data: at most MAX_NAMES of them, the price of seeing a
CSV row's header. Caps bound the work and the event: MAX_LOCALS locals, MAX_NAMES names per
value, MAX_DEPTH levels, MAX_TOTAL_NAMES names in all; a capped value says `truncated`, and
the fix-its do not guess from a list cut short.

Reading must run no user code and never block: types are taken with `type()`, mappings read
through `dict`'s own methods, instance dicts only through the standard descriptor, and no
property, `__getattr__`, `__repr__` or `__len__` of a user class is called. Standard library
only: the Airflow failure callback imports this module.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import types
from collections.abc import Iterable, Iterator
from typing import Any

MAX_LOCALS = 30
MAX_NAMES = 50
MAX_DEPTH = 2
MAX_TOTAL_NAMES = 400
MAX_NAME_CHARS = 64
MAX_CLASSES = 6  # of an object's MRO read for class-level names

_NOT_REPO_PARTS = {"site-packages", "dist-packages", ".venv", "venv", ".tox", "__pypackages__"}
# A local whose name says it holds a secret is recorded by its type alone.
SECRET_NAME = re.compile(
    r"(?i)(?:^|[_.-])(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|"
    r"private[_-]?key|auth|authorization|credentials?|creds?|cookie|session[_-]?key|dsn)s?(?:$|[_.-])"
)
# Names that are credentials rather than identifiers.
_CREDENTIAL = re.compile(
    r"(?:AKIA|ASIA)[0-9A-Z]{16}|sk-|gh[pousr]_|github_pat_|xox[abprs]-|eyJ[A-Za-z0-9_-]{10,}"
)
_TOKEN_LIKE = re.compile(r"^[A-Za-z0-9+/=-]{20,}$")
_NO_NAMES = (str, bytes, bytearray, int, float, complex, set, frozenset, type, types.ModuleType)
_SIZED = (str, bytes, bytearray, list, tuple, dict, set, frozenset)
_STANDARD_DICT_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)


def is_secret_name(name: str) -> bool:
    return SECRET_NAME.search(name) is not None


def safe_name(name: object) -> str | None:
    """`name` when it reads like a key or an attribute, None for data or a credential."""
    if type(name) is not str:
        return None
    text: str = name
    if not text or len(text) > MAX_NAME_CHARS or not text.isprintable():
        return None
    if "@" in text or "://" in text or _CREDENTIAL.search(text):
        return None
    # a hash, a token or a UUID without dashes: long, no underscore, digits and letters
    if _TOKEN_LIKE.match(text) and any(c.isdigit() for c in text):
        return None
    return text


def type_name(value: object) -> str:
    """`dict`, `types.SimpleNamespace`, `etl_lib.money.Invoice`: builtins unqualified."""
    cls = type(value)
    try:  # type's own descriptors: a metaclass cannot intercept them
        module = type.__dict__["__module__"].__get__(cls)
        qualname = type.__dict__["__qualname__"].__get__(cls)
    except Exception:
        return "?"
    if type(qualname) is not str:
        return "?"
    return qualname if type(module) is not str or module == "builtins" else f"{module}.{qualname}"


def _class_dict(cls: type) -> Any:
    """A class's own namespace, read without its metaclass's help."""
    try:
        return type.__dict__["__dict__"].__get__(cls)
    except Exception:
        return {}


def _mro(cls: type) -> tuple[type, ...]:
    """A class's MRO, read without its metaclass's help."""
    try:
        found = type.__dict__["__mro__"].__get__(cls)
    except Exception:
        return ()
    return found if type(found) is tuple else ()


def _is(value: object, kinds: type | tuple[type, ...]) -> bool:
    """isinstance without consulting a user-defined `__class__`."""
    return issubclass(type(value), kinds)


class _Capture:
    """Names left to record across the frame, and which classes are the repository's."""

    def __init__(self, repo_root: str | None) -> None:
        self.names_left = MAX_TOTAL_NAMES
        self.repo_root = repo_root
        self._repo_modules: dict[str, bool] = {}

    def take(self) -> bool:
        if self.names_left <= 0:
            return False
        self.names_left -= 1
        return True

    def is_repo_class(self, cls: type) -> bool:
        module = _class_dict(cls).get("__module__")
        if type(module) is not str or self.repo_root is None:
            return False
        if module not in self._repo_modules:
            path = _module_file(sys.modules.get(module))
            self._repo_modules[module] = type(path) is str and in_repo(path, self.repo_root)
        return self._repo_modules[module]

    # -- values ---------------------------------------------------------------------------

    def value(self, value: Any, depth: int, secret: bool = False) -> dict[str, Any]:
        """One value as names and types (see the module docstring); JSON-ready."""
        cls = type(value)
        summary: dict[str, Any] = {"type": type_name(value)}
        if value is None or cls is bool:
            summary["value"] = repr(value)
            return summary
        if issubclass(cls, _SIZED) and not (secret and issubclass(cls, str | bytes | bytearray)):
            summary["size"] = _size(value)
        if secret or depth >= MAX_DEPTH or issubclass(cls, _NO_NAMES):
            return summary
        if (params := _parameters(value)) is not None:
            summary["params"] = [p for p in params if safe_name(p)][:MAX_NAMES]
        elif issubclass(cls, dict):
            self._names(summary, "keys", dict.items(value), depth)
        elif issubclass(cls, list | tuple) and type(_class_dict(cls).get("_fields")) is not tuple:
            first = _first(value)
            if first is not None and _holds_names(first):
                summary["item"] = self.value(first, depth + 1)
        else:
            self._names(summary, "attrs", self._attributes(value), depth)
        return summary

    def _names(
        self, summary: dict[str, Any], field: str, items: Iterable[tuple[object, object]],
        depth: int,
    ) -> None:  # fmt: skip
        """`summary[field]`: name -> type name; `inner`: the values that hold names."""
        names: dict[str, str] = {}
        inner: dict[str, Any] = {}
        withheld = 0
        for raw, child in items:
            name = safe_name(raw)
            if name is None:
                withheld += 1
                continue
            if name in names:
                continue
            if len(names) >= MAX_NAMES or not self.take():
                summary["truncated"] = True
                break
            names[name] = type_name(child)
            if depth + 1 < MAX_DEPTH and _holds_names(child) and not is_secret_name(name):
                inner[name] = self.value(child, depth + 1)
        summary[field] = names
        if inner:
            summary["inner"] = inner
        if withheld:
            summary["withheld"] = withheld

    def _attributes(self, value: Any) -> Iterator[tuple[object, object]]:
        """(attribute, its value or class-level entry) of an object, running none of its code."""
        cls = type(value)
        fields = _class_dict(cls).get("_fields")
        if issubclass(cls, tuple) and type(fields) is tuple:  # a namedtuple
            for index, name in enumerate(fields[: tuple.__len__(value)]):
                yield name, tuple.__getitem__(value, index)
        instance = _instance_dict(value)
        if instance is not None:
            yield from itertools.islice(dict.items(instance), 4 * MAX_NAMES)
        for base in _mro(cls)[:MAX_CLASSES]:
            if not self.is_repo_class(base):
                continue
            members = _class_dict(base)
            for name in itertools.islice(members, 4 * MAX_NAMES):
                if type(name) is str and not name.startswith("_"):
                    yield name, members.get(name)
            slots = members.get("__slots__")
            for name in (slots,) if type(slots) is str else slots if type(slots) is tuple else ():
                if type(name) is str and not name.startswith("__"):
                    yield name, None


def _module_file(module: object) -> object:
    if not issubclass(type(module), types.ModuleType):
        return None  # sys.modules may hold anything
    try:
        namespace = _class_dict(types.ModuleType)["__dict__"].__get__(module)
    except Exception:
        return None
    return namespace.get("__file__") if type(namespace) is dict else None


def _size(value: Any) -> int:
    for base in _SIZED:
        if issubclass(type(value), base):
            return int(base.__len__(value))
    return 0


def _first(value: Any) -> object | None:
    """A list's or tuple's first element, through the builtin's own methods."""
    for base in (list, tuple):
        if issubclass(type(value), base) and base.__len__(value):
            first: object = base.__getitem__(value, 0)
            return first
    return None


def _holds_names(value: object) -> bool:
    return not (value is None or issubclass(type(value), (bool, *_NO_NAMES)))


def _instance_dict(value: object) -> dict[Any, Any] | None:
    """The instance `__dict__` through the standard descriptor only (never a user property)."""
    for cls in _mro(type(value)):
        entry = _class_dict(cls).get("__dict__")
        if entry is None:
            continue
        if type(entry) not in _STANDARD_DICT_DESCRIPTORS:
            return None
        try:
            found = object.__getattribute__(value, "__dict__")
        except Exception:
            return None
        return found if type(found) is dict else None
    return None


def _parameters(value: object) -> list[str] | None:
    """Parameter names of a plain function or bound method (its code object; nothing called)."""
    bound = type(value) is types.MethodType
    func = value.__func__ if bound else value  # type: ignore[attr-defined]
    if type(func) is not types.FunctionType:
        return None
    code = func.__code__
    names = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    return names[1:] if bound else names


# -- frames ---------------------------------------------------------------------------------


def summarise_frame(frame: types.FrameType, line: int, repo_root: str | None) -> dict[str, Any]:
    """The frame's locals, capped; JSON-ready (`patchit.events.model.RuntimeFrame`)."""
    capture = _Capture(repo_root)
    code = frame.f_code
    recorded: dict[str, Any] = {}
    notes: list[str] = []
    skipped = 0
    namespace = frame.f_locals
    if type(namespace) is not dict:  # a class body's custom namespace: its methods are user code
        namespace = {}
        notes.append("the frame's namespace is not a plain dict: not read")
    for name, value in namespace.items():
        if not name.isidentifier() or name.startswith("__") or _is(value, types.ModuleType):
            continue
        if len(recorded) >= MAX_LOCALS:
            skipped += 1
            continue
        try:
            recorded[name] = capture.value(value, 0, secret=is_secret_name(name))
        except Exception as exc:  # one unreadable local must not cost the others
            recorded[name] = {"type": type_name(value)}
            notes.append(f"{name}: not read ({type(exc).__name__})")
    if skipped:
        notes.append(f"{skipped} more local(s) left out (at most {MAX_LOCALS})")
    if capture.names_left <= 0:
        notes.append(f"names capped at {MAX_TOTAL_NAMES} for the frame")
    found: dict[str, Any] = {
        "path": code.co_filename,
        "line": line,
        "function": code.co_name,
        "locals": recorded,
    }
    if notes:
        found["notes"] = notes
    return found


def in_repo(path: str, root: str) -> bool:
    """Whether a file is the repository's own code (not a library vendored inside it)."""
    if not path or path.startswith("<"):
        return False
    norm, base = os.path.normpath(path), os.path.normpath(root).rstrip(os.sep) + os.sep
    if not norm.startswith(base):
        return False
    return _NOT_REPO_PARTS.isdisjoint(norm[len(base) :].split(os.sep))


def failing_frame_locals(exc: BaseException, repo_root: str) -> dict[str, Any] | None:
    """The innermost frame of `exc`'s traceback that runs code under `repo_root` (as given or
    with symlinks resolved), summarised; None when no frame does."""
    roots = list(dict.fromkeys([repo_root, os.path.realpath(repo_root)]))
    seen: dict[str, bool] = {}  # a recursive task repeats its file in every frame
    innermost: tuple[types.FrameType, int] | None = None
    tb = exc.__traceback__
    for _ in range(1000):  # a traceback is a chain; bound it all the same
        if tb is None:
            break
        path = tb.tb_frame.f_code.co_filename
        if path not in seen:
            seen[path] = any(in_repo(path, root) for root in roots)
        if seen[path]:
            innermost = (tb.tb_frame, tb.tb_lineno)
        tb = tb.tb_next
    if innermost is None:
        return None
    return summarise_frame(*innermost, repo_root=repo_root)
