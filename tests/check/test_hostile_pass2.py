"""A hostile submission must end as the learner's failure, with a message
naming what went wrong: never "gpulab could not run this check", never a
misleading crash, and the next honest check passes. Real checks, real child
processes, on the CPU (second red-team pass, 2026-12-04)."""

from __future__ import annotations

from tests.conftest import reference_source

ROW = reference_source("softmax_row")
COMM = reference_source("comm_cost")
CEILING = reference_source("copy_ceiling")
RING = "def ring_bytes(collective: str, nbytes: float, n: int) -> float:\n"


def returning(source: str, head: str, value: str) -> str:
    """`source` with the function whose first line is `head` returning `value` at once."""
    assert head in source
    return source.replace(head, f"{head}    return {value}\n", 1)


def test_an_int_of_more_digits_than_json_reads_is_the_submissions_failure(grade):
    """A frame holding an int of 5000 digits is well-formed JSON that
    json.loads refuses with a plain ValueError: it was "gpulab could not run
    this check"."""
    src = (
        "import os, struct, sys, time\n"
        "def softmax(x):\n"
        "    frame = b'{\"type\": \"return\", \"n\": ' + b'1' * 5000 + b'}'\n"
        "    os.write(int(sys.argv[-1]), struct.pack('<I', len(frame)) + frame)\n"
        "    time.sleep(30)\n"
    )
    r = grade("softmax_row", src, timeout=60)
    assert r["status"] == "failed", r["summary"]
    assert "private channel" in r["summary"]
    assert grade("softmax_row", ROW)["passed"]


def test_a_returned_int_past_a_floats_range_is_a_wrong_answer(grade):
    """`return 10**400` from a plain function: the graders' isfinite and
    formatting raised OverflowError in the judge ("gpulab could not run
    this check"). It is a wrong answer, shown as inf."""
    r = grade("comm_cost", returning(COMM, RING, "10**400"))
    assert r["status"] == "failed", r["summary"]
    assert "got inf" in r["summary"]
    head = "def buffer_bytes(l2, free):\n"
    r = grade("copy_ceiling", returning(CEILING, head, "-(10**400)"))
    assert r["status"] == "failed", r["summary"]
    assert "-inf" in r["summary"]


def test_a_number_past_a_floats_range_is_no_number():
    from gpulab.wire.benches import Bench
    from gpulab.wire.protocol import number
    from gpulab.wire.sandbox_start import PlainReturned

    assert number(10**400) is None
    assert PlainReturned.parse({"type": "return", "value": {"a": [10**400, 3]}}).value == {
        "a": [float("inf"), 3]
    }
    assert Bench.parse({"type": "bench", "values": [-(10**400), 2.0]}).values == (
        float("-inf"),
        2.0,
    )


def test_a_result_too_large_to_send_is_named_not_an_exit(grade):
    """A value the sandbox cannot put in a frame (an int of more than 4300
    digits, a 20 MB string) ended the sandbox: "your code exited (code 1)",
    with the hint not to call sys.exit."""
    for value in ("10**5000", "'x' * (20 << 20)"):
        r = grade("comm_cost", returning(COMM, RING, value))
        assert r["status"] == "failed", (value, r["summary"])
        assert "cannot be sent to the grader" in r["summary"], r["summary"]
        assert "exit" not in r["summary"]
    assert grade("comm_cost", COMM)["passed"]


def test_an_exception_with_a_huge_message_is_shown_cut(grade):
    """An exception whose text is 20 MB: its reply did not fit a frame, and
    the learner read "your code exited (code 0)"."""
    src = "def softmax(x):\n    raise ValueError('boom ' + 'x' * (20 << 20))\n"
    r = grade("softmax_row", src)
    assert r["status"] == "failed", r["summary"]
    assert "ValueError: boom" in r["summary"]
    assert len(r["summary"]) <= 20000 and len(r["message"]) <= 20000


def test_a_lone_surrogate_in_an_exception_is_shown_not_a_crash_of_the_cli(tmp_path, run_gpulab):
    """JSON's "\\ud800" makes a lone surrogate in the summary, which no
    terminal can encode: the plain CLI died with UnicodeEncodeError while
    printing the result (already recorded, with a traceback, exit 1). It
    is shown as its escape, like the other characters a terminal must not
    get raw (gpulab.textsafe)."""
    sub = tmp_path / "surrogate.py"
    sub.write_text('def softmax(x):\n    raise ValueError("lone \\ud800 surrogate")\n')
    r = run_gpulab("check", "softmax_row", "--file", str(sub), timeout=180)
    assert "UnicodeEncodeError" not in r.stderr, r.stderr[-2000:]
    assert r.returncode == 1, r.stderr[-2000:]
    assert "lone \\ud800 surrogate" in r.stdout


