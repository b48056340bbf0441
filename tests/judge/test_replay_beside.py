"""Kernels from files beside the checked one (issue 27).

The references load their Hopper kernels from kernels/hopper/*.py, the one
folder beside the checked file its sandbox may read. The replay keeps
those files' kernels, read by the judge itself (gpulab.judge.beside): only
from a folder the sandbox could read, never through a link. Real checks in
real child processes, in the Triton interpreter; the Hopper kernels, which
Gluon cannot interpret, are compiled for sm_90 on this CPU.
"""

from __future__ import annotations

import os
import threading

import pytest

from gpulab.judge.beside import MAX_BYTES, read_beside, where_problem
from gpulab.sandbox.replay_source import extract
from tests.conftest import REPO

HELPER = """
import triton
import triton.language as tl


@triton.jit
def row_softmax(y_ptr, x_ptr, xs, ys, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * xs + offs, mask=offs < n, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * ys + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n)
"""

MAIN = """
import importlib.util
from pathlib import Path

import torch
import triton

_spec = importlib.util.spec_from_file_location(
    "attempt_parts", Path(__file__).parent / "hopper" / "rowk.py"
)
_parts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_parts)


def softmax(x):
    rows, n = x.shape
    y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(n)
    _parts.row_softmax[(rows,)](y, x, x.stride(0), y.stride(0), n, BLOCK=block)
    return y
"""


def _attempt(tmp_path, helper: str = HELPER):
    """A file laid out as a reference is: kernels/X.py, kernels/hopper/."""
    folder = tmp_path / "kernels"
    (folder / "hopper").mkdir(parents=True)
    (folder / "hopper" / "rowk.py").write_text(helper)
    path = folder / "softmax_attempt.py"
    path.write_text(MAIN)
    return folder, path


def test_a_kernel_from_the_hopper_folder_beside_the_checked_file_is_replayed(grade, tmp_path):
    _, path = _attempt(tmp_path)
    r = grade("softmax", path, timing=False)
    assert r["status"] == "passed", (r["summary"], r.get("message"))


def test_a_kernel_beside_it_that_the_replay_cannot_keep_is_named(grade, tmp_path):
    # The helper's kernel reads a module the replay does not have: its launch
    # is refused, and the message names the helper's kernel and why.
    helper = HELPER.replace("import triton\n", "import os\nimport triton\n").replace(
        "row = tl.program_id(0)", "row = tl.program_id(0) + os.getpid() * 0"
    )
    _, path = _attempt(tmp_path, helper)
    r = grade("softmax", path, timing=False)
    assert r["status"] == "failed", r["summary"]
    assert "row_softmax" in r["message"] and "`os`" in r["message"], r["message"]


def test_a_kernel_file_reached_through_a_link_is_not_read(grade, tmp_path):
    # hopper/rowk.py is a link: the sandbox imports through it, the judge
    # opens no link (one could lead to another user's files).
    folder, path = _attempt(tmp_path)
    (folder / "hopper" / "rowk.py").rename(folder / "hopper" / "real.py")
    (folder / "hopper" / "rowk.py").symlink_to(folder / "hopper" / "real.py")
    r = grade("softmax", path, timing=False)
    assert r["status"] == "failed", r["summary"]
    assert "rowk.py" in r["message"] and "link" in r["message"], r["message"]


# A kernel of the checked file that claims to come from another file beside
# it (its code object's file name rewritten): the judge must not read that
# file (another student's, say) and quote its names back.
CLAIMS_ANOTHER_FILE = (
    "from pathlib import Path\n\nimport torch\n"
    + HELPER  # its imports and its kernel, now in the checked file
    + """

_other = str(Path(__file__).parent / "{other}")
row_softmax.fn.__code__ = row_softmax.fn.__code__.replace(co_filename=_other)


def softmax(x):
    rows, n = x.shape
    y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(n)
    row_softmax[(rows,)](y, x, x.stride(0), y.stride(0), n, BLOCK=block)
    return y
"""
)


