"""The fault-code tables: real codes take the device plugin's level, Xids their class, an
operator's faultCode.json wins per code, and every bad file is one line naming it."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import pytest

from soak.errors import ConfigError, InputError
from soak.faultcodes import builtin_table, interrupts_training, is_hardware, load_table
from soak.faultcodes.table import ASCEND_LEVELS, level_counts, read_levels
from soak.telemetry import npu_query as q

NPU = Path(__file__).resolve().parents[1] / "fixtures" / "npu"
DATA = resources.files("soak.faultcodes")
BUILTIN = "built-in: Ascend/mind-cluster faultCode.json @22bb3d98"


@pytest.mark.parametrize(
    ("code", "level", "severity", "meaning"),
    [
        ("A4025021", "NotHandleFault", "info", None),
        ("8C03A000", "RestartNPU", "warn", "ProcMgr heartbeat error"),
        ("80E01801", "RestartBusiness", "warn", "Multi-bit ECC errors when accessing the HBM"),
        ("80E3A201", "SeparateNPU", "fail", "Voltage adjustment function exception detected by the LPM"),
        ("8C084E00", "FreeRestartNPU", "warn", "ADDA heartbeat error"),
        ("80C98008", "RestartRequest", "info", "AIC multi-bit ECC error"),
    ],
)
def test_real_codes_take_the_device_plugins_level(code, level, severity, meaning) -> None:
    fc = builtin_table().ascend(code)
    assert (fc.vendor, fc.code, fc.level, fc.severity, fc.meaning) == ("ascend", code, level, severity, meaning)
    assert fc.known and fc.source == BUILTIN


def test_a_code_is_found_in_any_case_and_with_0x() -> None:
    fc = builtin_table().ascend(" 0x80e3a201")
    assert (fc.code, fc.level, fc.action) == ("80E3A201", "SeparateNPU", "isolate the chip")


def test_a_code_under_two_levels_takes_the_more_serious_as_the_plugin_does() -> None:
    # faultCode.json lists A2301001 under RestartBusinessCodes and SeparateNPUCodes
    raw = json.loads(DATA.joinpath("ascend_fault_codes.json").read_text())
    assert "A2301001" in raw["RestartBusinessCodes"] and "A2301001" in raw["SeparateNPUCodes"]
    assert builtin_table().ascend("A2301001").level == "SeparateNPU"


def test_the_plugins_own_nine_digit_codes_keep_their_spelling() -> None:
    table = builtin_table()
    assert (table.ascend("020001002").code, table.ascend("020001002").level) == ("020001002", "SeparateNPU")
    assert table.ascend("200001002").meaning == "NPU hang fault code"
    assert table.ascend("110001024").level == "PreSeparateNPU"


def test_the_recorded_910a_alarms_codes_each_have_a_level() -> None:
    # npu-smi info -t health of a 910A in Alarm (tests/fixtures/npu/INDEX.md has its source)
    lines = (NPU / "031_910A_health_Alarm_multiline_and_errors_after.txt").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "-t health" in line) + 1
    health = q.parse_health("\n".join(lines[start:start + 8]), npu_id=0, chip_id=0)
    assert health.error_codes == ("A4025021", "8C03A000", "8C084E00")
    found = [builtin_table().ascend(c) for c in health.error_codes]
    assert [(f.level, f.severity) for f in found] == [("NotHandleFault", "info"), ("RestartNPU", "warn"),
                                                     ("FreeRestartNPU", "warn")]
    assert [interrupts_training(f) for f in found] == [False, True, True]


def test_an_unknown_code_is_a_warning_named_unknown_code() -> None:
    fc = builtin_table().ascend("12345678")
    assert (fc.level, fc.severity, fc.source, fc.known, fc.meaning, fc.action) == (
        "Unknown", "warn", "unknown code", False, None, None)
    assert builtin_table().ascend("1f").code == "0000001F"
    xid = builtin_table().xid(999)
    assert (xid.vendor, xid.code, xid.level, xid.severity, xid.source) == ("nvidia", "999", "Unknown", "warn",
                                                                          "unknown code")


def test_the_builtin_table_is_the_plugins_file_as_recorded() -> None:
    prov = json.loads(DATA.joinpath("provenance.json").read_text())["ascend_fault_codes.json"]
    raw = DATA.joinpath("ascend_fault_codes.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == prov["sha256"]
    assert prov["commit"].startswith("22bb3d98") and prov["licence"].startswith("Apache-2.0")
    assert DATA.joinpath("LICENSE-mind-cluster.txt").read_text().lstrip().startswith("Apache License")
    entries = builtin_table().ascend_codes()
    assert len(entries) == 802  # 804 listed, B4060011 twice under one level, A2301001 under two
    assert level_counts({i: (e.code, e.level) for i, e in enumerate(entries)}) == {
        "SeparateNPU": 215, "PreSeparateNPU": 200, "RestartNPU": 162, "FreeRestartNPU": 23,
        "RestartBusiness": 24, "RestartRequest": 33, "SubHealthFault": 13, "NotHandleFault": 132}
    meanings = json.loads(DATA.joinpath("ascend_meanings.json").read_text())["codes"]
    # a meaning only where the repository gives one, each with its source
    assert sum(e.meaning is not None for e in entries) == len(meanings) == 192
    assert all(m["source"].startswith("Ascend/mind-cluster ") for m in meanings.values())


@pytest.mark.parametrize(
    ("xid", "cls", "severity", "interrupts", "action"),
    [
        (48, "memory", "fail", True, "WORKFLOW_XID_48"),
        (79, "hardware", "fail", True, "RESTART_BM; investigate: CONTACT_SUPPORT"),
        (64, "memory", "fail", True, "RESET_GPU; investigate: CONTACT_SUPPORT"),
        (94, "memory", "fail", True, "RESTART_APP; investigate: IGNORE (sympathetic)"),
        (95, "memory", "fail", True, "RESET_GPU; investigate: IGNORE (sympathetic)"),
        (74, "nvlink", "fail", True, "WORKFLOW_NVLINK_ERR; investigate: CONTACT_SUPPORT"),
        (119, "hardware", "fail", True, "RESET_GPU; investigate: INVESTIGATE_SW"),
        (145, "nvlink", "fail", True, "WORKFLOW_NVLINK5_ERR"),
        (63, "memory-corrected", "warn", False, "IGNORE"),
        (92, "memory-corrected", "warn", False, "IGNORE; investigate: CONTACT_SUPPORT"),
        (61, "other", "warn", False, "CONTACT_SUPPORT; investigate: N/A; Unused"),
        (13, "application", "info", False, "RESTART_APP; investigate: WORKFLOW_XID_13"),
        (31, "application", "info", False, "RESTART_APP; investigate: WORKFLOW_XID_31"),
        (43, "application", "info", False, "IGNORE; investigate: CONTACT_SUPPORT"),
        (45, "application", "info", False, None),
    ],
)
def test_xid_class_severity_and_action_from_the_catalog(xid, cls, severity, interrupts, action) -> None:
    fc = builtin_table().xid(xid)
    assert (fc.vendor, fc.code, fc.level, fc.severity, fc.known, fc.source) == (
        "nvidia", str(xid), cls, severity, True, "built-in: NVIDIA Xid catalog")
    assert interrupts_training(fc) is interrupts and is_hardware(fc) is interrupts
    if action is not None:
        assert fc.action == action


def test_xid_meaning_is_the_catalogs_description_and_mnemonic() -> None:
    assert builtin_table().xid(79).meaning == "GPU has fallen off the bus (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS)"
    assert builtin_table().xid(48).meaning == "Double Bit ECC Error (ROBUST_CHANNEL_GPU_ECC_DBE)"


def _operator(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "faultCode.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_the_operators_file_wins_per_code_and_adds_its_own(tmp_path) -> None:
    path = _operator(tmp_path, {"SeparateNPUCodes": ["80e01801"], "SubHealthFaultCodes": ["ABCD1234"]})
    table = load_table(path)
    moved, added, kept = table.ascend("80E01801"), table.ascend("abcd1234"), table.ascend("8C03A000")
    assert (moved.level, moved.severity, moved.source) == ("SeparateNPU", "fail", f"operator: {path}")
    assert moved.meaning == "Multi-bit ECC errors when accessing the HBM"  # the built-in meaning stays
    assert (added.code, added.level, added.severity, added.known, added.meaning) == (
        "ABCD1234", "SubHealthFault", "warn", True, None)
    assert (kept.level, kept.source) == ("RestartNPU", BUILTIN)
    assert builtin_table().ascend("80E01801").level == "RestartBusiness"  # the built-in one is untouched
    assert load_table(None) is builtin_table() and load_table("") is builtin_table()


def test_the_operators_file_may_spell_keys_in_any_case_as_the_plugin_reads_them(tmp_path) -> None:
    levels = read_levels(_operator(tmp_path, {"separatenpucodes": ["8C03A000"], "RestartNPUCodes": None}))
    assert levels == {0x8C03A000: ("8C03A000", "SeparateNPU")}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        ('["80E01801"]', "not a faultCode.json table (a JSON object of level keys)"),
        ({"SeparateCodes": ["80E01801"]}, "'SeparateCodes' is not a level key (known: NotHandleFaultCodes, "),
        ({"SeparateNPUCodes": ["80E0180"]}, "SeparateNPUCodes: '80E0180' is not 8 hex digits (9 for the "
                                            "device plugin's own hang and UB codes)"),
        ({"SeparateNPUCodes": ["0x80E01801"]}, "SeparateNPUCodes: '0x80E01801' is not 8 hex digits"),
        ({"SeparateNPUCodes": [2162170881]}, "SeparateNPUCodes: 2162170881 is not 8 hex digits"),
        ({"SeparateNPUCodes": "80E01801"}, "SeparateNPUCodes must be a list of codes, got str"),
    ],
)
def test_a_bad_operator_file_is_one_line_naming_it_and_the_problem(tmp_path, content, problem) -> None:
    path = _operator(tmp_path, content)
    with pytest.raises(InputError) as err:
        load_table(path)
    assert str(err.value).startswith(f"fault codes file {path}: {problem}")
    assert "\n" not in str(err.value)


def test_a_missing_operator_file_named_by_the_plan_key(tmp_path) -> None:
    with pytest.raises(ConfigError) as err:
        load_table(tmp_path / "absent.json", key="faults.codes_file")
    assert str(err.value) == f"faults.codes_file: fault codes file {tmp_path / 'absent.json'}: no such file"
    with pytest.raises(InputError, match="not a regular file"):
        load_table(tmp_path)


def test_every_builtin_level_is_one_of_the_plugins() -> None:
    assert {e.level for e in builtin_table().ascend_codes()} == set(ASCEND_LEVELS)
