"""The frontier journal (plain Python): what a kill at any byte leaves is read back exactly, or refused."""
from __future__ import annotations

import os
import random

import pytest

from scrapy_dedup.seen.journal import MAGIC, FrontierJournal, JournalError


class Model:
    """What the journal should say, kept alongside: admitted fingerprints, pending entries, clean or not."""

    def __init__(self):
        self.fingerprints: list[bytes] = []
        self.pending: dict[int, tuple[bytes, bytes]] = {}
        self.clean = True


def _run(path, rng: random.Random, steps: int, model: Model, sizes: list[tuple[int, Model]]):
    """One run of random admits and dones (and maybe a compaction); the file size and model after each record."""
    journal = FrontierJournal(path)
    journal.open()
    model.clean = False

    def snapshot():
        copy = Model()
        copy.fingerprints, copy.pending, copy.clean = list(model.fingerprints), dict(model.pending), model.clean
        sizes.append((path.stat().st_size, copy))

    snapshot()
    for _ in range(steps):
        roll = rng.random()
        if roll < 0.55 or not model.pending:
            fp = rng.randbytes(rng.choice((0, 16, 20)))
            payload = rng.randbytes(rng.randrange(0, 40))
            seq = journal.admitted(fp, payload)
            model.pending[seq] = (fp, payload)
            if fp:
                model.fingerprints.append(fp)
        elif roll < 0.95:
            seq = rng.choice(list(model.pending))
            journal.done(seq)
            del model.pending[seq]
        else:
            journal.compact()
            model.fingerprints = [fp for fp, _ in model.pending.values() if fp]
            sizes.clear()  # earlier sizes describe the file before the rewrite
        snapshot()
    return journal


def _assert_reads_as(path, expected: Model):
    replay = FrontierJournal(path).read()
    assert replay.pending == expected.pending
    assert replay.fingerprints == expected.fingerprints
    assert replay.clean == expected.clean
    return replay


@pytest.mark.parametrize("seed", range(12))
def test_a_kill_at_every_byte_reads_back_the_last_whole_record(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "journal"
    model = Model()
    sizes: list[tuple[int, Model]] = []
    if seed % 3 == 0:  # an earlier run that closed cleanly, whose pending requests carry over
        _run(path, rng, rng.randrange(5, 30), model, sizes).close()
        model.clean = True
    sizes.clear()
    journal = _run(path, rng, rng.randrange(5, 60), model, sizes)
    journal._file.close()  # a kill: no close record
    full = path.read_bytes()
    for cut in range(sizes[0][0], len(full) + 1):
        path.write_bytes(full[:cut])
        size, expected = [(size, m) for size, m in sizes if size <= cut][-1]
        replay = _assert_reads_as(path, expected)
        assert replay.cut_bytes == cut - size
        assert not replay.damaged and not replay.clean


def test_runs_that_closed_cleanly_and_one_that_was_killed(tmp_path):
    path = tmp_path / "journal"
    first = FrontierJournal(path)
    assert first.open().clean  # a new journal
    a = first.admitted(b"a" * 20, b"1")
    first.close()
    replay = FrontierJournal(path).read()
    assert replay.clean and list(replay.pending) == [a] and replay.runs == 1
    second = FrontierJournal(path)
    second.open()
    b = second.admitted(b"b" * 20, b"2")
    second.done(a)
    second._file.close()  # killed
    replay = FrontierJournal(path).read()
    assert not replay.clean and list(replay.pending) == [b] and replay.runs == 2


def test_the_torn_tail_is_cut_before_new_records_are_appended(tmp_path):
    path = tmp_path / "journal"
    journal = FrontierJournal(path)
    journal.open()
    first = journal.admitted(b"a" * 20, b"payload-1")
    journal._file.close()
    with open(path, "ab") as f:
        f.write(b"\x10\x00\x00")  # a record torn by a kill
    journal = FrontierJournal(path)
    replay = journal.open()
    assert replay.cut_bytes == 3 and not replay.clean and list(replay.pending) == [first]
    second = journal.admitted(b"b" * 20, b"payload-2")
    journal.close()
    replay = FrontierJournal(path).open()
    assert list(replay.pending) == [first, second] and replay.clean


def test_a_damaged_record_is_reported_and_nothing_after_it_is_trusted(tmp_path):
    path = tmp_path / "journal"
    journal = FrontierJournal(path)
    journal.open()
    seqs = [journal.admitted(bytes([i]) * 20, b"x" * 50) for i in range(5)]
    journal.close()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped bit mid-file
    path.write_bytes(bytes(data))
    replay = FrontierJournal(path).open()
    assert replay.damaged
    assert list(replay.pending) == seqs[:len(replay.pending)] and len(replay.pending) < 5


def test_compaction_keeps_pending_requests_only_and_sequence_numbers_keep_growing(tmp_path):
    path = tmp_path / "journal"
    journal = FrontierJournal(path)
    journal.open()
    seqs = [journal.admitted(bytes([i]) * 20, b"p%d" % i) for i in range(100)]
    for seq in seqs[:90]:
        journal.done(seq)
    before = path.stat().st_size
    assert journal.compact() == 10
    assert path.stat().st_size < before / 5
    new = journal.admitted(b"z" * 20, b"new")
    assert new > max(seqs)
    journal._file.close()  # killed after the compaction: still unclean
    replay = FrontierJournal(path).open()
    assert not replay.clean
    assert list(replay.pending) == seqs[90:] + [new]
    assert replay.fingerprints == [bytes([i]) * 20 for i in range(90, 100)] + [b"z" * 20]
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_a_foreign_file_is_refused_not_read_as_empty(tmp_path):
    path = tmp_path / "journal"
    path.write_bytes(b"something else entirely\n")
    with pytest.raises(JournalError, match="not a scrapy-dedup frontier journal"):
        FrontierJournal(path).open()
    assert path.read_bytes() == b"something else entirely\n"
    path.write_bytes(MAGIC)
    assert FrontierJournal(path).open().pending == {}
