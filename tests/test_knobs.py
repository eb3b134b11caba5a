"""zynml/knobs.py: every ZYNML_* variable is typed there, read nowhere else, and documented
in docs/developer-guide.md by the same table."""
from __future__ import annotations

import pytest

from zynml import knobs


# ----------------------------------------------------------------------------- values


def test_bools_take_the_usual_words_in_any_case(monkeypatch):
    for text, value in [("1", True), ("TRUE", True), ("yes", True), (" On ", True),
                        ("0", False), ("False", False), ("NO", False), ("off", False)]:
        monkeypatch.setenv("ZYNML_DEBUG", text)
        assert knobs.DEBUG.get() is value, text


def test_unset_or_empty_is_the_default(monkeypatch):
    for knob in knobs.KNOBS:
        monkeypatch.delenv(knob.name, raising=False)
        assert knob.get() == knob.default
        monkeypatch.setenv(knob.name, "")
        assert knob.get() == knob.default
    assert knobs.AUTOTUNE.get() is True and knobs.LOG.get() == ()


def test_values_are_read_at_each_get_not_at_import(monkeypatch):
    monkeypatch.setenv("ZYNML_AUTOTUNE", "off")
    assert knobs.AUTOTUNE.get() is False
    monkeypatch.setenv("ZYNML_AUTOTUNE", "on")
    assert knobs.AUTOTUNE.get() is True


def test_typed_values(monkeypatch, tmp_path):
    monkeypatch.setenv("ZYNML_FUZZ_SCALE", "0.5")
    assert knobs.FUZZ_SCALE.get() == 0.5
    monkeypatch.setenv("ZYNML_CACHE_DIR", str(tmp_path))
    assert knobs.CACHE_DIR.get() == tmp_path
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ZYNML_REPRODUCER_DIR", "~/repros")
    assert knobs.REPRODUCER_DIR.get() == tmp_path / "repros"
    monkeypatch.setenv("ZYNML_LOG", "recompiles, ,recompiles")
    assert knobs.LOG.get() == ("recompiles", "recompiles")
    count = knobs.Knob("ZYNML_COUNT", "int", 1, "an int knob")
    monkeypatch.setenv("ZYNML_COUNT", "12")
    assert count.get() == 12


@pytest.mark.parametrize("name,text,accepted", [
    ("ZYNML_DEBUG", "maybe", "1, 0, true, false, yes, no, on or off (any case)"),
    ("ZYNML_FUZZ_SCALE", "lots", "a number"),
    ("ZYNML_LOG", "recompiles,everything", "comma-separated words of: recompiles"),
])
def test_a_bad_value_names_the_variable_the_value_and_what_is_accepted(
        monkeypatch, name, text, accepted):
    monkeypatch.setenv(name, text)
    knob = next(k for k in knobs.KNOBS if k.name == name)
    with pytest.raises(knobs.KnobError) as caught:
        knob.get()
    assert caught.value.message == (f"environment variable {name}={text!r} is not a valid "
                                    f"{knob.type}: expected {accepted}, or leave it unset")
    with pytest.raises(knobs.KnobError):
        knobs.validate()


def test_the_table_is_well_formed():
    names = [knob.name for knob in knobs.KNOBS]
    assert len(names) == len(set(names))
    exported = {n for n in knobs.__all__ if isinstance(getattr(knobs, n), knobs.Knob)}
    assert exported == {n for n, v in vars(knobs).items() if isinstance(v, knobs.Knob)}
    assert {getattr(knobs, n) for n in exported} == set(knobs.KNOBS)
    for name in exported:  # knobs.X is $ZYNML_X
        assert getattr(knobs, name).name == "ZYNML_" + name
