"""gpulab.sandbox.isolation.readable_rules: the paths Landlock allows so that
the read trees are readable except the hidden paths in them (a grader's
source and bytecode). It runs at every sandbox's start, so it is written
with sets; here it is held to the plain definition, on a real tree and on
the policy a real check uses."""

from __future__ import annotations

from pathlib import Path

from gpulab.sandbox.isolation import readable_rules


def plain_rules(trees: list[str], hidden: list[str]) -> list[str]:
    """The definition, spelt out: a path is allowed whole when no hidden
    path is it or under it; a hidden path is left out; a folder that holds
    one is opened child by child."""
    hidden_paths = [Path(h).resolve() for h in hidden]
    out: list[str] = []

    def visit(p: Path) -> None:
        inner = [h for h in hidden_paths if h == p or p in h.parents]
        if not inner:
            out.append(str(p))
            return
        if p in inner or not p.is_dir():
            return
        for child in sorted(p.iterdir()):
            visit(child)

    for tree in trees:
        visit(Path(tree).resolve())
    return out


def make_tree(root: Path) -> None:
    for rel in (
        "pkg/a.py",
        "pkg/graders/secret.py",
        "pkg/graders/__pycache__/secret.cpython-311.pyc",
        "pkg/graders/open.py",
        "pkg/deep/er/still/hidden.py",
        "pkg/deep/er/still/beside.py",
        "pkg/deep/other.py",
        "other/x.py",
        "gone/y.py",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("#")


def test_hidden_paths_are_left_out_and_their_siblings_allowed(tmp_path):
    make_tree(tmp_path)
    hidden = [
        str(tmp_path / "pkg/graders/secret.py"),
        str(tmp_path / "pkg/graders/__pycache__"),
        str(tmp_path / "pkg/deep/er/still/hidden.py"),
        str(tmp_path / "gone"),  # a whole tree hidden
        str(tmp_path / "pkg/not-there.py"),  # hidden but missing: nothing to leave out
    ]
    trees = [str(tmp_path / "pkg"), str(tmp_path / "other"), str(tmp_path / "gone")]
    rules = readable_rules(trees, hidden)
    assert rules == plain_rules(trees, hidden)
    assert set(rules) == {
        str(tmp_path / p)
        for p in (
            "pkg/a.py",
            "pkg/graders/open.py",
            "pkg/deep/er/still/beside.py",
            "pkg/deep/other.py",
            "other",
        )
    }


def test_the_rules_of_a_real_checks_policy_match_the_definition(tmp_path):
    from gpulab.judge.policy import policy_for
    from gpulab.wire.check_request import CheckRequest

    attempt = tmp_path / "softmax_attempt.py"
    attempt.write_text("#")
    request = CheckRequest("softmax", "softmax", str(attempt), device="cpu")
    policy = policy_for(request, "cpu", tmp_path / "p", tmp_path / "c", tmp_path / "o")
    assert policy.hidden  # the graders' source and bytecode
    rules = readable_rules(policy.read, policy.hidden)
    assert rules == plain_rules(policy.read, policy.hidden)
    for h in policy.hidden:
        assert not any(Path(h).resolve().is_relative_to(r) for r in rules), h
