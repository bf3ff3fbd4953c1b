"""What the warm dbt worker changes in dbt's Jinja contexts (see `tuning` for the rest).

Every node a run compiles or executes gets a context holding every macro of the project and
its adapter, each wrapped in a `MacroGenerator` bound to that context: on a DuckDB project
about 600 macros, three contexts a node, some 42,000 generators for a 21-node run. Three
things cost there, each replaced only where a probe shows the result is dbt's own:

- a generator's construction is three nested `__init__` calls that each set attributes; here
  one sets the same four;
- `MacroNamespaceBuilder.build_namespace` files each generator through two method calls; here
  one loop files it in the same dicts (and raises the same error for a duplicate);
- `ManifestContext.to_dict` copies the namespace into the context through `Mapping`'s
  protocol: per macro a Python `__getitem__` that walks the five namespaces in search order
  (a generator, and a new dict, each time); here the namespaces are merged once, lowest
  precedence first, and copied in dbt's key order.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from patchit.harnesses.dbt.tuning_base import replace_once


def install() -> None:
    try:
        from dbt.clients.jinja import MacroGenerator
        from dbt.context import macros as dbt_macros
        from dbt.context.manifest import ManifestContext
    except ImportError:
        return
    if _same_as_dbt_s(MacroGenerator):
        replace_once(MacroGenerator, "__init__", lambda _dbt_s: _init)
    builder = dbt_macros.MacroNamespaceBuilder
    if _builds_as_dbt_does(builder):
        replace_once(builder, "build_namespace", _one_loop)
    if _flattens_as_dbt_does(dbt_macros.MacroNamespace):
        replace_once(ManifestContext, "to_dict", _merged_once)


def _init(self: Any, macro: Any, context: Any = None, node: Any = None, stack: Any = None) -> None:
    self.context = context
    self.macro = macro
    self.node = node
    self.stack = stack


def _same_as_dbt_s(cls: Any) -> bool:
    """Whether `_init` leaves a generator as dbt's `__init__` does (a probe of each)."""
    parts: tuple[Any, ...] = (object(), {}, object(), object())
    theirs, ours = cls.__new__(cls), cls.__new__(cls)
    try:
        cls.__init__(theirs, *parts)
        _init(ours, *parts)
        return bool(theirs.__dict__ == ours.__dict__) and all(
            theirs.__dict__[k] is ours.__dict__[k] for k in theirs.__dict__
        )
    except Exception:  # a dbt whose generators are made otherwise: left as it is
        return False


def _one_loop(dbt_s: Any) -> Any:
    from dbt.clients.jinja import MacroGenerator as make
    from dbt.context import macros as dbt_macros
    from dbt.exceptions import DuplicateMacroNameError

    builder_cls = dbt_macros.MacroNamespaceBuilder

    def build_namespace(self: Any, macros_by_package: Any, ctx: Any) -> Any:
        if type(self) is not builder_cls:  # a subclass may file macros its own way
            return dbt_s(self, macros_by_package, ctx)
        node, stack = self.node, self.thread_ctx
        internal_names = self.internal_package_names
        internal, packages = self.internal_packages, self.packages
        local, root_globals = self.locals, self.globals
        search, root = self.search_package, self.root_package
        for package in macros_by_package.values():
            for macro in package.values():
                func = make(macro, ctx, node, stack)
                package_name, name = macro.package_name, macro.name
                is_internal = package_name in internal_names
                hierarchy = internal if is_internal else packages
                namespace = hierarchy.get(package_name)
                if namespace is None:
                    namespace = hierarchy[package_name] = {}
                if name in namespace:  # as dbt raises it: the new generator's macro twice
                    raise DuplicateMacroNameError(macro, macro, package_name)
                namespace[name] = func
                if is_internal:
                    continue
                if package_name == search:
                    local[name] = func
                elif package_name == root:
                    root_globals[name] = func
        global_project_namespace: dict[str, Any] = {}
        for pkg in reversed(self.internal_package_names_order):
            if pkg in internal:
                global_project_namespace.update(internal[pkg])
        return dbt_macros.MacroNamespace(
            global_namespace=root_globals,
            local_namespace=local,
            global_project_namespace=global_project_namespace,
            packages=packages,
        )

    return build_namespace


