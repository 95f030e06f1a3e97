"""The appendix: a demo run's recorded manifest and plan (tests/fixtures/report) as labelled
tables a customer reads, in English and Chinese: no raw dumps, no empty keys, no local paths,
no profile notes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from soak.analysis.profile import Profile
from soak.report.appendix import (
    appendix_tables,
    detector_name,
    environment_tables,
    local_path,
    plan_tables,
    threshold_lines,
    threshold_value,
)

MANIFEST = json.loads((Path(__file__).parents[1] / "fixtures" / "report" / "demo-manifest.json").read_text())
HOME = "/home/delivery"


def _cells(tables) -> list[str]:
    return [c for tb in tables for row in tb.rows for c in row]


def test_the_demo_environment_is_host_software_and_a_table_of_cards() -> None:
    env = environment_tables(MANIFEST["environment"], "en", home=HOME)
    assert [tb.title for tb in env] == ["Host", "Software", "Accelerator cards"]
    host = dict(env[0].rows)
    assert host["Operating system"] == "Debian GNU/Linux 12 (bookworm)" and host["CPU cores"] == "2"
    assert host["Recorded at"] == "2026-12-03 10:00:46 UTC"
    software = dict(env[1].rows)
    # the interpreter of a virtual environment is its version, not a path of the machine
    assert software["Python interpreter"] == "python 3.11.7"
    assert software["torch"] == "2.13.0+cpu" and software["npu-smi"] == "25.3.rc1"
    # unset facts (torch_npu, CANN, NVIDIA on this host) are left out, not "N/A"
    assert "N/A" not in _cells(env[:2]) and "torch_npu" not in software and "CANN" not in software
    cards = env[2]
    assert cards.header == ("NPU", "Model", "Chips", "Serial", "Firmware", "PCIe bus")
    assert cards.rows[3] == ("3", "910B3", "1", "1025C9030000", "7.8.0.6.201", "0000:82:00.0")
    assert len(cards.rows) == 8
    text = " ".join(_cells(env))
    for raw in ("npu.cards", "board_id", "0x60", "chip_boards", "schema", "/home/", ".venv"):
        assert raw not in text, raw


def test_the_demo_plan_is_one_table_per_section_without_empty_keys() -> None:
    plan = plan_tables(MANIFEST["plan"], "en", home=HOME)
    titles = [tb.title for tb in plan]
    assert titles[:4] == ["Run", "Devices", "Workload", "Sampling"]
    run = dict(plan[0].rows)
    # each key labelled in words, its value with its unit
    assert run == {"Planned duration": "8 h 00 min", "Run folder": "~/soak-runs",
                   "Time scale (recorded s per wall s)": "240", "Environment self-check first": "no",
                   "Run id": "demo-20261203-100046"}  # db unset: left out
    assert dict(plan[titles.index("Sampling")].rows)["Sampling interval"] == "1 s"
    assert dict(plan[titles.index("Background jobs")].rows)["Stop below free disk"] == "1.0 GiB"
    assert dict(plan[titles.index("Acceptance")].rows)["Required runtime"] == "8 h 00 min"
    # sim.fault is "" and exporter has nothing set: neither is a row, the exporter no table
    assert "Tool fault" not in dict(plan[titles.index("Simulated fleet")].rows)
    labels = [row[0] for tb in plan for row in tb.rows]
    assert not [w for w in labels if "_" in w], labels  # no key as written in plan.toml
    assert "Metrics exporter" not in titles
    assert "N/A" not in _cells(plan) and "" not in _cells(plan)


def test_a_plan_stored_flat_keeps_every_key_in_a_table_of_its_own() -> None:
    # a plan written without sections (an earlier soak's, another tool's): none of its keys is
    # dropped for want of a section, and sections beside them still get their own tables
    plan = plan_tables({"workload": "lm", "duration_h": 4.0, "run": {"id": "r1"}}, "en")
    assert [tb.title for tb in plan] == ["Run plan", "Run"]
    assert dict(plan[0].rows) == {"Workload": "lm", "Duration": "4 h 00 min"}  # the unit from the key's name
    assert dict(plan[1].rows) == {"Run id": "r1"}


def test_the_chinese_appendix_has_chinese_headings_and_labels() -> None:
    env, plan = appendix_tables(MANIFEST, "demo-20261203-100046", "zh")
    assert [tb.title for tb in env] == ["主机", "软件", "加速卡"]
    assert [tb.title for tb in plan][:4] == ["运行", "设备", "负载", "采样"]
    assert dict(env[0].rows)["操作系统"] == "Debian GNU/Linux 12 (bookworm)"
    assert dict(plan[0].rows)["计划时长"] == "8 h 00 min" and dict(plan[2].rows)["模型规模"] == "tiny"
    assert env[2].header == ("NPU", "型号", "芯片数", "序列号", "固件", "PCIe 总线")


def test_a_path_under_the_run_folder_or_the_home_is_shown_relative() -> None:
    run_dir = "/data/soak-runs/r1"
    assert local_path("/data/soak-runs/r1/logs/lm.log", run_dir=run_dir) == "logs/lm.log"
    assert local_path("/home/ops/plans/a.toml", home="/home/ops", run_dir=run_dir) == "~/plans/a.toml"
    assert local_path("/opt/venvs/soak/bin/python3.11", python="3.11.7") == "python 3.11.7"
    assert local_path("/usr/local/Ascend/driver", home="/home/ops") == "/usr/local/Ascend/driver"
    assert local_path("soak-runs", home="/home/ops") == "soak-runs"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_profile_is_listed_without_its_notes_and_its_sections_named(lang: str) -> None:
    profile = Profile.default().to_dict()
    assert any(str(k).endswith("_source") for chip in profile["chips"].values() for k in chip)  # notes to leave out
    lines = threshold_lines("profile", profile, lang)
    text = "\n".join(lines)
    assert "_source" not in text and "Huawei" not in text and "datasheet" not in text
    links, peers = ("节点间链路", "同类比较") if lang == "zh" else ("links between nodes", "comparison among peers")
    sep = "：" if lang == "zh" else ": "
    assert any(line.startswith(f"{links}{sep}") for line in lines) and any(line.startswith(f"{peers}{sep}") for line in lines)
    assert not any(line.startswith(("links:", "peers:")) for line in lines)


def test_every_detector_has_a_name_in_both_languages() -> None:
    from soak.analysis import DETECTOR_VERSIONS

    for name in [*DETECTOR_VERSIONS, "profile"]:
        en, zh = detector_name(name, "en"), detector_name(name, "zh")
        assert en != name or name in ("hang", "thermal"), name  # a kind's English name may be its key
        assert zh != en and not zh.isascii(), (name, zh)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_thresholds_are_sentences_or_labelled_values_with_units(lang: str) -> None:
    profile = Profile.default().to_dict()
    memory = threshold_lines("memory_creep", profile["memory"], lang)
    hbm = ("memory creep (HBM): a slope of at least 5 MB/h" if lang == "en"
           else "内存持续增长（HBM）：老化期后持续增长至少 5 MB/h")
    assert any(line.startswith(hbm) for line in memory), memory
    everything = [*memory, *threshold_lines("profile", profile, lang)]
    for line in everything:
        # no key of the profile file, no "=": a name in words and its value
        assert " = " not in line and not re.search(r"[a-z]+_[a-z0-9_]+", line.split("：")[-1] if lang == "zh"
                                                     else line), line
    # each figure's unit follows from its name
    assert threshold_value("max_read_interval_s", 1800.0, lang) == "30 min"
    assert threshold_value("min_coverage", 0.95, lang) == "95 %"
    assert threshold_value("correctable_max_per_h", 10.0, "en") == "10/h"
    assert threshold_value("temp_min_c", 4.5, lang) == "4.5 °C"


def _profile_sections() -> dict[str, tuple[str, dict]]:
    """Each detector's section of the default profile by the detector's name, and the profile's
    own sections that are no detector's (by their key), with their figures."""
    from soak.report.loader import _DETECTOR_SECTIONS

    profile = Profile.default().to_dict()
    out = {name: (name, profile[section]) for name, section in _DETECTOR_SECTIONS.items()}
    out.update({name: (name, profile[name]) for name in ("peers", "links", "compute", "evidence", "faults")})
    return out


