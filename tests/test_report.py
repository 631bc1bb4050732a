"""DuplicationReport: the numbers, their invariants and renderings."""
from __future__ import annotations

import json

import pytest

from scrapy_dedup.content.report import DuplicationReport


def example() -> DuplicationReport:
    return DuplicationReport.from_counts(exact=1240, near=5880, unique=32880, degenerate=0, clusters=2210,
                                         largest_cluster=11)


def test_text_block_as_in_the_issue():
    lines = example().to_text().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "Total URLs", "Exact duplicates", "Near duplicates", "Unique pages", "Duplicate clusters",
        "Redundant pages", "Degenerate pages",
    ]
    assert lines[0].split() == ["Total", "URLs:", "40000"]
    assert lines[1].split() == ["Exact", "duplicates:", "1240", "(3.1%)"]
    assert lines[2].split() == ["Near", "duplicates:", "5880", "(14.7%)"]
    assert lines[3].split() == ["Unique", "pages:", "32880", "(82.2%)"]
    assert lines[4].split() == ["Duplicate", "clusters:", "2210", "(largest", "cluster:", "11", "pages)"]
    assert lines[5].split() == ["Redundant", "pages:", "7120", "(17.8%)"]
    assert lines[6].startswith("Degenerate pages:")
    # the numbers are aligned in one column
    assert len({line.index(line.split()[2]) for line in lines}) == 1


def test_degenerate_pages_are_in_the_total_and_percentages():
    r = DuplicationReport.from_counts(exact=1, near=1, unique=6, degenerate=2, clusters=1, largest_cluster=3,
                                      skipped_non_text=5)
    assert r.total == 10 and r.redundant == 2
    assert r.redundant_ratio == pytest.approx(0.2) and r.degenerate_ratio == pytest.approx(0.2)
    text = r.to_text()
    assert "Degenerate pages:    2" in text and "(20.0%)" in text
    assert "Skipped non-text:" in text and "5" in text.splitlines()[-1]


def test_total_must_be_the_sum_of_the_kinds():
    with pytest.raises(ValueError, match="total"):
        DuplicationReport(total=10, exact=1, near=1, unique=1, degenerate=1, clusters=1, largest_cluster=2)
    with pytest.raises(ValueError, match="non-negative"):
        DuplicationReport.from_counts(exact=-1, near=1, unique=1, degenerate=0, clusters=0, largest_cluster=0)


def test_empty_report_has_zero_ratios():
    r = DuplicationReport.from_counts(exact=0, near=0, unique=0, degenerate=0, clusters=0, largest_cluster=0)
    assert r.redundant_ratio == 0.0
    assert "(0.0%)" in r.to_text()


def test_dict_and_stats():
    r = example()
    data = r.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["redundant"] == 7120 and data["redundant_ratio"] == pytest.approx(0.178)
    assert DuplicationReport.from_dict(data) == r
    stats = r.to_stats()
    assert all(key.startswith("dedup/content/") for key in stats)
    assert stats["dedup/content/near"] == 5880 and isinstance(stats["dedup/content/near"], int)
    assert stats["dedup/content/redundant_ratio"] == 0.178
    assert set(r.to_stats(prefix="x/")) == {"x/" + k for k in data}


def test_skipped_structured_responses_are_a_line_of_their_own_outside_the_total():
    r = DuplicationReport.from_counts(exact=1, near=0, unique=3, degenerate=0, clusters=1, largest_cluster=2,
                                      skipped_non_text=2, skipped_non_html=7)
    assert r.total == 4
    lines = r.to_text().splitlines()
    assert lines[-2].split()[:3] == ["Skipped", "non-text:", "2"]
    assert lines[-1].split()[:3] == ["Skipped", "non-HTML:", "7"]
    assert DuplicationReport.from_dict(r.to_dict()) == r
    assert r.to_stats()["dedup/content/skipped_non_html"] == 7
    assert "non-HTML" not in example().to_text()  # no line when there were none


@pytest.mark.parametrize("part,whole,expected", [
    (0, 0, "0.0%"), (0, 10, "0.0%"), (10, 10, "100.0%"), (1, 3, "33.3%"), (2, 3, "66.7%"),
    (497490, 497522, "99.99%"),  # not "100.0%": 32 pages are not redundant
    (999_999, 1_000_000, "99.9999%"), (1, 1_000_000, "0.0001%"), (1, 30_000, "0.003%"),
    (1, 10**9, "<0.0001%"), (10**9 - 1, 10**9, ">99.9999%"), (5, 1000, "0.5%"),
])
def test_a_percentage_never_rounds_to_all_or_nothing(part, whole, expected):
    from scrapy_dedup.content.report import format_percent

    assert format_percent(part, whole) == expected
