"""summary.json's scrape block from telemetry rows (llmload/measure/scrape_cost.py), without a server."""

from __future__ import annotations

from llmload.measure.scrape_cost import scrape_cost
from llmload.schema.results_model import TelemetryRow


def _rows(target: str, page: str, scrapes: list[tuple[float, float, float]]) -> list[TelemetryRow]:
    out = []
    for t, seconds, size in scrapes:
        out.append(
            TelemetryRow(t=t, target=target, source="scrape", metric=f"{page}_scrape_seconds", value=seconds)
        )
        out.append(
            TelemetryRow(t=t, target=target, source="scrape", metric=f"{page}_scrape_bytes", value=size)
        )
    return out


def test_the_cost_of_one_targets_page_is_its_own_scrapes_summed_over_the_span_they_cover() -> None:
    mine = _rows("a", "engine", [(100.0, 0.010, 1000), (105.0, 0.030, 1200), (110.0, 0.020, 1100)])
    others = _rows("b", "engine", [(100.0, 9.0, 9)]) + _rows("a", "gpu", [(100.0, 7.0, 7)])
    sample = TelemetryRow(t=100.0, target="a", source="engine", metric="engine_scrape_seconds", value=5.0)
    c = scrape_cost([*others, sample, *mine], "a", "engine", 5.0)
    assert c is not None and c.count == 3 and c.interval_s == 5.0
    assert (c.duration_ms.p50, c.duration_ms.p99, c.duration_ms.max) == (20.0, 30.0, 30.0)
    assert (c.bytes.p50, c.bytes.p99, c.bytes.max) == (1100, 1200, 1200)
    assert c.server_s_estimate == 0.06
    assert c.busy_pct == round(100 * 0.06 / 10.02, 4)  # from the first scrape to the end of the last


def test_a_page_never_answered_has_no_block_and_one_scrape_no_busy_share() -> None:
    assert scrape_cost([], "a", "engine", 5.0) is None
    one = scrape_cost(_rows("a", "gpu", [(1.0, 0.004, 10)]), "a", "gpu", 5.0)
    assert one is not None and one.count == 1 and one.busy_pct is None and one.server_s_estimate == 0.004
