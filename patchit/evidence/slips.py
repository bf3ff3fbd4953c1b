"""Is a near name a slip of the fingers, or another word? The judgement every near-name fix-it
asks before it rewrites a name the breaking change wrote.

`similarity.nearest` says which name is closest; closeness is no proof. `bill_address_key`
and `ship_address_key` are 0.75 alike by difflib, and one is not a misspelling of the other:
the author wrote a word, and the project has no column by it yet. A substitution that swaps
a word builds green and reads the wrong data (every billing city becomes the shipping city).

So names are compared word by word (split on `_`, `-`, `.`, spaces, camelCase and digits):
- the same words (case, separators aside) is a slip;
- each word that differs must be a typo of its counterpart: a Damerau-Levenshtein distance
  (insert, delete, substitute, swap two neighbours) of at most 1 in a word of up to six
  letters, 2 in a longer one, none in a word of one or two letters, no number changed, and
  at most 2 in the whole name;
- and the two words are not known opposites or siblings (`start`/`end`, `min`/`max`,
  `net`/`gross`/`tax`, `day`/`month`...), whatever their distance;
- a word added or dropped (`amount` -> `amount_usd`) is another name, not a slip.
So `nme`->`name`, `custmer_id`->`customer_id`, `stauts`->`status` are slips; `bill`->`ship`
(4 edits in 4 letters), `min`->`max` (2 in 3), `credit`->`debit`, `gross`->`net` are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Opposites and siblings: words a field name is built from in pairs or families. Two distinct
# members of one group are different words even one letter apart (`net`/`new` is not listed:
# not a pair a field name comes in).
_GROUPS: tuple[frozenset[str], ...] = tuple(
    frozenset(group.split())
    for group in (
        "bill ship", "billing shipping", "billed shipped", "start end", "begin end",
        "started ended", "starts ends", "starting ending", "first last", "open close",
        "opened closed", "opening closing", "min max", "minimum maximum", "lowest highest",
        "low high", "lower upper", "least most", "credit debit", "from to", "src dst",
        "source target", "sender receiver", "sender recipient", "buyer seller", "buy sell",
        "bought sold", "in out", "inbound outbound", "input output", "import export",
        "old new", "prev next", "previous next", "before after", "left right", "head tail",
        "asc desc", "income expense", "revenue cost", "profit loss", "gain loss", "true false",
        "yes no", "on off", "enabled disabled", "add remove", "added removed", "plus minus",
        "push pull", "read write", "get set", "inner outer", "lat lon lng", "latitude longitude",
        "width height depth length", "home away", "local utc", "gross net tax vat",
        "sum avg mean median count", "hour minute second", "day week month quarter year",
        "daily weekly monthly quarterly yearly annual", "created updated deleted modified",
        "mon tue wed thu fri sat sun",
    )
)  # fmt: skip
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def split_words(name: str) -> list[str]:
    """`billAddress_key2` -> ["bill", "address", "key", "2"]: lower-cased words of a name."""
    return [w.lower() for part in _SEPARATORS.split(name) for w in _CAMEL.findall(part)]


def edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein distance (optimal string alignment): the edits a typing slip makes,
    a swap of two neighbouring letters counting as one (`stauts` -> `status`)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[len(b)]


def _typo_budget(a: str, b: str) -> int:
    """Edits a slip may make in one word: none in a word of one or two letters."""
    longest = max(len(a), len(b))
    return 0 if longest <= 2 else 1 if longest <= 6 else 2


@dataclass(frozen=True)
class Slip:
    """The verdict on `old` -> `new`: `slip` True when `old` reads as `new` mistyped;
    otherwise `why` says what makes it another name (for the review)."""

    slip: bool
    why: str = ""


def _word_verdict(a: str, b: str) -> str:
    """'' when word `a` is a typo of word `b`; else why they are different words."""
    if any(a in group and b in group for group in _GROUPS):
        return f"a different word (`{a}` -> `{b}`: opposites or siblings)"
    if a.isdigit() or b.isdigit():
        return f"a different {'number' if a.isdigit() and b.isdigit() else 'word'} (`{a}` -> `{b}`)"
    distance = edit_distance(a, b)
    if distance > _typo_budget(a, b):
        return (
            f"a different word (`{a}` -> `{b}`: {distance} edits in {max(len(a), len(b))} letters)"
        )
    return ""


def judge_slip(old: str, new: str) -> Slip:
    """Whether `old` is `new` mistyped (see the module docstring)."""
    a, b = split_words(old), split_words(new)
    if "".join(a) == "".join(b):
        return Slip(True)
    if len(a) == len(b):
        pairs = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
        for x, y in pairs:
            if why := _word_verdict(x, y):
                return Slip(False, why)
        total = sum(edit_distance(x, y) for x, y in pairs)
        if total > 2:
            return Slip(False, f"more than a typo ({total} edits over {len(pairs)} words)")
        return Slip(True)
    shorter, longer = (a, b) if len(a) < len(b) else (b, a)
    extra = [w for w in longer if w not in shorter]
    if all(w in longer for w in shorter):
        return Slip(False, f"a word added or dropped (`{'_'.join(extra)}`)")
    distance = edit_distance("".join(a), "".join(b))
    if distance > 1:
        return Slip(False, f"a different name ({distance} edits and a word more or less)")
    return Slip(True)
