"""The Lesson pane shows a lesson's deep dives folded (gpulab/tui/deep_dive.py).

A folded deep dive is one title line: its text is not on screen and not even
built; unfolding it (a click, or enter on its focused title) renders it at
the core text's width, so a code line that fits the one fits the other.
"""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from gpulab.course.sections import split_sections  # noqa: E402
from gpulab.gpu.devinfo import GpuInfo  # noqa: E402
from gpulab.tui.app import build_app  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_deep_dives_are_folded_until_opened(tmp_path, course):
    from gpulab.tui.deep_dive import DeepDive
    from gpulab.tui.markdown import LabMarkdown, PlainFence

    lesson = course.find("bandwidth")
    deep = [s for s in split_sections(lesson.text()) if s.deep]
    assert deep, "lesson 01 has deep dives"
    app = build_app(tmp_path / "ws", device="cpu", welcome=False, gpu_info=GpuInfo())
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_lesson(lesson)
        pane = app.query_one("#lesson-pane")
        await pane.wait_rendered()
        await pilot.pause()
        dives = list(pane.query(DeepDive))
        assert [d.title for d in dives] == [f"Deep dive: {s.title}" for s in deep]
        assert all(d.collapsed and not d.filled for d in dives)
        assert not any(d.query(LabMarkdown) for d in dives), "a folded deep dive builds nothing"
        # Every core word is in the pane's Markdown, no deep dive's body is.
        core_md = " ".join(m.source for m in pane.query("#lesson-text > LabMarkdown"))
        assert "Step 1: measure the copy ceiling yourself" in core_md
        for s in deep:
            assert s.body.strip()[:60] not in core_md, s.title

        # Lesson 08's last deep dive holds a code block: unfold it by its
        # title, as a learner would.
        app.open_lesson(course.find("sharded_mlp"))
        await pane.wait_rendered()
        await pilot.pause()
        with_code = next(d for d in pane.query(DeepDive) if "```" in d.source)
        assert with_code.collapsed and not with_code.filled
        with_code.scroll_visible(animate=False)
        await pilot.pause()
        await pilot.click(with_code._title)
        for _ in range(100):
            await pilot.pause(0.05)
            fences = with_code.query(PlainFence)
            if with_code.filled and fences and fences.first().region.width:
                break
        assert not with_code.collapsed and with_code.filled
        assert with_code.query_one(LabMarkdown).source == with_code.source
        # Its code blocks start and end where the core's do.
        core_fence = pane.query("#lesson-text > LabMarkdown PlainFence").first()
        assert fences.first().region.x == core_fence.region.x
        assert fences.first().region.right == core_fence.region.right