def _builds_as_dbt_does(builder_cls: Any) -> bool:
    """Whether `_one_loop` files a probe's macros (a root project, the node's package, another
    package, two internal ones overriding each other) as dbt's `build_namespace` does."""
    try:
        ours_fn = _one_loop(builder_cls.build_namespace)
        macros: dict[str, dict[str, Any]] = {}
        for package, names in _PROBE_MACROS.items():
            macros[package] = {n: SimpleNamespace(package_name=package, name=n) for n in names}
        ctx: dict[str, Any] = {}
        stack, node = object(), object()
        built = []
        for build in (builder_cls.build_namespace, ours_fn):
            builder = builder_cls("root", "pkg", stack, ["dbt_duckdb", "dbt"], node)
            built.append((builder, build(builder, macros, ctx)))
        (theirs_b, theirs), (ours_b, ours) = built
        internal = (theirs_b.internal_packages.values(), ours_b.internal_packages.values())
        pairs = [
            (theirs_b.globals, ours_b.globals),
            (theirs_b.locals, ours_b.locals),
            (theirs.global_project_namespace, ours.global_project_namespace),
            *zip(*internal, strict=True),
            *zip(theirs_b.packages.values(), ours_b.packages.values(), strict=True),
        ]
        same_packages = list(theirs_b.packages) == list(ours_b.packages) and list(
            theirs_b.internal_packages
        ) == list(ours_b.internal_packages)
        return same_packages and all(_same_generators(a, b) for a, b in pairs)
    except Exception:  # a dbt whose namespaces are built otherwise: left as it is
        return False


_PROBE_MACROS = {
    "root": ["a", "shared", "over"],
    "pkg": ["b", "shared"],
    "other": ["c"],
    "dbt": ["over", "d", "e"],
    "dbt_duckdb": ["d", "f"],
}


def _same_generators(theirs: dict[str, Any], ours: dict[str, Any]) -> bool:
    return list(theirs) == list(ours) and all(
        type(theirs[k]) is type(ours[k])
        and theirs[k].macro is ours[k].macro
        and theirs[k].context is ours[k].context
        and theirs[k].node is ours[k].node
        and theirs[k].stack is ours[k].stack
        for k in theirs
    )


def flat_namespace(namespace: Any) -> dict[str, Any]:
    """`dict(namespace)` of a `MacroNamespace`, at C speed: each name the first of its
    namespaces in dbt's search order has (local package, root project, packages, `dbt`,
    internal packages), in the order the namespace iterates its names."""
    from dbt.include.global_project import PROJECT_NAME

    merged = dict(namespace.global_project_namespace)
    merged[PROJECT_NAME] = namespace.global_project_namespace
    merged.update(namespace.packages)
    merged.update(namespace.global_namespace)
    merged.update(namespace.local_namespace)
    return {key: merged[key] for key in namespace._keys()}


def _merged_once(dbt_s: Any) -> Any:
    from dbt.context import macros as dbt_macros
    from dbt.context.manifest import ManifestContext

    namespace_cls = dbt_macros.MacroNamespace

    def to_dict(self: Any) -> Any:
        namespace = self.namespace
        if type(namespace) is not namespace_cls:  # a test's namespace, or another kind
            return dbt_s(self)
        dct = super(ManifestContext, self).to_dict()
        dct.update(flat_namespace(namespace))
        return dct

    return to_dict


def _flattens_as_dbt_does(namespace_cls: Any) -> bool:
    """Whether `flat_namespace` of a probe namespace (a name in every namespace, one named as
    the `dbt` package) is `dict()` of it, values and order."""
    try:

        def space(*names: str) -> dict[str, object]:
            return {n: object() for n in names}

        packages = {"pkg": space("x"), "dbt": space("y"), "shared": space("z")}
        namespace = namespace_cls(
            global_namespace=space("a", "shared", "g"),
            local_namespace=space("a", "l"),
            global_project_namespace=space("a", "shared", "dbt", "i"),
            packages=packages,
        )
        theirs, ours = dict(namespace), flat_namespace(namespace)
        return list(theirs) == list(ours) and all(theirs[k] is ours[k] for k in theirs)
    except Exception:
        return False
