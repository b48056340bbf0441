"""The glossary: terms as data (lessons/glossary.toml) and a forgiving lookup.

Lookup forgives what learners type: case, spacing and hyphens ("kv-cache"),
plurals ("warps", "SMs"), abbreviations kept as aliases ("AI", "HBM") and
close misspellings ("arithmatic intensity", through difflib). A broken entry
is reported with the file and the entry and skipped; the others still work.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict

from gpulab.fsutil import load_toml
from gpulab.wire.protocol import JsonObject

FIELDS = {"name", "definition", "formula", "aliases", "lessons", "see_also"}


class GlossaryError(Exception):
    """The glossary file as a whole cannot be used."""


class TermJson(TypedDict):
    """A term as `gpulab glossary --json` prints it."""

    name: str
    definition: str
    formula: str
    aliases: list[str]
    lessons: list[str]
    see_also: list[str]


@dataclass(frozen=True)
class Term:
    name: str
    definition: str
    formula: str = ""
    aliases: tuple[str, ...] = ()
    lessons: tuple[str, ...] = ()
    see_also: tuple[str, ...] = ()

    def as_dict(self) -> TermJson:
        return {
            "name": self.name,
            "definition": self.definition,
            "formula": self.formula,
            "aliases": list(self.aliases),
            "lessons": list(self.lessons),
            "see_also": list(self.see_also),
        }


def _singular(word: str) -> str:
    """A canonical singular, the same for both forms: "caches"/"cache" -> "cach",
    "batches"/"batch" -> "batch". Not pretty English; only ever compared."""
    if len(word) <= 2 or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s"):
        word = word[:-1]
    return word[:-1] if word.endswith(("che", "she", "xe")) else word


def normalize(text: str) -> str:
    """Case-, spacing-, punctuation- and plural-insensitive key: 'KV-caches' -> 'kvcache'."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "".join(_singular(w) for w in words)


@dataclass
class Glossary:
    terms: tuple[Term, ...]
    path: Path
    errors: tuple[str, ...] = ()
    _keys: dict[str, Term] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for t in self.terms:
            for k in (t.name, *t.aliases):
                self._keys.setdefault(normalize(k), t)

    def get(self, name: str) -> Term | None:
        """A term by its exact name or alias (after normalising)."""
        return self._keys.get(normalize(name))

    def lookup(self, query: str) -> tuple[Term | None, list[str]]:
        """(best match or None, suggestions). Suggestions are term names."""
        q = normalize(query)
        if not q:
            return None, []
        if q in self._keys:
            return self._keys[q], []
        close = difflib.get_close_matches(q, list(self._keys), n=1, cutoff=0.82)
        if close:
            return self._keys[close[0]], []
        prefixed = {t.name for k, t in self._keys.items() if len(q) >= 3 and k.startswith(q)}
        if len(prefixed) == 1:
            return self.get(prefixed.pop()), []
        return None, [t.name for t in self.search(query)[:5]]

    def search(self, query: str) -> list[Term]:
        """Terms ranked for a search box: names, aliases, then definitions, then fuzzy."""
        q = normalize(query)
        if not q:
            return sorted(self.terms, key=lambda t: t.name.lower())
        words = [normalize(w) for w in query.split() if normalize(w)]
        scored: list[tuple[float, str, Term]] = []
        for t in self.terms:
            keys = [normalize(k) for k in (t.name, *t.aliases)]
            text = normalize(f"{t.definition} {t.formula}")
            # The name outranks an alias at each level ("memory" -> Memory movement
            # before Coalescing, whose alias is "memory coalescing").
            if q in keys:
                score = 100.0 + (q == keys[0])
            elif any(k.startswith(q) for k in keys):
                score = 80.0 + keys[0].startswith(q)
            elif any(q in k for k in keys):
                score = 60.0 + (q in keys[0])
            elif words and all(any(w in k for k in keys) or w in text for w in words):
                score = 40.0 if q in text else 30.0
            else:
                ratio = max(difflib.SequenceMatcher(None, q, k).ratio() for k in keys)
                score = 25.0 * ratio if ratio >= 0.6 else 0.0
            if score:
                scored.append((score, t.name.lower(), t))
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [t for _, _, t in scored]


def _str_list(entry: JsonObject, name: str, where: str) -> tuple[str, ...]:
    value = entry.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{where}: field '{name}' must be a list of non-empty strings")
    return tuple(value)


