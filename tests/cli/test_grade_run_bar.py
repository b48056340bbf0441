"""`gpulab grade run`'s progress bar: what it counts and the lines it prints
for a failed task, from a worker's lines and from the result files a Slurm
array wrote (no grading here: the lines and files are made by hand)."""

from __future__ import annotations

import json

from gpulab.cli.commands.grade_run import _Bar, _new_results


def test_the_bar_counts_tasks_and_names_the_failed(tmp_path, capsys):
    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "softmax.json").write_text(
        json.dumps(
            {
                "student": "ann",
                "exercise": "softmax",
                "result": {"status": "failed", "summary": "wrong"},
            }
        )
    )
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "copy.json").write_text("{")  # unreadable
    bar = _Bar(4)
    with bar:
        _new_results(tmp_path, set(), bar)
        bar.worker_line({"event": "start", "student": "cy", "exercise": "copy"})
        bar.worker_line({"event": "skipped", "student": "cy", "exercise": "copy"})
        bar.worker_line({"event": "done", "student": "dee", "status": "passed", "seconds": 1.0})
    assert (bar.done, bar.failed) == (4, 2)
    err = capsys.readouterr().err
    assert "ann softmax: failed: wrong" in err
    assert "None None: error:" in err  # an unreadable file names no one, as ever
