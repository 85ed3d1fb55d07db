"""Depth views: points on the seen surface only (visibility, occlusion), normals facing the camera
and matching the surface, the noise model, exactly K points, determinism, the depth-image camera
convention and its round trip, clear errors."""

import sys

import numpy as np
import pytest
import torch
import trimesh

from contactnet.data.procedural import make_object
from contactnet.geometry.depth_views import (
    ViewSpec,
    camera_eyes,
    look_at,
    partial_cloud,
    pinhole_intrinsics,
    points_from_depth,
    ray_exits,
    render_depth,
    render_views,
)
from contactnet.geometry.poses import matrix_to_pose
from tests.geometry.test_sampling import _distance_to_mesh

NOISELESS = ViewSpec(noise_std_m=0, noise_quadratic=0)
H = 0.05  # half side of the test cube, metres


def _cube(centre=(0, 0, 0), half=H):
    box = trimesh.creation.box(extents=[2 * half] * 3)
    return np.asarray(box.vertices) + centre, np.asarray(box.faces)


@pytest.mark.parametrize("family", ["mug", "bowl"])
def test_noiseless_points_lie_on_the_surface(family):
    vertices, faces = make_object(family, 0)
    points, normals = partial_cloud(vertices, faces, 300, seed=1, spec=NOISELESS)
    assert points.shape == normals.shape == (300, 3) and points.dtype == normals.dtype == np.float32
    assert _distance_to_mesh(points.astype(np.float64), vertices, faces).max() < 1e-5
    # With the default noise the points leave the surface by about the sensor's error.
    noisy, _ = partial_cloud(vertices, faces, 300, seed=1)
    distance = _distance_to_mesh(noisy.astype(np.float64), vertices, faces)
    assert 2e-4 < np.median(distance) and distance.max() < 5 * (0.001 + 0.002 * 0.8**2)


def test_a_cube_seen_along_x_shows_only_its_near_face():
    vertices, faces = _cube()
    points, normals = render_views(vertices, faces, np.array([[0.5, 0, 0]]), 400, seed=0, spec=NOISELESS)
    np.testing.assert_allclose(points[:, 0], H, atol=1e-5)  # nothing on the sides or the far face
    # The whole face is covered, up to a pixel or two at its edges.
    assert (points[:, 1:].min(0) < -0.9 * H).all() and (points[:, 1:].max(0) > 0.9 * H).all()
    np.testing.assert_allclose(normals, np.tile([1.0, 0, 0], (400, 1)), atol=1e-4)


def _plate_before_a_cube():
    """A 1 cm plate at x = 0.05 m and a 5 cm cube behind it at x = −0.05 m: the scene's vertices and
    faces, and the cube alone."""
    plate = trimesh.creation.box(extents=[0.01, 0.2, 0.2])
    plate.apply_translation([0.05, 0, 0])
    cube = trimesh.creation.box(extents=[0.05, 0.05, 0.05])
    cube.apply_translation([-0.05, 0, 0])
    scene = trimesh.util.concatenate([plate, cube])
    return np.asarray(scene.vertices), np.asarray(scene.faces), cube


def test_each_ray_exits_through_the_objects_far_side():
    """A plate in front of a cube, seen along −x: rays through the plate leave through the cube's far
    face where the cube is behind them, else through the plate's back; noisy points (moved along
    their rays) give the same exits; rays that miss, or an open mesh's, have none."""
    vertices, faces, _ = _plate_before_a_cube()
    eye = np.array([[0.6, 0, 0]])
    points, _ = render_views(vertices, faces, eye, 500, seed=0, spec=NOISELESS)
    exits, normals, valid = ray_exits(vertices, faces, eye, points[None])
    assert exits.shape == normals.shape == (1, 500, 3) and valid.shape == (1, 500) and valid.all()
    at_cube = np.abs(points[:, 1:]) * 0.625 / 0.545  # where each ray crosses the plane of the cube's near face
    behind, beside = (at_cube < 0.024).all(-1), (at_cube > 0.026).any(-1)
    assert behind.sum() > 10 and beside.sum() > 100
    np.testing.assert_allclose(exits[0, behind, 0], -0.075, atol=1e-5)
    np.testing.assert_allclose(exits[0, beside, 0], 0.045, atol=1e-5)
    np.testing.assert_allclose(normals[0, behind], np.tile([-1.0, 0, 0], (behind.sum(), 1)), atol=1e-5)
    # The exits lie on the rays from the eye through the points.
    rays = points - eye
    along = exits[0] - eye
    cross = np.cross(rays / np.linalg.norm(rays, axis=1, keepdims=True), along)
    assert np.abs(cross).max() < 1e-5
    # Depth noise moves a point along its ray: the same exits.
    noisy = eye + rays * (1 + 0.01 * np.random.default_rng(0).standard_normal((500, 1)))
    np.testing.assert_allclose(ray_exits(vertices, faces, eye, noisy[None])[0], exits, atol=1e-5)
    missing = np.array([[[0.05, 0.5, 0.5], [0.055, 0, 0]]])
    assert ray_exits(vertices, faces, eye, missing)[2].tolist() == [[False, True]]
    # A cube without its far face: rays leave through nothing, so no exit.
    box = trimesh.creation.box(extents=[0.05] * 3)
    open_faces = box.faces[box.face_normals[:, 0] > -0.5]
    assert not ray_exits(box.vertices, open_faces, eye, np.array([[[0.025, 0, 0]]]))[2].any()
    with pytest.raises(ValueError, match="eyes, points"):
        ray_exits(vertices, faces, eye, points)  # (K, 3): no view axis