def _parse(entry: object, index: int, path: Path, lesson_ids: set[str] | None) -> Term:
    where = f"{path} [[term]] #{index + 1}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected a table")
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where}: field 'name' is missing")
    where = f"{path} term '{name}'"
    unknown = sorted(set(entry) - FIELDS)
    if unknown:
        raise ValueError(
            f"{where}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(FIELDS))}"
        )
    definition = entry.get("definition")
    if not isinstance(definition, str) or not definition.strip():
        raise ValueError(f"{where}: field 'definition' is missing")
    formula = entry.get("formula", "")
    if not isinstance(formula, str):
        raise ValueError(f"{where}: field 'formula' must be a string")
    lessons = _str_list(entry, "lessons", where)
    if lesson_ids is not None:
        for lid in lessons:
            if lid not in lesson_ids:
                raise ValueError(f"{where}: lesson '{lid}' is not in lessons/manifest.toml")
    return Term(
        name.strip(),
        " ".join(definition.split()),
        formula.strip(),
        _str_list(entry, "aliases", where),
        lessons,
        _str_list(entry, "see_also", where),
    )


def default_path() -> Path:
    from gpulab.course.content import content_root

    return content_root() / "lessons" / "glossary.toml"


def load_glossary(path: Path | None = None, lesson_ids: set[str] | None = None) -> Glossary:
    """Read and validate the glossary. Raises GlossaryError only if the file is unusable."""
    path = Path(path) if path else default_path()
    data = load_toml(path, GlossaryError, "the glossary is missing")
    entries = data.get("term")
    if not isinstance(entries, list) or not entries:
        raise GlossaryError(f"{path}: no [[term]] entries")
    terms: list[Term] = []
    errors: list[str] = []
    owner: dict[str, str] = {}
    for i, entry in enumerate(entries):
        try:
            term = _parse(entry, i, path, lesson_ids)
            for k in {normalize(k) for k in (term.name, *term.aliases)}:
                if k in owner:
                    raise ValueError(
                        f"{path} term '{term.name}': '{k}' already names term '{owner[k]}'"
                    )
            for k in {normalize(k) for k in (term.name, *term.aliases)}:
                owner[k] = term.name
        except ValueError as exc:
            errors.append(str(exc))
            continue
        terms.append(term)
    names = {normalize(t.name) for t in terms}
    for t in terms:
        for other in t.see_also:
            if normalize(other) not in names:
                errors.append(f"{path} term '{t.name}': see_also '{other}' is not a term")
    return Glossary(tuple(terms), path, tuple(errors))


def _lesson_titles() -> dict[str, str]:
    try:
        from gpulab.course.content import load_course

        return {lesson.id: lesson.title for lesson in load_course().lessons}
    except Exception:  # noqa: BLE001 - titles are a nicety
        return {}


def term_renderable(term: Term) -> Any:
    """One term as a rich renderable (also used by the TUI's glossary pane)."""
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = [Text(term.name, style="bold")]
    if term.aliases:
        parts.append(Text(f"also: {', '.join(term.aliases)}", style="dim"))
    parts.append(Text(term.definition))
    if term.formula:
        parts.append(Text(f"  {term.formula}", style="cyan"))
    if term.lessons:
        titles = _lesson_titles()
        parts.append(
            Text(
                "Lessons: "
                + "; ".join(f"{lid[:2]} {titles.get(lid, lid)}" for lid in term.lessons),
                style="dim",
            )
        )
    if term.see_also:
        parts.append(Text(f"See also: {', '.join(term.see_also)}", style="dim"))
    return Group(*parts)


@lru_cache(maxsize=1)
def default_glossary() -> Glossary:
    """The course's glossary, checked against the lesson manifest when it loads."""
    try:
        from gpulab.course.content import load_course

        ids: set[str] | None = {lesson.id for lesson in load_course().lessons}
    except Exception:  # noqa: BLE001 - a broken manifest must not hide the glossary
        ids = None
    return load_glossary(lesson_ids=ids)


def search(query: str) -> list[Term]:
    """Ranked terms for the TUI's searchable pane (all terms for an empty query)."""
    return default_glossary().search(query)


def lookup(query: str) -> tuple[Term | None, list[str]]:
    return default_glossary().lookup(query)
