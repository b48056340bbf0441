"""Markdown parsed on several threads at once must not crash the lab.

mdurl fills its percent-encoding tables lazily and not atomically; Textual
parses each Markdown widget in a thread pool. CI saw the lab die with
IndexError in mdurl.encode. gpulab.tui.markdown builds the tables on import.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_the_url_tables_are_whole_before_any_markdown_parses():
    code = textwrap.dedent(
        """
        import mdurl._encode as enc, mdurl._decode as dec
        assert not enc.encode_cache and not dec.decode_cache, "already built before gpulab"
        import gpulab.tui.markdown
        assert len(enc.encode_cache[enc.ENCODE_DEFAULT_CHARS]) == 128
        assert len(dec.decode_cache[dec.DECODE_DEFAULT_CHARS + "%"]) == 128
        """
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