@pytest.mark.parametrize("other", ["classmate.py", "hopper/classmate.py"])
def test_a_record_naming_another_file_does_not_make_the_judge_read_it(grade, tmp_path, other):
    folder, _ = _attempt(tmp_path)
    secret = "@triton.jit\ndef row_softmax(x):\n    SECRET_ANSWER_NAME(x)\n"
    (folder / "classmate.py").write_text(secret)
    path = folder / "softmax_claims.py"
    path.write_text(CLAIMS_ANOTHER_FILE.replace("{other}", "classmate.py"))
    if other.startswith(
        "hopper/"
    ):  # the hopper folder is read: a file there is the judge's own read
        (folder / "hopper" / "classmate.py").write_text(secret)
        path.write_text(CLAIMS_ANOTHER_FILE.replace("{other}", other))
    r = grade("softmax", path, timing=False)
    assert r["status"] == "failed", r["summary"]
    if other == "classmate.py":
        assert "defined at the top level of softmax_claims.py" in r["message"], r["message"]
        assert "SECRET_ANSWER_NAME" not in r["message"], r["message"]
    else:  # read (the sandbox could read it too), and its kernel is not the one launched
        assert "row_softmax" in r["message"], r["message"]


# --- where the judge reads ---------------------------------------------------------


def test_only_python_files_inside_the_folders_the_sandbox_reads_are_read(tmp_path):
    folders = [str(tmp_path / "w" / "hopper")]
    assert where_problem(folders, str(tmp_path / "w" / "hopper" / "k.py")) == ""
    assert where_problem(folders, str(tmp_path / "w" / "hopper" / "sub" / "k.py")) == ""
    for path, why in (
        (str(tmp_path / "w" / "k.py"), "not in hopper/"),
        (str(tmp_path / "other" / "k.py"), "not in hopper/"),
        (str(tmp_path / "w" / "hopper" / ".." / "k.py"), "not a plain absolute"),
        ("w/hopper/k.py", "not a plain absolute"),
        (str(tmp_path / "w" / "hopper" / "a" / "b" / "k.py"), "folders down"),
        (str(tmp_path / "w" / "hopper" / "k.so"), "not a .py file"),
        (str(tmp_path / "w" / "hopper" / ".hidden" / "k.py"), "hidden"),
        (None, "names no file"),
        (str(tmp_path / "w" / "hopper" / "k\x00.py"), "names no file"),
    ):
        assert why in where_problem(folders, path), (path, where_problem(folders, path))
    assert "no file beside" in where_problem([], str(tmp_path / "w" / "hopper" / "k.py"))


def test_a_file_beside_is_read_without_links_blocking_or_size(tmp_path):
    w = tmp_path / "w"
    (w / "hopper" / "sub").mkdir(parents=True)
    folders = [str(w / "hopper")]
    (w / "hopper" / "k.py").write_text("X = 1\n")
    assert read_beside(folders, str(w / "hopper" / "k.py")) == (b"X = 1\n", "")
    # A link as the file, as a folder on the way, or as the folder itself.
    (tmp_path / "secret.py").write_text("TOKEN = 'x'\n")
    (w / "hopper" / "s.py").symlink_to(tmp_path / "secret.py")
    (w / "hopper" / "via").symlink_to(tmp_path)
    (w / "linked").symlink_to(w / "hopper")
    for path, where in (
        (w / "hopper" / "s.py", folders),
        (w / "hopper" / "via" / "secret.py", folders),
        (w / "linked" / "k.py", [str(w / "linked")]),
    ):
        data, why = read_beside(where, str(path))
        assert data is None and "link" in why, (path, why)
    # A FIFO would hold a plain open() until a writer came: refused at once.
    os.mkfifo(w / "hopper" / "f.py")
    done: list = []
    fifo = str(w / "hopper" / "f.py")
    t = threading.Thread(target=lambda: done.append(read_beside(folders, fifo)))
    t.start()
    t.join(10)
    assert done and done[0][0] is None and "plain file" in done[0][1], done
    (w / "hopper" / "big.py").write_bytes(b"#" * (MAX_BYTES + 1))
    assert "over" in read_beside(folders, str(w / "hopper" / "big.py"))[1]
    assert "cannot be read" in read_beside(folders, str(w / "hopper" / "none.py"))[1]


# --- the references' Hopper kernels ---------------------------------------------


@pytest.mark.parametrize("name", ["softmax_smem", "flash_attention_fa3"])
def test_the_references_hopper_kernels_are_kept_whole(name):
    kept = extract((REPO / "kernels" / "hopper" / f"{name}.py").read_text())
    assert not kept.problems, kept.problems
    launched = {"softmax_smem": "softmax_smem", "flash_attention_fa3": "attention_fa3"}[name]
    assert launched in kept.kernels and "import" not in kept.text