def test_every_figure_of_the_default_profile_has_a_label_in_words_in_both_languages() -> None:
    # the words of a key ("episodes many", "segmentsrising比例") read as nothing to a customer:
    # every figure of the default profile has a label of its own, or a sentence
    from soak.report.appendix import THRESHOLD_LABELS, THRESHOLD_WORDS

    missing = [(section, key) for section, figures in _profile_sections().values() for key in figures
               if not key.endswith(("_source", "_note")) and (section, key) not in THRESHOLD_LABELS
               and (section, key) not in THRESHOLD_WORDS]
    missing += [("chips", k) for chip in Profile.default().to_dict()["chips"].values() for k in chip
                if not k.endswith("_source") and ("chips", k) not in THRESHOLD_LABELS]
    assert missing == []
    for en, zh in THRESHOLD_LABELS.values():
        assert "_" not in en and zh != en


def test_the_chinese_thresholds_have_no_english_word_but_names_and_units() -> None:
    # a word left in English in a Chinese line ("重启drop比例") is a label that was never translated
    allowed = {"HBM", "ECC", "CUSUM", "TFLOPS", "NVML", "MB", "GB", "h", "s", "min", "N", "A"}
    profile = Profile.default().to_dict()
    lines = [line for name, (_, figures) in _profile_sections().items() for line in threshold_lines(name, figures, "zh")]
    lines += [line for line in threshold_lines("profile", {k: v for k, v in profile.items() if k in
                                                          ("chips", "required_runtime_h", "severity")}, "zh")]
    for line in lines:
        label = line.rsplit("：", 1)[0] if "：" in line else line
        # chip models (H100, 310P, 910B) name themselves
        words = set(re.findall(r"[A-Za-z]+", label)) - allowed - {"H", "P", "B", "CPU", "NaN", "Inf"}
        assert not words, (line, words)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_section_of_a_plan_has_a_title_in_words(lang: str) -> None:
    # a section without one was shown as its key ("numerics" in the Chinese appendix)
    from dataclasses import fields

    from soak.config import Plan
    from soak.report.appendix import _section_title

    for f in fields(Plan):
        title = _section_title(f.name, lang)
        assert title != f.name and "_" not in title, (f.name, title)
        assert lang == "en" or not title.isascii(), (f.name, title)
