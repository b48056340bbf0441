"""Modal screens: welcome, confirm, help, solution."""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static, TextArea

from gpulab.gpu.devinfo import GpuInfo

if TYPE_CHECKING:
    from gpulab.course.content import Lesson


def help_markdown(topic: str) -> str:
    """Packaged help for a pane (gpulab/tui/help/<topic>.md), plus the keys page."""
    base = resources.files("gpulab.tui") / "help"
    try:
        text = (base / f"{topic}.md").read_text(encoding="utf-8")
    except (OSError, FileNotFoundError):
        text = f"# {topic.title()}\n\nNo help written for this pane yet.\n"
    try:
        keys = (base / "keys.md").read_text(encoding="utf-8")
    except (OSError, FileNotFoundError):
        keys = ""
    return text.rstrip() + "\n\n" + keys if topic != "keys" else text


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question, its keys on the buttons: y answers yes, n or escape no.

    Enter presses the highlighted (focused) button, which is `no`, the answer
    that changes nothing, when the dialog opens; tab or the arrow keys move
    the highlight. No button is coloured apart from the highlight, so the one
    that looks chosen is the one Enter presses.
    """

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", show=False),
        Binding("n,escape", "answer(False)", "No", show=False),
        Binding("left,up", "app.focus_previous", "Previous", show=False),
        Binding("right,down", "app.focus_next", "Next", show=False),
    ]

    def __init__(
        self, question: str, *, yes: str = "Yes", no: str = "Cancel", title: str = "Are you sure?"
    ) -> None:
        super().__init__()
        self.question, self.yes, self.no, self.title_text = question, yes, no, title

    def compose(self) -> ComposeResult:
        from gpulab.tui.markdown import LabMarkdown as Markdown

        with Vertical(id="dialog", classes="dialog confirm") as box:
            box.border_title = self.title_text
            box.border_subtitle = "y or n · Enter presses the highlighted one"
            yield Markdown(self.question, id="question")
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", id="yes")
                yield Button(f"{self.no} (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class HelpScreen(ModalScreen[None]):
    """Help for the focused pane, from packaged Markdown."""

    BINDINGS = [Binding("escape,q,f1,question_mark", "dismiss", "Close", show=False)]

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic

    def compose(self) -> ComposeResult:
        from gpulab.tui.markdown import LabMarkdown as Markdown

        with VerticalScroll(id="help", classes="dialog wide") as box:
            box.border_title = "Help"
            box.border_subtitle = "escape closes"
            yield Markdown(help_markdown(self.topic))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


class NoticeScreen(ModalScreen[None]):
    """Plain text (paths, a learner's file names: never markup), scrollable."""

    BINDINGS = [Binding("escape,q,enter", "close", "Close", show=False)]

    def __init__(self, text: str, title: str = "Notes from the start") -> None:
        super().__init__()
        self.text, self.title_text = text, title

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="notice", classes="dialog wide") as box:
            box.border_title = self.title_text
            box.border_subtitle = "escape closes"
            yield Static(self.text, markup=False)

    def action_close(self) -> None:
        self.dismiss(None)


class SolutionScreen(ModalScreen[None]):
    """The reference solution, read-only."""

    BINDINGS = [Binding("escape,q", "close", "Close", show=False)]

    def __init__(self, name: str, text: str, *, language: str | None = None) -> None:
        super().__init__()
        self.name_text, self.text = name, text
        self.language = language  # the editor's (gpulab.tui.editor.editor_language)

    def compose(self) -> ComposeResult:
        with Vertical(id="solution", classes="dialog wide") as box:
            box.border_title = f"Reference solution: {self.name_text}"
            box.border_subtitle = "read-only · escape closes"
            # Wrapped, as in the editor: a cut line hid its end with nothing to say so.
            yield TextArea.code_editor(
                self.text, language=self.language, theme="css", read_only=True, soft_wrap=True
            )

    def action_close(self) -> None:
        self.dismiss(None)


def welcome_markdown(*, first: bool, workspace: str, device_line: str, start: str) -> str:
    hello = "Welcome to gpulab" if first else "Welcome back"
    return f"""**{hello}**, a lab for GPU programming. Read a lesson, write the kernel,
press **c**: gpulab checks that it is correct, then times it and places it on
your GPU's **roofline**, the most the hardware allows.

- **Device**: {device_line}
- **Workspace**: `{workspace}` holds your copies of the exercises and your
  progress (`$GPULAB_HOME` moves it).
- **Begin** {start}
- **Keys**: **c** check · **e** edit (**escape** stops) · **h** hint · **w**
  re-check on every save · **b** lessons · **?** help · **ctrl+p** all commands
  · **q** quit
"""


def device_line(info: GpuInfo | None, datasheet_gpu: str) -> str:
    if info is None:
        return "looking for a GPU…"
    if info.found:
        return f"{info.describe()}. Checks time your kernels on it."
    return (
        "no NVIDIA GPU here, and that is fine: kernels run in the **Triton "
        "interpreter** on the CPU, checks grade correctness (no timing), and "
        f"rooflines use a datasheet {datasheet_gpu}."
    )


def start_words(first: Lesson | None) -> tuple[str, str]:
    """The welcome's start button and the sentence saying where it starts."""
    if first is None:
        return "Read lesson 01", "with lesson 01: no exercise is gradable yet."
    label = f"Start lesson {first.number}"
    if first.index == 0:
        return label, f"with lesson {first.number}, *{first.title}*."
    return label, (
        f"with lesson {first.number}, *{first.title}* (the ones before it are not gradable yet)."
    )


class WelcomeScreen(ModalScreen[bool]):
    """First start: what gpulab is, the device, the workspace, how to begin."""

    BINDINGS = [Binding("escape", "close(False)", "Close", show=False)]

    def __init__(
        self,
        *,
        first: bool,
        workspace: str,
        start_label: str,
        start_text: str,
        datasheet_gpu: str,
        info: GpuInfo | None = None,
    ) -> None:
        super().__init__()
        self.first, self.workspace, self.datasheet_gpu = first, workspace, datasheet_gpu
        self.start_label, self.start_text = start_label, start_text
        self.info = info

    def _markdown(self) -> str:
        return welcome_markdown(
            first=self.first,
            workspace=self.workspace,
            device_line=device_line(self.info, self.datasheet_gpu),
            start=self.start_text,
        )

    def compose(self) -> ComposeResult:
        from gpulab.tui.markdown import LabMarkdown as Markdown

        with VerticalScroll(id="welcome", classes="dialog wide") as box:
            box.border_title = "gpulab"
            yield Markdown(self._markdown(), id="welcome-text")
            with Horizontal(classes="buttons"):
                yield Button(self.start_label, variant="primary", id="start")
                yield Button("Look around", id="close")

    def on_mount(self) -> None:
        self.query_one("#start", Button).focus()

    def show_device(self, info: GpuInfo) -> None:
        self.info = info
        if self.is_mounted:
            self.query_one("#welcome-text").update(self._markdown())  # type: ignore[attr-defined]

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "start")

    def action_close(self, start: bool) -> None:
        self.dismiss(start)