def test_an_occluded_surface_is_not_seen():
    """A plate in front of a small cube: the cube's near face faces the camera but is hidden."""
    vertices, faces, hidden = _plate_before_a_cube()
    points, _ = render_views(vertices, faces, np.array([[0.6, 0, 0]]), 500, seed=0, spec=NOISELESS)
    np.testing.assert_allclose(points[:, 0], 0.055, atol=1e-5)
    # Without the plate the same camera sees the cube's near face.
    alone, _ = render_views(hidden.vertices, hidden.faces, np.array([[0.6, 0, 0]]), 500, seed=0, spec=NOISELESS)
    np.testing.assert_allclose(alone[:, 0], -0.025, atol=1e-5)


def test_normals_face_the_camera_and_match_the_faces():
    vertices, faces = _cube()
    eye = np.array([0.3, 0.25, 0.35])  # sees the +x, +y and +z faces
    for spec, agree in ((NOISELESS, 0.999), (ViewSpec(), 0.95)):
        points, normals = render_views(vertices, faces, eye[None], 600, seed=0, spec=spec)
        np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1, atol=1e-5)
        assert (((eye - points) * normals).sum(1) > 0).all()  # straight at a face: not grazing
        # Away from the edges a point's normal is its face's: the axis of its largest coordinate.
        inner = np.sort(np.abs(points), axis=1)[:, 1] < 0.8 * H
        face_normal = np.eye(3)[np.abs(points).argmax(1)]
        cos = (normals * face_normal).sum(1)[inner]
        assert inner.sum() > 200 and np.median(cos) > agree and (cos > 0.5).mean() > 0.97
    # A curved, concave object: every view's normals face its own camera (at its silhouette a
    # normal may be square to the line of sight: float32 rounding can make that a hair negative).
    vertices, faces = make_object("cup", 2)
    eyes = camera_eyes(vertices, 3, seed=4)
    points, normals = render_views(vertices, faces, eyes, 500, seed=4)
    facing = (((eyes[:, None] - points) * normals).sum(-1) > -1e-6).any(0)
    assert facing.all()


def test_depth_noise_grows_with_distance():
    vertices, faces = _cube()
    spread = []
    for distance in (0.4, 0.8):
        # More points than pixels: every return is kept, none chosen for being far from the rest.
        points, _ = render_views(vertices, faces, np.array([[distance, 0, 0]]), 20000, seed=0)
        z = distance - H
        expected = 0.001 + 0.002 * z**2
        # The camera looks along -x: a return's depth error is its x error.
        spread.append(np.std(points[:, 0] - H))
        assert 0.8 * expected < spread[-1] < 1.2 * expected
    assert spread[1] > 1.3 * spread[0]


def test_exactly_k_points_deterministic_per_seed():
    vertices, faces = make_object("l_bracket", 0)
    for k in (64, 20000):  # fewer than the returns (thinned), more than the pixels (repeated)
        points, normals = partial_cloud(vertices, faces, k, seed=3)
        assert points.shape == normals.shape == (k, 3)
        again = partial_cloud(vertices, faces, k, seed=3)
        np.testing.assert_array_equal(points, again[0])
        np.testing.assert_array_equal(normals, again[1])
    other, _ = partial_cloud(vertices, faces, 64, seed=4)
    assert not np.allclose(other, partial_cloud(vertices, faces, 64, seed=3)[0])
    # Three views see more of the object than one.
    one, _ = partial_cloud(vertices, faces, 500, seed=3, spec=NOISELESS)
    three, _ = partial_cloud(vertices, faces, 500, seed=3, views=3, spec=NOISELESS)
    assert np.prod(np.ptp(three, 0)) > np.prod(np.ptp(one, 0))