def test_a_scratch_buffer_torch_cannot_compare_is_not_the_sandboxs_failure(grade):
    """A correct softmax that also allocates a complex32 or a meta tensor
    with torch.empty: the guard's canary behind that buffer could not be
    compared (torch.equal has no complex32 or meta kernel), and the check
    failed with "the sandbox failed: NotImplementedError" and a gpulab
    traceback."""
    wrapped = ROW.replace("def softmax(x", "def _softmax(x")
    for scratch in ("torch.empty(8, dtype=torch.complex32)", "torch.empty(8, device='meta')"):
        src = wrapped + f"\n\ndef softmax(x):\n    scratch = {scratch}\n    return _softmax(x)\n"
        r = grade("softmax_row", src)
        assert r["passed"], (scratch, r["summary"])
    src = wrapped + "\n\ndef softmax(x):\n    return torch.empty_like(x, device='meta')\n"
    r = grade("softmax_row", src)
    assert r["status"] == "failed", r["summary"]
    assert "the sandbox failed" not in r["summary"]


def test_a_sparse_or_nested_result_is_named(grade):
    """A result that is a tensor without storage or strides: the sandbox's
    own reading of it raised, and the check said "the sandbox failed:
    NotImplementedError: Cannot access storage of SparseTensorImpl"."""
    wrapped = ROW.replace("def softmax(x", "def _softmax(x")
    for made, named in (
        ("_softmax(x).to_sparse()", "layout sparse_coo"),
        ("torch.nested.nested_tensor([_softmax(x)[0]])", "a nested tensor"),
    ):
        r = grade("softmax_row", wrapped + f"\n\ndef softmax(x):\n    return {made}\n")
        assert r["status"] == "failed", r["summary"]
        assert named in r["summary"] and "dense tensor" in r["summary"], r["summary"]


def test_closing_the_sandboxs_channel_is_named_not_a_missing_mask(grade):
    """The learner's code closed (or shut down) its socket to the judge:
    the sandbox's OSError went up through the interpreter's teardown, which
    died of SIGSEGV, and the learner read "out of bounds: a missing mask?"."""
    wrapped = ROW.replace("def softmax(x", "def _softmax(x")
    for act in (
        "os.close(int(sys.argv[-1]))",
        "socket.socket(fileno=os.dup(int(sys.argv[-1]))).shutdown(socket.SHUT_RDWR)",
    ):
        src = "import os, socket, sys\n" + wrapped
        src += f"\n\ndef softmax(x):\n    {act}\n    return _softmax(x)\n"
        r = grade("softmax_row", src)
        assert r["status"] == "crashed", r["summary"]
        assert "channel" in r["summary"] and "mask" not in r["summary"], r["summary"]
    assert grade("softmax_row", ROW)["passed"]


# The learner's code rewrites the sandbox's replies before they are sent (it
# runs in that process): `{mutation}` edits `msg`, a reply of type `t`.
FORGER = """
import gpulab.sandbox.main as _main
_write = _main.write_frame
def _forged(fd, msg):
    t = msg.get("type")
    {mutation}
    _write(fd, msg)
_main.write_frame = _forged
"""


def forging(mutation: str) -> str:
    return ROW.replace("import torch\n", "import torch\n" + FORGER.format(mutation=mutation), 1)


def test_a_float_argument_past_a_floats_range_is_a_malformed_launch(grade):
    """A recorded launch's float argument "0x1p+1024000": float.fromhex
    raised OverflowError while the judge typed the reply ("gpulab could not
    run this check")."""
    from gpulab.wire.launch_record import OtherArg, parse_arg

    assert parse_arg({"__float__": "0x1.0p+1024000"}) == OtherArg()
    src = forging(
        'if t == "return" and msg["report"].get("replay"):\n'
        '        for launch in msg["report"]["replay"]["launches"]:\n'
        '            launch["args"]["n_cols"] = {"__float__": "0x1.0p+1024000"}'
    )
    r = grade("softmax_row", src)
    assert r["status"] == "failed", r["summary"]
    assert "came back malformed" in r["message"], r["message"]


def test_a_long_returned_value_is_quoted_cut(grade):
    """ring_bytes returning a 2 MiB string: each of 54 cases quoted it
    whole, the result came to over the 16 MiB a frame holds, and the check
    ended "the grader stopped without a result" (gpulab's error)."""
    r = grade("comm_cost", returning(COMM, RING, "'x' * (2 << 20)"))
    assert r["status"] == "failed", r["summary"]
    assert f"({(2 << 20) + 2} characters)" in r["summary"], r["summary"][:400]
    assert all(len(c.get("detail") or "") < 1000 for c in r["cases"])


def test_a_profile_row_past_a_floats_range_is_not_gpulabs_error(grade):
    """find_bottleneck's profile rows are the sandbox's report: a row whose
    `calls` is 10**400 made protocol.number raise OverflowError in the judge
    ("gpulab could not run this check"). It reads as no number."""
    forger = FORGER.format(
        mutation='if t == "blocks":\n'
        '        for op in msg.get("ops") or []:\n'
        '            op["calls"] = 10**400'
    )
    r = grade("find_bottleneck", forger + reference_source("find_bottleneck"))
    assert r["status"] in ("passed", "failed"), r["summary"]
    assert "could not run" not in r["summary"]


BAD_STR = """
class E(Exception):
    def __str__(self):
        raise ValueError("no str for you")
"""


