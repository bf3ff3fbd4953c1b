"""What the warm dbt worker changes in the types agate infers for query results (see `tuning`
for the rest).

dbt reads every fetched result (a test's failure count, a relation's columns, the catalog)
into an agate table, and each table makes a type tester whose `Date` and `DateTime` types each
build a `parsedatetime.Constants`: the locale's words escaped into regular expressions, some
600 `re.escape` calls, 90% of a tester's making. A 21-node run makes about 150 of them. Here a
`Constants` made with the same arguments as one made before takes that one's attributes (the
locale tables and expressions, read-only once made) with lists of its own for the two it
changes (the fallback locales while it is made, the leap years it learns), when a probe shows
the copy answers as a new one does.
"""

from __future__ import annotations

from typing import Any

from patchit.harnesses.dbt.tuning_base import replace_once

_OWN_LISTS = ("fallbackLocales", "_leapYears")  # the two a Constants appends to


def install() -> None:
    try:
        import parsedatetime
    except ImportError:
        return
    if _copies_answer_as_new_ones_do(parsedatetime):
        replace_once(parsedatetime.Constants, "__init__", _copied)


def _copied(parsedatetime_s: Any) -> Any:
    made: dict[tuple[Any, ...], dict[str, Any]] = {}

    def init(
        self: Any, localeID: Any = None, usePyICU: bool = True, fallbackLocales: Any = ("en_US",)
    ) -> None:
        try:
            key = (type(self), localeID, usePyICU, tuple(fallbackLocales))
            hash(key)
        except TypeError:  # arguments it cannot remember: made as parsedatetime makes it
            parsedatetime_s(self, localeID, usePyICU, list(fallbackLocales))
            return
        first = made.get(key)
        if first is None:
            parsedatetime_s(self, localeID, usePyICU, list(fallbackLocales))
            made[key] = dict(self.__dict__)
            return
        self.__dict__.update(first)
        for name in _OWN_LISTS:
            if isinstance(first.get(name), list):
                self.__dict__[name] = list(first[name])

    return init


def _copies_answer_as_new_ones_do(parsedatetime: Any) -> bool:
    """Whether a copied `Constants` has a new one's attributes and parses a probe's dates and
    times (English words, a relative day, a month name) to the same answer."""
    try:
        constants = parsedatetime.Constants
        init = _copied(constants.__init__)
        first, copy, new = (constants.__new__(constants) for _ in range(3))
        init(first)
        init(copy)
        constants.__init__(new)
        if set(copy.__dict__) != set(new.__dict__) or copy._leapYears is first._leapYears:
            return False
        start = (2026, 11, 30, 9, 0, 0, 0, 334, 0)
        for text in ("2026-01-02", "Jan 3 2025 10:30", "tomorrow 5pm", "next friday", "noon"):
            ours = parsedatetime.Calendar(copy).parse(text, start)
            theirs = parsedatetime.Calendar(new).parse(text, start)
            if ours != theirs:
                return False
        return True
    except Exception:  # a parsedatetime made otherwise: left as it is
        return False
