"""`gpulab grade view`: the gradebook in the terminal.

A DataTable of students x exercises, each cell the grade in its status's
colour (with * for a manual override, L for late, E for an extension); `s`
sorts by the column under the cursor (again: the other way), `/` filters
the rows (a student's id or name, or a status: `failed`), Enter opens the
student's submission history, `d` the distribution of the column's scores
(plotext), `r` reads the gradebook again. It reads, never writes: the
gradebook is written by `gpulab grade ingest` alone (gpulab.gradebook.store),
and every read runs in a thread worker. Fits 80x24; `gpulab serve
--gradebook DIR` shows it in a browser.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Static

if TYPE_CHECKING:
    import sqlite3

    from gpulab.gradebook.query import Cell

STYLES = {
    "passed": "green",
    "failed": "red",
    "refused": "bold red",
    "timeout": "yellow",
    "crashed": "magenta",
    "error": "bright_black",
    "pending": "cyan",
    "missing": "dim",
}


@dataclass(frozen=True, slots=True)
class Student:
    """A row of the gradebook's students, as the view shows it."""

    id: str
    name: str


@dataclass(frozen=True, slots=True)
class Run:
    """A row of a student's history: a submission, and one run of it (the
    run's fields are None while it has none: the query's LEFT JOIN)."""

    exercise: str
    submitted_at: str
    status: str | None
    score: float | None
    max_score: float | None
    summary: str | None
    device: str | None
    gpu: str | None
    batch: str | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Run:
        return cls(*(row[f.name] for f in fields(cls)))


@dataclass(frozen=True)
class Snapshot:
    """What one read of the gradebook gave the view."""

    name: str
    exercises: list[tuple[str, float]]  # (exercise, points)
    students: list[Student]
    cells: dict[tuple[str, str], Cell]


def read_snapshot(root: Path) -> Snapshot:
    """The grades as `gpulab grade status` has them (its own connection:
    this runs in a worker thread)."""
    from gpulab.course.content import load_course
    from gpulab.gradebook import query
    from gpulab.gradebook.config import CONFIG_NAME, load_config
    from gpulab.gradebook.store import DB_NAME, connect

    cfg = load_config(root / CONFIG_NAME, load_course().exercise_ids)
    conn = connect(root / DB_NAME)
    try:
        grid = query.grid(conn, cfg)
        students = [Student(r["id"], r["name"]) for r in query.students(conn)]
    finally:
        conn.close()
    return Snapshot(cfg.name, [(a.exercise, a.points) for a in cfg.assignments], students, grid)


def cell_text(cell: Cell) -> Text:
    mark = (
        ("*" if cell.override is not None else "")
        + ("L" if cell.late else "")
        + ("E" if cell.extended else "")
    )
    if cell.final is None:
        words = cell.status
    elif cell.status in ("passed", "missing") or cell.override is not None:
        words = f"{cell.final:g}{mark}"
    else:
        words = f"{cell.final:g}{mark} {cell.status}"
    return Text(words, style=STYLES.get(cell.status, ""))


class Loaded(Message):
    def __init__(self, snapshot: Snapshot | None, problem: str = "") -> None:
        super().__init__()
        self.snapshot, self.problem = snapshot, problem


class HistoryScreen(ModalScreen[None]):
    """A student's submissions, each with every run of it, newest first."""

    BINDINGS = [Binding("escape,q", "dismiss", "Back")]

    def __init__(self, root: Path, student: Student) -> None:
        super().__init__()
        self.root, self.student = root, student

    def compose(self) -> ComposeResult:
        yield Static(
            f"{self.student.name} ({self.student.id}): submissions and runs",
            id="history-title",
        )
        yield DataTable(id="history", zebra_stripes=True, cursor_type="row")
        yield Static("", id="history-summary")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#history", DataTable)
        for label in ("exercise", "submitted", "status", "score", "device", "batch"):
            table.add_column(label, key=label)
        self.load()

    @work(thread=True, exclusive=True, group="history")
    def load(self) -> None:
        from gpulab.gradebook import query
        from gpulab.gradebook.store import DB_NAME, connect

        conn = connect(self.root / DB_NAME)
        try:
            rows = [Run.from_row(r) for r in query.history(conn, self.student.id)]
        finally:
            conn.close()
        self.app.call_from_thread(self.show, rows)

    def show(self, rows: list[Run]) -> None:
        table = self.query_one("#history", DataTable)
        for r in rows:
            status = r.status or "pending"
            score = "" if r.score is None else f"{r.score:g}/{r.max_score:g}"
            table.add_row(
                r.exercise,
                r.submitted_at[:16],
                Text(status, style=STYLES.get(status, "")),
                score,
                (r.gpu or r.device or "")[:18],
                r.batch or "",
            )
        latest = next((r for r in rows if r.summary), None)
        self.query_one("#history-summary", Static).update(
            Text(f"latest: {latest.summary}" if latest else "no run yet", overflow="fold")
        )


class DistributionScreen(ModalScreen[None]):
    """One exercise's final scores as a histogram (plotext), and its statuses."""

    BINDINGS = [Binding("escape,q", "dismiss", "Back")]

    def __init__(self, title: str, scores: list[float], counts: dict[str, int]) -> None:
        super().__init__()
        self.title_text, self.scores, self.counts = title, scores, counts

    def compose(self) -> ComposeResult:
        from textual_plotext import PlotextPlot

        words = ", ".join(f"{n} {s}" for s, n in sorted(self.counts.items()))
        yield Static(f"{self.title_text}: {words}", id="dist-title")
        yield PlotextPlot(id="dist")
        yield Footer()

    def on_mount(self) -> None:
        from textual_plotext import PlotextPlot

        plt = self.query_one("#dist", PlotextPlot).plt
        plt.hist(self.scores or [0.0], bins=10)
        plt.title("final scores")
        plt.xlabel("points")