@pytest.mark.parametrize(
    "value, kept",
    [
        ('getattr(gl, "barrier", None) or getattr(gl, "thread_barrier", None)', True),
        ('getattr(gl, "no_such_name", None) or gl.program_id', True),
        ('getattr(tma, "async_load", None) or tma.async_copy_global_to_shared', True),
        ('getattr(gl, "no_such_name", None)', False),  # none of them exists
        ('getattr(gl, "_semantic", None) or gl.program_id', False),
        ('getattr(gl, "data", None) or gl.program_id', False),
        ("getattr(gl, NAME, None) or gl.program_id", False),
        ('getattr(gl, "program_id", 1) or gl.program_id', False),
        ('getattr(os, "system", None) or gl.program_id', False),
        ('getattr(gl, "program_id", None) or print', False),
    ],
)
def test_a_name_that_moved_between_triton_releases_is_kept_by_its_shim(value, kept):
    # Gluon renamed some names after Triton 3.6 (thread_barrier -> barrier,
    # async_copy_global_to_shared -> async_load): a constant that takes
    # whichever this release has is kept, as long as each operand reads one
    # attribute of an allowed module, not `_`-named or denied.
    pytest.importorskip("triton.experimental.gluon")
    src = (
        "import os\n"
        "from triton.experimental import gluon\n"
        "from triton.experimental.gluon import language as gl\n"
        "from triton.experimental.gluon.language.nvidia.hopper import tma\n"
        'NAME = "program_id"\n'
        f"_shim = {value}\n\n\n"
        "@gluon.jit\ndef k(x_ptr):\n    _shim(0)\n"
    )
    found = extract(src)
    assert (found.kernels == ("k",)) is kept, found.problems


def test_a_kernel_cannot_call_getattr_itself():
    src = (
        "import triton\nimport triton.language as tl\n\n\n"
        '@triton.jit\ndef k(x_ptr):\n    getattr(tl, "program_id", None)(0)\n'
    )
    assert "getattr" in extract(src).problems["k"]


def _kept_ptx_pairs(name: str, kernel: str, sig: dict, constexprs: dict, warps: int) -> tuple:
    import triton
    from triton.backends.compiler import GPUTarget

    from gpulab.course.compile_specs import load_module
    from gpulab.perf.compile_info import _source
    from gpulab.sandbox.replay import kernels

    path = REPO / "kernels" / "hopper" / f"{name}.py"
    kept = extract(path.read_text())
    replayed = kernels(kept.text, kept.modules, list(kept.kernels))[kernel]
    own = getattr(load_module(path, f"gpulab_test_{name}"), kernel)

    def ptx(fn) -> str:
        source = _source(fn, sig, constexprs, True, set())
        out = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
        # Debug lines name the file: the replay's copy is another file.
        lines = out.asm["ptx"].splitlines()
        return "\n".join(s for s in lines if not s.strip().startswith((".file", ".loc")))

    return ptx(replayed), ptx(own)


def test_the_kept_hopper_softmax_compiles_to_the_files_own_code():
    pytest.importorskip("triton.experimental.gluon")
    import torch

    from gpulab.course.compile_specs import load_module

    m = load_module(REPO / "kernels" / "hopper" / "softmax_smem.py", "gpulab_test_smem_layout")
    d = f"tensordesc<fp16[32, {m.BOX}],{m.shared_layout(torch.float16)!r}>"
    sig = {"x_desc": d, "y_desc": d, "n_rows": "i32"}
    sig |= {k: "constexpr" for k in ("R", "NSLOT", "ONE_EXP")}
    replayed, own = _kept_ptx_pairs(
        "softmax_smem", "softmax_smem", sig, {"R": 128, "NSLOT": 12, "ONE_EXP": False}, 8
    )
    assert "softmax_smem" in own and replayed == own


def test_the_kept_hopper_attention_compiles_to_the_files_own_code():
    pytest.importorskip("triton.experimental.gluon")
    from triton.experimental.gluon import language as gl

    def desc(rows: int) -> str:
        lay = gl.NVMMASharedLayout.get_default_for([rows, 128], gl.float16)
        return f"tensordesc<fp16[{rows}, 128],{lay!r}>"

    sig = {"q_desc": desc(64), "k_desc": desc(128), "v_desc": desc(128), "o_desc": desc(64)}
    sig |= {"Sq": "i32", "Sk": "i32", "qk_scale": "fp32", "G": "i32"}
    ce = {"CAUSAL": True, "STAGES": 2, "NUM_WG": 2, "PINGPONG": True, "POLY": 0, "SPLIT": False}
    sig |= {k: "constexpr" for k in ce}
    replayed, own = _kept_ptx_pairs("flash_attention_fa3", "attention_fa3", sig, ce, 4)
    assert "wgmma" in own and replayed == own
