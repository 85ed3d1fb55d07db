"""Table II's statistic (benchmarks/paper_table2.py) on hand-made values and a hand-made trajectory
of cubes whose gaps and penetrations are known exactly."""

import math

import numpy as np
import pytest
import torch

from benchmarks import paper_table2
from benchmarks.paper_table2 import (
    ContactLog,
    TrueMeshes,
    event_values,
    evenly_spaced,
    exact_signed_distance,
    min_abs_sd_statistics,
)
from contactnet.sim import Scene, box_mesh

SIZE = 0.1  # metres: the cubes' side
TOL = 3 * paper_table2.SEPARATION_TOL


def test_statistics_follow_the_paper_definition():
    # 600 values of 1 .. 600 mm, every third one penetrating: the sign never changes |sd|.
    values = np.arange(1, 601) * 1e-3 * np.where(np.arange(600) % 3 == 0, -1, 1)
    s = min_abs_sd_statistics(values)
    assert s["events"] == 600
    assert s["average"] == pytest.approx(0.3005)
    assert s["top10_average"] == pytest.approx(np.mean(np.arange(541, 601)) * 1e-3)  # the highest 60
    assert s["maximum"] == pytest.approx(0.6)
    assert s["penetrating_fraction"] == pytest.approx(1 / 3)
    # The top 10% rounds up: 5 values keep their largest.
    assert min_abs_sd_statistics([0.001, -0.004, 0.002, 0.003, 0.0])["top10_average"] == pytest.approx(0.004)


def test_statistics_reject_empty_and_non_finite_values():
    with pytest.raises(ValueError, match="values: no contact event"):
        min_abs_sd_statistics([])
    with pytest.raises(ValueError, match="values: expected finite"):
        min_abs_sd_statistics([0.001, float("inf")])


def test_events_are_kept_evenly_over_the_run():
    assert evenly_spaced(10, 4).tolist() == [0, 3, 6, 9]
    assert evenly_spaced(3, 600).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="wanted"):
        evenly_spaced(3, 0)


def cubes(count: int) -> TrueMeshes:
    scene = Scene()
    for i in range(count):
        scene.add_body(box_mesh((SIZE, SIZE, SIZE)), pose=[0.5 * i, 0, 0, 1, 0, 0, 0])
    return TrueMeshes([scene])


def pose(x=0.0, y=0.0, z=0.0, yaw=0.0) -> list[float]:
    return [x, y, z, math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


def test_exact_signed_distance_of_cubes():
    meshes = cubes(2)
    ids_a, ids_b = torch.tensor([0, 0, 0, 0]), torch.tensor([1, 1, 1, 1])
    poses_a = torch.tensor([pose()] * 4, dtype=torch.float64)
    poses_b = torch.tensor([pose(0.01, 0.02, SIZE + 0.002),  # 2 mm above
                            pose(0.01, 0.0, SIZE - 0.003),  # sunk 3 mm into the top face
                            pose(SIZE - 0.0015, 0.03, 0.01),  # 1.5 mm into a side face
                            pose(0.0, 0.0, SIZE - 0.004, yaw=0.3)], dtype=torch.float64)  # turned, 4 mm deep
    sd = exact_signed_distance(meshes, ids_a, ids_b, poses_a, poses_b)
    assert sd.tolist() == pytest.approx([0.002, -0.003, -0.0015, -0.004], abs=TOL)


def test_event_value_is_the_closest_pair_in_contact_with_its_sign():
    """A hand-made trajectory of three cubes: per event the pair of least |sd| decides, steps
    without contact are no events, and the statistics are those of the per-event values."""
    meshes = cubes(3)
    far = pose(1.0)
    log = ContactLog()
    # step 0: B 2 mm above A (C far away, not in contact)
    log.add(0, 0, [(0, 1)], torch.tensor([pose(), pose(z=SIZE + 0.002), far], dtype=torch.float64))
    # step 2: B 5 mm above A and C 1 mm into A's side: the penetration is the event's value
    log.add(2, 0, [(1, 0), (0, 2)], torch.tensor([pose(), pose(z=SIZE + 0.005), pose(SIZE - 0.001, 0.01)],
                                                 dtype=torch.float64))
    # step 3: B sunk 3 mm into A, C 8 mm from B
    log.add(3, 0, [(0, 1), (1, 2)], torch.tensor([pose(), pose(0.02, 0, SIZE - 0.003),
                                                  pose(0.02, 0, 2 * SIZE - 0.003 + 0.008)], dtype=torch.float64))
    assert len(log) == 3 and log.pairs[1].tolist() == [[0, 1], [0, 2]]  # pairs sorted and unique
    values = event_values(log, meshes, np.arange(3))
    assert values.tolist() == pytest.approx([0.002, -0.001, -0.003], abs=TOL)
    s = min_abs_sd_statistics(values)
    assert s["average"] == pytest.approx(0.002, abs=TOL) and s["maximum"] == pytest.approx(0.003, abs=TOL)
    assert s["penetrating_fraction"] == pytest.approx(2 / 3)


def test_an_event_needs_a_pair():
    with pytest.raises(ValueError, match="pairs"):
        ContactLog().add(0, 0, np.zeros((0, 2)), torch.zeros(2, 7))
