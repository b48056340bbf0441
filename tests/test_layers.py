"""tests/layers.py is the one list of where each gpulab module runs: every
module is in it, and pyproject.toml's import-linter contracts are the ones
it makes (tests/test_import_hygiene.py reads the same list)."""

from __future__ import annotations

from tests import layers


def _placement(modules: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """(modules in no list, {module: lists} for those in several)."""
    where = {
        m: [
            name
            for name, entries in (("LAB", layers.LAB), ("UI", layers.UI), ("CHILD", layers.CHILD))
            if layers.placed(entries, m)
        ]
        for m in modules
    }
    return (
        sorted(m for m, w in where.items() if not w),
        {m: w for m, w in where.items() if len(w) > 1},
    )


def test_every_module_is_in_exactly_one_layer():
    missing, twice = _placement(layers.modules())
    assert not missing, (
        f"modules in no list of tests/layers.py: {missing}; add each to "
        "LAB, UI or CHILD, then run `python -m tests.layers`"
    )
    assert not twice, f"modules in more than one list of tests/layers.py: {twice}"


def test_a_new_module_is_caught_until_it_is_placed():
    # gpulab/newthing.py and gpulab/tui/newpane.py, as the file walk would list them.
    missing, _ = _placement([*layers.modules(), "gpulab.newthing", "gpulab.tui.newpane"])
    assert missing == ["gpulab.newthing"]  # a new pane is in gpulab.tui.*, so placed


def test_every_entry_names_a_module():
    known = set(layers.modules())
    for entry in layers.LAB + layers.UI + layers.CHILD + layers.HEAVY + layers.DEVICE:
        assert entry.removesuffix(".*") in known, f"tests/layers.py: no module {entry}"
    for entry in layers.HEAVY:
        assert any(layers.covers(c, entry.removesuffix(".*")) for c in layers.CHILD), (
            f"{entry} is HEAVY but not CHILD: the lab's process would import torch"
        )


def test_pyproject_holds_the_contracts_the_list_makes():
    text = (layers.ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = layers.current_block(text)
    assert block is not None, "pyproject.toml lost the markers of the generated contracts"
    assert block == layers.contracts(), (
        "pyproject.toml's import-linter contracts differ from "
        "tests/layers.py: run `python -m tests.layers`"
    )
