"""The glossary: the shipped data, forgiving lookup, search, validation, the CLI."""

from __future__ import annotations

import json

import pytest

from gpulab.course.glossary import GlossaryError, default_glossary, load_glossary, normalize

# Every key term of Part I that the issue lists.
ISSUE_TERMS = [
    "HBM bandwidth",
    "TFLOP/s ceiling",
    "arithmetic intensity",
    "roofline",
    "ridge point",
    "kernel launch cost",
    "memory movement",
    "fusion",
    "FlashAttention",
    "online softmax",
    "RoPE",
    "RMSNorm",
    "SM",
    "warp",
    "tensor core",
    "TMA",
    "L2",
    "occupancy",
    "TorchDynamo",
    "Inductor",
    "graph break",
    "CUDA graphs",
    "NVTX",
    "mesh",
    "PartitionSpec",
    "prefill",
    "decode",
    "KV cache",
    "FP8",
    "FP4",
    "Blackwell",
    "Vera Rubin",
]


@pytest.fixture(scope="module")
def gloss():
    return default_glossary()


def test_shipped_glossary_is_valid_and_complete(gloss, course):
    assert gloss.errors == ()
    assert len(gloss.terms) >= 60
    ids = {lesson.id for lesson in course.lessons}
    for term in gloss.terms:
        assert term.definition and term.lessons, term.name
        assert set(term.lessons) <= ids, term.name
    for name in ISSUE_TERMS:
        assert gloss.get(name) is not None, name
    assert "295" in gloss.get("ridge point").definition
    assert gloss.get("roofline").formula.startswith("attainable")


@pytest.mark.parametrize(
    "query,name",
    [
        ("hbm bandwidth", "HBM bandwidth"),
        ("ROOFLINE", "Roofline"),  # case
        ("warps", "Warp"),
        ("tensor cores", "Tensor core"),
        ("SMs", "SM"),  # plurals
        ("KV caches", "KV cache"),
        ("graph breaks", "Graph break"),
        ("cuda graph", "CUDA graphs"),
        ("AI", "Arithmetic intensity"),
        ("HBM", "HBM bandwidth"),  # abbreviations
        ("SM", "SM"),
        ("FA2", "FlashAttention"),
        ("L2", "L2 cache"),
        ("P", "PartitionSpec"),
        ("kv-cache", "KV cache"),
        ("flash attention", "FlashAttention"),  # spelling variants
        ("partition spec", "PartitionSpec"),
        ("TFLOPs", "TFLOP/s ceiling"),
        ("arithmatic intensity", "Arithmetic intensity"),
        ("occupency", "Occupancy"),  # typos
        ("rmsnrom", "RMSNorm"),
        ("torchdynamo", "TorchDynamo"),
        ("Rubin", "Vera Rubin"),
    ],
)
def test_lookup_forgives(gloss, query, name):
    term, suggestions = gloss.lookup(query)
    assert term is not None and term.name == name, (query, suggestions)


def test_unknown_term_gives_suggestions(gloss):
    term, suggestions = gloss.lookup("memory")
    assert term is None
    assert "Memory movement" in suggestions and "Memory-bound" in suggestions
    assert gloss.lookup("xyzzy quux") == (None, [])
    assert gloss.lookup("   ") == (None, [])


def test_search_ranks_names_first(gloss):
    assert [t.name for t in gloss.search("")] == sorted(
        (t.name for t in gloss.terms), key=str.lower
    )
    assert gloss.search("cuda graph")[0].name == "CUDA graphs"
    names = [t.name for t in gloss.search("memory")]
    assert set(names[:2]) == {"Memory movement", "Memory-bound"}  # names before aliases
    assert "HBM bandwidth" in names[2:5]  # alias "memory bandwidth"
    assert any(t.name == "Decode" for t in gloss.search("bandwidth"))  # definition text


def test_normalize():
    assert normalize("KV-Caches") == normalize("kv cache") == normalize("KVCache")
    assert normalize("SMs") == normalize("sm") == "sm"
    assert normalize("Batches") == normalize("batch")
    assert normalize("Boxes") == normalize("box") and normalize("TMAs") == "tma"


BAD = """
format_version = 1
[[term]]
name = "Good"
definition = "A fine entry."
aliases = ["G1"]
lessons = ["02_triton_101_softmax"]
see_also = ["Nowhere"]

[[term]]
name = "No definition"

[[term]]
name = "Typo"
definition = "x"
lesson = ["01_gpu_architecture_tour"]

[[term]]
name = "Wrong lesson"
definition = "x"
lessons = ["99_nope"]

[[term]]
name = "Dup"
definition = "x"
aliases = ["good"]
"""


def test_validation_names_file_and_entry(tmp_path):
    path = tmp_path / "glossary.toml"
    path.write_text(BAD)
    g = load_glossary(path, lesson_ids={"01_gpu_architecture_tour", "02_triton_101_softmax"})
    assert [t.name for t in g.terms] == ["Good"]
    errors = "\n".join(g.errors)
    assert all(str(path) in e for e in g.errors)
    assert "term 'No definition': field 'definition' is missing" in errors
    assert "term 'Typo': unknown field(s) lesson" in errors
    assert "term 'Wrong lesson': lesson '99_nope'" in errors
    assert "term 'Dup': 'good' already names term 'Good'" in errors
    assert "term 'Good': see_also 'Nowhere' is not a term" in errors
    path.write_text("[[term]\nname=")
    with pytest.raises(GlossaryError, match="not valid TOML"):
        load_glossary(path)
    with pytest.raises(GlossaryError, match="missing"):
        load_glossary(tmp_path / "absent.toml")


def test_cli_glossary(run_gpulab):
    r = run_gpulab("glossary", "ai")
    assert r.returncode == 0, r.stderr
    assert "Arithmetic intensity" in r.stdout and "I = FLOPs / bytes moved" in r.stdout
    assert "01 GPU architecture tour" in r.stdout
    r = run_gpulab("glossary", "xyzzy")
    assert r.returncode == 1 and "No glossary entry" in r.stderr
    r = run_gpulab("glossary", "memory", "--json")
    assert r.returncode == 1 and "Memory movement" in json.loads(r.stdout)["suggestions"]
    r = run_gpulab("glossary")
    assert r.returncode == 0 and "Vera Rubin" in r.stdout and "PartitionSpec" in r.stdout


def test_term_renderable_and_module_search(gloss):
    import io

    from rich.console import Console

    from gpulab.course import glossary

    assert glossary.search("rope")[0].name == "RoPE"
    assert glossary.lookup("SMs")[0].name == "SM"
    con = Console(width=80, record=True, file=io.StringIO())
    con.print(glossary.term_renderable(gloss.get("ridge point")))
    text = con.export_text()
    assert "I* = peak FLOP/s / bandwidth" in text and "01 GPU architecture tour" in text
