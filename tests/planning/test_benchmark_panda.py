"""The Panda rows of benchmarks/planning.py cover what issue 18 asks (no timing here): batch x horizon
up to 1M link queries outside --quick, small sizes with it, and the sphere accuracy gap is printed
with its false and missed collisions."""

import argparse

from benchmarks.planning import PANDA_QUICK_SIZES, panda_sizes, print_panda

LINK_QUERIES_PER_CONFIG = 11 * 6  # the Panda's 11 links x the 6 clutter obstacles


def _args(quick: bool, **kw):
    return argparse.Namespace(quick=quick, panda_batch=kw.get("batch", 256), panda_horizon=kw.get("horizon", 64))


def test_default_sizes_reach_a_million_link_queries():
    sizes = panda_sizes(_args(False))
    assert sizes[0] == (1, 1) and sizes == sorted(sizes, key=lambda s: s[0] * s[1])
    assert max(b * h for b, h in sizes) * LINK_QUERIES_PER_CONFIG >= 1_000_000
    assert panda_sizes(_args(True)) == PANDA_QUICK_SIZES
    assert max(b * h for b, h in PANDA_QUICK_SIZES) <= 16
    assert panda_sizes(_args(False, batch=8, horizon=2)) == [(1, 1), (8, 2)]


def test_accuracy_gap_is_printed(capsys):
    rows = [{"backend": "exact", "configs": "1x1", "link_queries": 66, "timed": 66, "latency_ms": 1.0,
             "qps": 66e3, "us_per_link_query": 15.0, "grad_timed": 66, "grad_latency_ms": 2.0,
             "grad_us_per_link_query": 30.0}]
    accuracy = [{"spheres_per_link": 4, "inflate_m": 0.0, "configs": 10, "colliding": 4, "false_collisions": 1,
                 "missed_collisions": 2, "false_rate": 1 / 6, "miss_rate": 0.5}]
    print_panda(rows, accuracy, "", "cpu")
    out = capsys.readouterr().out
    assert "sphere-approximated Panda vs the exact meshes" in out
    assert "false_collisions" in out and "missed_collisions" in out and "grad_timed" in out


def test_rows_are_printed_beside_a_note_and_without_the_gap(capsys):
    """Without python-fcl (a GPU image) our backends' rows still print, with the note saying what is missing."""
    rows = [{"backend": "exact", "configs": "1x1", "link_queries": 66, "timed": 66, "latency_ms": 1.0,
             "qps": 66e3, "us_per_link_query": 15.0, "grad_timed": 66, "grad_latency_ms": 2.0,
             "grad_us_per_link_query": 30.0}]
    print_panda(rows, [], "python-fcl rows and the sphere accuracy gap skipped", "cuda")
    out = capsys.readouterr().out
    assert "skipped" in out and "grad_timed" in out and "sphere-approximated" not in out