class GradebookApp(App[int]):
    TITLE = "gpulab grade"
    CSS = """
    #filter { display: none; height: 3; }
    #filter.shown { display: block; }
    #grades { height: 1fr; }
    #legend { height: 1; color: $text-muted; }
    #history { height: 1fr; }
    #history-summary { height: auto; max-height: 4; }
    #dist { height: 1fr; }
    HistoryScreen, DistributionScreen { background: $background; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit", priority=True),
        Binding("s", "sort", "Sort"),
        Binding("slash", "filter", "Filter"),
        Binding("d", "distribution", "Scores"),
        Binding("r", "reload", "Reload"),
        Binding("escape", "clear_filter", "Clear", show=False),
    ]

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.snapshot: Snapshot | None = None
        self.sorted_by: tuple[str, bool] | None = None
        self.filter_text = ""

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter: a student's id or name, or a status", id="filter")
        yield DataTable(id="grades", zebra_stripes=True, cursor_type="cell")
        yield Static("Enter: history  * override  L late  E extension", id="legend")
        yield Footer()

    def on_mount(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        self.query_one("#grades", DataTable).loading = True
        self.read()

    @work(thread=True, exclusive=True, group="read", exit_on_error=False)
    def read(self) -> None:
        try:
            self.post_message(Loaded(read_snapshot(self.root)))
        except Exception as exc:  # noqa: BLE001 - shown on screen, the view stays up
            self.post_message(Loaded(None, f"{type(exc).__name__}: {exc}"))

    @on(Loaded)
    def loaded(self, message: Loaded) -> None:
        table = self.query_one("#grades", DataTable)
        table.loading = False
        if message.snapshot is None:
            self.query_one("#legend", Static).update(Text(message.problem, style="red"))
            return
        self.snapshot = message.snapshot
        self.sub_title = message.snapshot.name
        self.fill()

    def rows(self) -> list[Student]:
        assert self.snapshot is not None
        words = self.filter_text.lower().strip()
        out = []
        for st in self.snapshot.students:
            statuses = {
                self.snapshot.cells[(st.id, ex)].status for ex, _ in self.snapshot.exercises
            }
            if (
                words
                and words not in st.id.lower()
                and words not in st.name.lower()
                and words not in statuses
            ):
                continue
            out.append(st)
        return out

    def fill(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        table = self.query_one("#grades", DataTable)
        table.clear(columns=True)
        table.add_column("student", key="student")
        for ex, points in snap.exercises:
            table.add_column(f"{ex} /{points:g}", key=ex)
        table.add_column("total", key="total")
        for st in self.rows():
            cells = [snap.cells[(st.id, ex)] for ex, _ in snap.exercises]
            total = sum(c.final or 0.0 for c in cells)
            table.add_row(st.id, *(cell_text(c) for c in cells), Text(f"{total:g}"), key=st.id)
        if self.sorted_by is not None:
            self.sort_rows(*self.sorted_by)

    def sort_rows(self, column: str, reverse: bool) -> None:
        table = self.query_one("#grades", DataTable)

        def key(value: Any) -> Any:
            text = value.plain if isinstance(value, Text) else str(value)
            number = text.split(" ")[0].rstrip("*LE")
            try:
                return (0, float(number), text)
            except ValueError:
                return (1, 0.0, text)

        table.sort(column, key=key, reverse=reverse)

    def action_sort(self) -> None:
        table = self.query_one("#grades", DataTable)
        if not table.columns:
            return
        column = list(table.columns)[table.cursor_column].value or "student"
        reverse = self.sorted_by == (column, False)
        self.sorted_by = (column, reverse)
        self.sort_rows(column, reverse)
        self.notify(f"sorted by {column}{' (reversed)' if reverse else ''}", timeout=2)

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.fill()

    @on(Input.Submitted, "#filter")
    def filter_done(self) -> None:
        self.query_one("#grades", DataTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.query_one("#grades", DataTable).focus()

    @on(DataTable.CellSelected, "#grades")
    def open_history(self, event: DataTable.CellSelected) -> None:
        if self.snapshot is None:
            return
        sid = event.cell_key.row_key.value
        student = next((s for s in self.snapshot.students if s.id == sid), None)
        if student is not None:
            self.push_screen(HistoryScreen(self.root, student))

    def action_distribution(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        table = self.query_one("#grades", DataTable)
        column = list(table.columns)[table.cursor_column].value or ""
        exercises = [ex for ex, _ in snap.exercises]
        chosen = [column] if column in exercises else exercises
        scores: list[float] = []
        counts: dict[str, int] = {}
        for st in self.rows():
            total = 0.0
            for ex in chosen:
                c = snap.cells[(st.id, ex)]
                total += c.final or 0.0
                counts[c.status] = counts.get(c.status, 0) + 1
            scores.append(total)
        title = column if column in exercises else "total"
        self.push_screen(DistributionScreen(title, scores, counts))


def run_gradebook(root: Path) -> int:
    GradebookApp(root).run()
    return 0
