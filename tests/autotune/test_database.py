"""The autotuning database file (zynml/autotune/database.py): merges, atomic writes, and
never a failure for a file that is not one."""
from __future__ import annotations

import os

import pytest

from zynml.autotune.database import MAX_BYTES, Entry, TuningDatabase, params_text
from zynml.errors import ZynMLNote


def entry(problem="4096f32_4096f32", strategy="pointwise", chip="sm_90a", compiler="c1",
          **params):
    return Entry(chip, compiler, strategy, problem, params or {"vectors": 2}, 1.0, 1.5, "t")


def test_record_merges_and_replaces_by_key(tmp_path):
    db = TuningDatabase(tmp_path / "autotune.json")
    db.record([entry(), entry(problem="8f32_8f32")])
    db.record([entry(vector_block=1024)])  # the same key: replaced
    entries = {e.problem: e for e in db.entries()}
    assert set(entries) == {"4096f32_4096f32", "8f32_8f32"}
    assert entries["4096f32_4096f32"].params == {"vector_block": 1024}
    assert not list(tmp_path.glob("*.tmp"))  # atomic: no temporary file left


def test_the_entries_of_a_chip_and_compiler_as_params_text(tmp_path):
    db = TuningDatabase(tmp_path / "autotune.json")
    db.record([entry(vectors=2, persistent=False), entry(chip="sm_80"),
               entry(compiler="old", problem="1f32_1f32")])
    mine = db.entries_for("sm_90a", "c1")
    assert params_text(mine) == \
        "pointwise@4096f32_4096f32.persistent=false;pointwise@4096f32_4096f32.vectors=2"
    assert db.entries_for("sm_90a", "c2") == []  # another compiler: not its tuning


@pytest.mark.parametrize("content", [b"", b"{", b"\x00" * 100, b"[]", b'{"format": "x"}',
                                     b'{"format": "zynml-autotune", "version": 1, '
                                     b'"entries": [{"chip": 1}]}'])
def test_a_file_that_is_not_a_database_is_ignored_with_a_note(tmp_path, content):
    path = tmp_path / "autotune.json"
    path.write_bytes(content)
    db = TuningDatabase(path)
    with pytest.warns(ZynMLNote, match="ignoring the autotuning database"):
        assert db.entries() == []
    with pytest.warns(ZynMLNote):
        db.record([entry()])  # and recording starts it anew
    assert [e.problem for e in db.entries()] == ["4096f32_4096f32"]


def test_only_a_regular_file_of_bounded_size_is_read(tmp_path):
    link = tmp_path / "autotune.json"
    os.symlink("/dev/zero", link)
    with pytest.warns(ZynMLNote, match="not a regular file"):
        assert TuningDatabase(link).entries() == []
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_BYTES + 1)
    with pytest.warns(ZynMLNote, match="larger than"):
        assert TuningDatabase(big).entries() == []


def test_a_missing_file_is_an_empty_database(tmp_path):
    assert TuningDatabase(tmp_path / "none.json").entries() == []


def test_values_of_the_wrong_kind_make_the_file_unreadable(tmp_path):
    """test_cache_fuzz: JSON that parses may hold a string where params go (a hand edit,
    a flipped byte); making the params text then failed with an AttributeError in every
    compile."""
    path = tmp_path / "autotune.json"
    path.write_text('{"format": "zynml-autotune", "version": 1, "entries": [{"chip": '
                    '"sm_90a", "compiler": "c", "strategy": "pointwise", "problem": "p", '
                    '"params": "vectors=2", "ms": 1.0, "default_ms": 2.0, "tuned": ""}]}')
    database = TuningDatabase(path)
    with pytest.warns(ZynMLNote, match="entry field 'params' is not a table"):
        assert database.entries_for("sm_90a", "c") == []
