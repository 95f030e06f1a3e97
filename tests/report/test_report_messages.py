"""The report renders every coded sentence of the judgement in each of its languages.

``tests/fixtures/messages/values.json`` holds, for every code, values recorded from real
analyses and judgements (the detectors on the synthetic fault traces, runs of the daemon and
of clusters, the criteria and reasons they gave); a few shapes no recorded run produced were
made by the producers or written in their shape.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from soak.analysis.messages import ENGLISH, say
from soak.report.i18n import CHINESE
from soak.report.sentences import TABLES, message

VALUES = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "messages" / "values.json").read_text())
# words that are the same in both reports: names of things, units, vendor terms
SHARED_WORDS = {"min", "busbw", "rank", "ranks", "all", "reduce", "gemm", "tflop", "hbm", "cv", "dense", "nvidia", "sxm",
                "datasheet", "with", "sparsity", "half", "without", "bf16", "tflops", "h100", "h200", "rss", "cpu",
                "ettr", "ecc", "xid", "gpu"}


def _said_values(values: object) -> set[str]:
    """Every text a value holds (names of nodes, chips, workloads, messages)."""
    out: set[str] = set()
    if isinstance(values, dict):
        for v in values.values():
            out |= _said_values(v)
    elif isinstance(values, list):
        for v in values:
            out |= _said_values(v)
    elif isinstance(values, str):
        out.add(values)
    return out


def test_every_code_has_a_template_in_every_language_with_the_same_fields():
    assert set(VALUES) == set(ENGLISH), "record values for every code"
    for lang, table in TABLES.items():
        assert set(table) == set(ENGLISH), (lang, set(ENGLISH) ^ set(table))
    for code, en in ENGLISH.items():
        fields = set(re.findall(r"\{(\w+)", en)) | set(re.findall(r"\[\[!?(\w+)\|", en))
        zh = set(re.findall(r"\{(\w+)", CHINESE[code])) | set(re.findall(r"\[\[!?(\w+)\|", CHINESE[code]))
        # a language may leave a value unsaid only where English does; it never invents one
        assert zh <= fields | {"z", "confidence"}, (code, zh - fields)


@pytest.mark.parametrize("code", sorted(ENGLISH))
def test_every_code_renders_in_english_and_chinese_from_recorded_values(code):
    values = VALUES[code]
    assert say(code, values)  # the analysis document's English
    en, zh = message(code, values, "en"), message(code, values, "zh")
    assert en and zh and "{" not in en + zh and "[[" not in en + zh
    assert en != zh or re.fullmatch(r"[\W\d_a-zA-Z./-]*", en), code  # only names, numbers and marks alike
    # no English sentence left in the Chinese: after the values' own texts, only shared words
    rest = zh
    for text in sorted(_said_values(values), key=len, reverse=True):
        rest = rest.replace(text, " ")
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]+", rest)}
    english = {w for w in words if len(w) > 2} - SHARED_WORDS
    assert not english, (code, zh, english)


def test_the_english_summary_is_the_code_said_without_the_reports_names():
    """``say`` (the analysis document's ``summary``) writes machine keys as they are; the
    report writes the same sentence with its names."""
    values = VALUES["memory_creep.runs_out_within_required"]
    assert say("memory_creep.runs_out_within_required", values).startswith(f"{values['metric']} creeps")
    assert message("memory_creep.runs_out_within_required", values, "en").startswith("HBM in use creeps")
    assert message("memory_creep.runs_out_within_required", values, "zh").startswith("HBM 占用自")


def test_an_unknown_code_is_shown_as_written_never_guessed():
    assert message("memory_creep.from_a_newer_soak", {"x": 1}, "zh", fallback="as judged") == "as judged"
    assert message("", {}, "zh", fallback=None) == "N/A"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_negative_figure_rounded_to_nothing_is_written_without_a_sign(lang: str) -> None:
    # a node's peers at -0.04 MB/h were "-0.0 MB/h": a sign the figure has not
    values = {"metric": "hbm_used_bytes", "slope_mb_per_h": 20.0, "segments": 5, "deviation_mb_per_h": -0.04,
              "scope": "cluster", "baseline_mb_per_h": -0.04, "limit_mb_per_h": 6.9, "growth_min_mb": 60.0,
              "growth_max_mb": 240.0}
    text = message("outlier.restarts.hbm_used_bytes", values, lang)  # a chip's leak across restarts, on its peers
    assert "-0.0" not in text and "+0.0 MB/h" in text and " 0.0 MB/h" in text, text
