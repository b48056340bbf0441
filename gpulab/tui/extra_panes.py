"""Roofline, Device and Roadmap panes (placeholder; filled in below)."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from gpulab.content import Lesson
from gpulab.tui.devinfo import GpuInfo


class _LazyPane(VerticalScroll):
    HELP_TOPIC = ""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, can_focus=True)
        self._built = False

    def compose(self) -> ComposeResult:
        yield Static("", classes="pane-body")

    def ensure_rendered(self) -> None:
        self._built = True


class RooflinePane(_LazyPane):
    HELP_TOPIC = "roofline"

    def set_lesson(self, lesson: Lesson) -> None:
        pass

    def export_svg(self) -> None:
        pass


class DevicePane(_LazyPane):
    HELP_TOPIC = "device"

    def show_gpu_info(self, info: GpuInfo) -> None:
        pass

    def run_probe(self) -> None:
        pass


class RoadmapPane(_LazyPane):
    HELP_TOPIC = "roadmap"


_ = Any
