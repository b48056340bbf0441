"""A roofline on textual-plotext's PlotextPlot, redrawn on every render.

plotext applies log scales to its data in place when it builds, so building
the same figure twice (PlotextPlot builds on every repaint and resize) takes
the log of a log and fails ("math domain error", plotext 5.3). This widget
keeps the model and redraws the figure from it before each build. A plot
that still fails shows a message instead of taking the app down.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from rich.text import Text


def roofline_plot(id: str) -> Any:
    """A RooflinePlot widget (textual_plotext is imported only when one is made)."""
    return _plot_class()(id=id)


@lru_cache(maxsize=1)
def _plot_class() -> type:
    from textual_plotext import PlotextPlot

    class RooflinePlot(PlotextPlot):
        def __init__(self, *, id: str | None = None) -> None:
            super().__init__(id=id)
            self.model: Any = None

        def show_model(self, model: Any) -> None:
            self.model = model
            self.refresh()

        def render(self) -> Any:
            plt = self.plt
            plt.clear_data()
            plt.clear_figure()
            try:
                if self.model is not None:
                    from gpulab.gpu import roofline_plot

                    size = self.content_size
                    cells = roofline_plot.plot_cells(self.model, size.width, size.height)
                    roofline_plot.draw(plt, self.model, cells)
                return super().render()
            except Exception as exc:  # noqa: BLE001 - a plot must never crash the lab
                return Text(
                    f"The roofline could not be drawn here: {type(exc).__name__}: "
                    f"{exc}. The numbers below are unaffected.",
                    style="yellow",
                )

    return RooflinePlot