def test_depth_is_z_depth_in_the_opencv_convention():
    """A wall seen head-on: every pixel's depth is the wall's distance (not the ray's length),
    and image row 0 is the top (+z here, the `up` of look_at), column 0 the left."""
    vertices, faces = _cube(half=1.0)
    pose = look_at([3.0, 0, 0], [0, 0, 0])
    intrinsics = pinhole_intrinsics(40, 30, focal_px=60.0)  # the wall fills the image
    depth = render_depth(vertices, faces, intrinsics, pose, 40, 30)
    np.testing.assert_allclose(depth, 2.0, rtol=1e-6)
    points = points_from_depth(depth, intrinsics, pose).reshape(30, 40, 3)
    assert points[0, 0, 2] > 0 and points[-1, 0, 2] < 0  # top row up
    assert points[0, 0, 1] < 0 and points[0, -1, 1] > 0  # looking along -x with z up, the right is +y


def test_back_projection_round_trip():
    rng = np.random.default_rng(0)
    depth = rng.uniform(0.3, 1.2, size=(24, 32))
    depth[rng.random(depth.shape) < 0.2] = 0  # no return
    depth[0, 0], depth[0, 1] = np.nan, -1.0
    intrinsics = np.array([[40.0, 0.5, 15.2], [0, 42.0, 11.7], [0, 0, 1]])
    pose = look_at([0.2, -0.5, 0.4], [0, 0.1, 0])
    points = points_from_depth(depth, intrinsics, pose)
    valid = np.isfinite(depth) & (depth > 0)
    assert len(points) == valid.sum()
    # Project back: camera frame, then pixels.
    camera = (points - pose[:3, 3]) @ pose[:3, :3]
    pixels = camera @ intrinsics.T
    v, u = np.nonzero(valid)
    np.testing.assert_allclose(camera[:, 2], depth[valid], atol=1e-12)
    np.testing.assert_allclose(pixels[:, :2] / pixels[:, 2:], np.stack([u, v], 1), atol=1e-9)
    # The same camera as a [x, y, z, qw, qx, qy, qz] pose.
    as_pose = matrix_to_pose(torch.from_numpy(pose)).numpy()
    np.testing.assert_allclose(points_from_depth(depth, intrinsics, as_pose), points, atol=1e-12)


def test_clear_errors():
    vertices, faces = _cube()
    with pytest.raises(ValueError, match="sees 0 surface point"):
        render_views(vertices, faces, np.array([[0.5, 0, 0]]), 10, seed=0, spec=ViewSpec(dropout=0.9999))
    with pytest.raises(ValueError, match="distance_m: a camera"):
        render_views(vertices, faces, np.array([[0.06, 0, 0]]), 10, seed=0)
    with pytest.raises(ValueError, match="distance_m: expected"):
        ViewSpec(distance_m=(0.5, 0.2))
    with pytest.raises(ValueError, match="views: expected a positive"):
        partial_cloud(vertices, faces, 10, seed=0, views=0)
    with pytest.raises(ValueError, match="num_points: expected a positive"):
        partial_cloud(vertices, faces, 0, seed=0)
    with pytest.raises(ValueError, match="camera_pose: expected"):
        points_from_depth(np.ones((4, 4)), np.eye(3), np.eye(3))
    with pytest.raises(ValueError, match="depth: expected"):
        points_from_depth(np.ones(4), np.eye(3), np.eye(4))


def test_missing_open3d_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "open3d", None)  # as if not installed
    vertices, faces = _cube()
    with pytest.raises(ImportError, match=r"contactnet\[pointcloud\]"):
        render_depth(vertices, faces, pinhole_intrinsics(8, 8, 8.0), np.eye(4), 8, 8)


def test_cameras_stand_outside_objects_larger_than_their_distance_range():
    vertices, faces = _cube()
    big = vertices * (1.0 / H)  # a 2 m cube: bounding radius 1.73 m, beyond the 0.4-0.8 m range
    eyes = camera_eyes(big, 8, seed=1)
    radius = np.linalg.norm(big, axis=1).max()
    np.testing.assert_allclose(np.linalg.norm(eyes, axis=1), 1.5 * radius, rtol=1e-6)
    points, _ = render_views(big, faces, eyes[:1], 300, seed=1)
    assert points.shape == (300, 3)
    # Objects inside the range keep their drawn distances (cached views stay valid).
    small = camera_eyes(vertices, 8, seed=1)
    assert (np.linalg.norm(small, axis=1) >= 0.4).all() and (np.linalg.norm(small, axis=1) <= 0.8).all()
