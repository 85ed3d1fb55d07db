import pytest
import torch

from contactnet.geometry.frames import frame_quaternions, reframe_object
from contactnet.geometry.poses import compose_poses, quaternion_to_matrix, transform_points


def test_frame_quaternions_are_fixed_unit_rotations_with_the_identity_first():
    q = frame_quaternions(5)
    assert q.shape == (5, 4) and q.dtype == torch.float64
    torch.testing.assert_close(q[0], torch.tensor([1.0, 0, 0, 0], dtype=torch.float64))
    torch.testing.assert_close(q.norm(dim=1), torch.ones(5, dtype=torch.float64))
    assert bool((q[:, 0] >= 0).all())
    torch.testing.assert_close(frame_quaternions(3), q[:3], rtol=0, atol=0)  # a prefix of the larger set
    torch.testing.assert_close(frame_quaternions(5), q, rtol=0, atol=0)  # the same draw every time
    assert torch.cdist(q, q).add(torch.eye(5, dtype=torch.float64)).min() > 0  # distinct rotations
    for bad in (0, -2, 2.0, True, None):
        with pytest.raises(ValueError, match="frames"):
            frame_quaternions(bad)


@pytest.mark.parametrize("box_from_points", [False, True])
def test_reframed_object_stays_where_it_was(box_from_points):
    g = torch.Generator().manual_seed(3)
    vertices = torch.rand(40, 3, generator=g, dtype=torch.float64) * torch.tensor([0.3, 0.1, 0.2]).double() + 0.05
    points, normals = vertices[:25] + 0.0, torch.nn.functional.normalize(torch.randn(25, 3, generator=g).double(), dim=1)
    q = frame_quaternions(2)[1]
    new_points, new_normals, aabb, inverse = reframe_object(points, normals, vertices, q, box_from_points)
    R = quaternion_to_matrix(q)
    torch.testing.assert_close(new_normals, normals @ R.T)
    # The new frame is centred on the turned mesh's box; its box is the mesh's (or the points').
    turned = vertices @ R.T
    centre = (turned.amin(0) + turned.amax(0)) / 2
    source = new_points if box_from_points else turned - centre
    torch.testing.assert_close(aabb, torch.stack([source.amin(0), source.amax(0)]))
    if not box_from_points:
        torch.testing.assert_close(aabb[0], -aabb[1])
    # Any pose of the old frame, composed with the inverse, puts every point where it was.
    poses = torch.cat([torch.randn(6, 3, generator=g).double(),
                       torch.nn.functional.normalize(torch.randn(6, 4, generator=g).double(), dim=1)], 1)
    old_world = transform_points(poses[:, None], points[None])
    new_world = transform_points(compose_poses(poses, inverse.expand(6, 7))[:, None], new_points[None])
    torch.testing.assert_close(new_world, old_world)
