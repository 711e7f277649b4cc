"""verify's verdicts without reruns (engine/verify.py): a row's status, the text report; comparisons per artifact
type are in test_artifact_types.py, reruns in test_verify_lock.py and test_dvc_integration.py."""

from __future__ import annotations

import pytest

from paperdag.engine.verify import STATUSES, format_results, status


@pytest.mark.parametrize("reproduced, how, expected", [
    (True, "bit-identical", "bit-identical"),
    (True, "bit-identical to dvc.lock", "bit-identical"),
    (True, "volatile output, not compared", "volatile, not compared"),
    (True, "equal within rtol=1e-06", "within tolerance"),
    (True, "identical to dvc.lock's version except its volatile values", "within tolerance"),
    (False, "bit-identical", "differs"),
])
def test_a_rows_status_follows_reproduced_then_how(reproduced: bool, how: str, expected: str) -> None:
    assert status({"reproduced": reproduced, "how": how}) == expected
    assert expected in STATUSES


def test_the_text_report_marks_each_output_and_counts_the_reproduced() -> None:
    rows = [{"stage": "toy:make", "path": "data/toy/table.parquet", "reproduced": True, "how": "bit-identical"},
            {"stage": "toy:combine", "path": "data/toy/metrics.json", "reproduced": False, "how": "differs: metrics.a: 1 != 2"}]
    assert format_results(rows).splitlines() == [
        "OK  toy:make data/toy/table.parquet    bit-identical",
        "BAD toy:combine data/toy/metrics.json  differs: metrics.a: 1 != 2",
        "1/2 outputs reproduced"]
    assert format_results([]) == "0/0 outputs reproduced"