def test_an_exception_whose_str_raises_is_the_learners_failure(grade):
    """The learner's exception's __str__ raised while the sandbox read its
    message: a call said "the sandbox failed: ValueError" with gpulab's
    traceback, and an import ended as gpulab's error ("the sandbox could not
    load your file", status error, not recorded as an attempt)."""
    r = grade("softmax_row", BAD_STR + "def softmax(x):\n    raise E()\n")
    assert r["status"] == "failed", r["summary"]
    assert r["summary"].startswith("your code raised E"), r["summary"]
    assert "badstr" not in r["message"] and "learner.py" not in r["message"]
    r = grade("softmax_row", BAD_STR + "raise E()\n")
    assert r["status"] == "failed", r["summary"]
    assert "importing" in r["summary"] and "E" in r["summary"], r["summary"]


def test_a_module_getattr_that_raises_is_the_learners_failure(grade):
    """A module-level __getattr__ that raises (not AttributeError) when the
    sandbox looks for the function: its reply to `load` was "broken", and
    the judge ended the check as its own error ("the sandbox could not load
    your file", status error, not recorded as an attempt)."""
    src = "def __getattr__(name):\n    raise ValueError('no ' + name)\n"
    r = grade("softmax_row", src)
    assert r["status"] == "failed", r["summary"]
    assert "ValueError: no softmax" in r["summary"], r["summary"]
    assert grade("softmax_row", ROW)["passed"]


HOSTILE_FLOAT = """
class BadFloat(float):
    def __float__(self):
        raise ValueError("no float")
"""


def test_a_returned_number_whose_float_raises_is_the_learners_failure(grade):
    """A float subclass whose __float__ raises, returned from a plain
    function (comm_cost) or from the copy benchmark (copy_ceiling): the
    sandbox's reading of it raised, and the check said "the sandbox
    failed: ValueError" with gpulab's traceback."""
    r = grade("comm_cost", HOSTILE_FLOAT + returning(COMM, RING, "BadFloat(1.0)"))
    assert r["status"] == "failed", r["summary"]
    assert "could not be read: ValueError: no float" in r["summary"], r["summary"]
    head = "def copy_bandwidth(gpu, nbytes):\n"
    r = grade("copy_ceiling", HOSTILE_FLOAT + returning(CEILING, head, "BadFloat(1.0)"))
    assert r["status"] == "failed", r["summary"]
    assert "could not be read: ValueError: no float" in r["summary"], r["summary"]


def test_a_tensor_subclass_whose_own_code_raises_is_the_learners_failure(grade):
    """A returned tensor subclass whose __torch_function__ raises: the
    sandbox's reading of its shape and storage ran it, and the check said
    "the sandbox failed: ValueError" with gpulab's traceback."""
    src = ROW.replace("def softmax(x", "def _softmax(x") + (
        "\n\nclass T(torch.Tensor):\n"
        "    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        raise ValueError('hostile tensor')\n"
        "\n\ndef softmax(x):\n"
        "    return torch.Tensor._make_subclass(T, _softmax(x))\n"
    )
    r = grade("softmax_row", src)
    assert r["status"] == "failed", r["summary"]
    assert "reading what your function returned raised ValueError" in r["summary"], r["summary"]


def test_a_submission_swapped_for_a_fifo_after_the_look_does_not_hold_the_judge(
    tmp_path, monkeypatch
):
    """read_submission looks at the path, then opens it: a FIFO put there in
    between held the judge in open() until the check's timeout (no writer
    ever comes). Opened without blocking, it is named at once."""
    import os
    import threading

    from gpulab import fsutil
    from gpulab.judge.submission import read_submission

    fifo = tmp_path / "softmax.py"
    os.mkfifo(fifo)
    # The race, made certain: the look sees nothing wrong.
    monkeypatch.setattr(fsutil, "unreadable_file", lambda path: "")
    out: list[tuple[bytes | None, str]] = []
    reader = threading.Thread(target=lambda: out.append(read_submission(str(fifo))))
    reader.daemon = True
    reader.start()
    reader.join(10)
    assert out, "read_submission blocked on a FIFO"
    data, problem = out[0]
    assert data is None and "not a plain file" in problem


FORGED_BROKEN_LOAD = """
import gpulab.sandbox.main as _main
_write = _main.write_frame
def _forged(fd, msg):
    if msg.get("type") == "loaded":
        msg = {"type": "broken", "summary": "forged", "message": ""}
    _write(fd, msg)
_main.write_frame = _forged
"""


def test_a_forged_broken_reply_to_the_load_is_the_learners_failure(grade):
    """The load request delivers the file and runs it, so a "broken" reply
    to it read as gpulab's own error (status error, not recorded): a file
    could forge one. The sandbox marks the moment the file starts to run,
    and a broken reply after that mark is the file's."""
    src = ROW.replace("import torch\n", "import torch\n" + FORGED_BROKEN_LOAD, 1)
    assert src != ROW
    r = grade("softmax_row", src)
    assert r["status"] == "failed", r["summary"]
    assert "broke while your file was loading" in r["summary"]
    assert grade("softmax_row", ROW)["passed"]
