"""Command palette: the lab's commands, named "category: action" (posting's idiom)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class GpulabCommands(Provider):
    """Commands built from the app's current state each time the palette opens."""

    def _commands(self) -> Iterator[tuple[str, Callable[[], object], str]]:
        app = self.app
        run = app.run_action
        lesson = getattr(app, "lesson", None)
        yield ("check: run", partial(run, "check"), "grade the exercise (c, F5)")
        yield (
            "check: explain",
            partial(run, "check_explain"),
            "grade, then say what limits the kernel (X)",
        )
        if getattr(app, "checking", False):
            yield ("check: cancel", partial(run, "cancel_check"), "stop the running check (x)")
        yield ("hint: next", partial(run, "hint"), "reveal the next hint level (h)")
        watching = getattr(app, "watch_mode", False)
        yield (
            f"watch: {'stop' if watching else 'start'}",
            partial(run, "toggle_watch"),
            "re-check every time the exercise file is saved (w)",
        )
        yield ("exercise: save", partial(run, "save"), "write the editor's buffer (ctrl+s)")
        yield (
            "exercise: reset to the starter",
            partial(run, "reset"),
            "your file is backed up first (r)",
        )
        yield ("solution: show", partial(run, "solution"), "once the exercise passes (s)")
        for name, key in (
            ("lesson", "1"),
            ("exercise", "2"),
            ("results", "3"),
            ("roofline", "4"),
            ("device", "5"),
            ("roadmap", "6"),
            ("serving", "7"),
        ):
            yield (f"view: {name}", partial(run, f"show_pane('{name}')"), f"key {key}")
        yield ("view: toggle sidebar", partial(run, "toggle_sidebar"), "key b")
        yield (
            "probe: run microbenchmarks",
            partial(run, "probe"),
            "measure this GPU's bandwidth and FLOP/s ceilings",
        )
        yield (
            "roofline: export SVG",
            partial(run, "export_roofline"),
            "write the roofline with your runs to the workspace",
        )
        yield (
            "roofline: choose the datasheet GPU",
            partial(run, "choose_roofline_gpu"),
            "draw another GPU's roofline; remembered in the workspace",
        )
        yield (
            "serving: calculator",
            partial(run, "show_pane('serving')"),
            "LLM serving on the roofline: model, batch, context, dtype, GPU (7)",
        )
        yield ("help: this pane", partial(run, "help"), "? or F1")
        yield ("help: welcome", partial(run, "welcome"), "the welcome screen again")
        yield (
            "Restart the lab",
            partial(run, "restart"),
            "quit and start gpulab again (after a reinstall or an update); your edit is saved",
        )
        if getattr(app, "startup_notes", None):
            yield ("startup: notes", partial(run, "startup_notes"), "the start's warnings in full")
        course = getattr(app, "course", None)
        for other in course.exercises if course else ():
            mark = " (current)" if lesson is not None and other.exercise == lesson.exercise else ""
            step = f" · {other.step_label}: {other.exercise_title}" if other.step_label else ""
            yield (
                f"lesson: open {other.number} {other.title}{step}{mark}",
                partial(run, f"open_lesson('{other.exercise}')"),
                other.id,
            )
        yield ("lesson: next", partial(run, "next_lesson"), "n")

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, text=name, help=help_text)
