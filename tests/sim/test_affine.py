"""Affine-body math: mass properties, orthogonality energy derivatives, pose conversions."""

import math

import numpy as np
import pytest
import torch
import trimesh

from contactnet.geometry.poses import quaternion_to_matrix
from contactnet.sim.affine import (
    mass_matrix,
    mass_properties,
    orthogonality_energy,
    pose_to_q,
    q_to_pose,
    q_velocity_to_twist,
    twist_to_q_velocity,
)
from contactnet.sim.scenes import procedural_mesh


def test_mass_properties_match_trimesh_on_a_closed_nonconvex_mesh():
    mesh = procedural_mesh("mug", 0, 0.08)
    v, f = mesh.vertices.numpy(), mesh.faces.numpy()
    props = mass_properties(v, f, density=700.0)
    tm = trimesh.Trimesh(v, f, process=False)
    tm.density = 700.0
    assert props.mass == pytest.approx(tm.mass, rel=1e-10)
    assert props.volume == pytest.approx(tm.volume, rel=1e-10)
    np.testing.assert_allclose(props.first_moment / props.mass, tm.center_mass, atol=1e-12)
    # ∫ρ x xᵀ = ½ tr(I) I − I with I the inertia tensor about the origin
    inertia = tm.moment_inertia + tm.mass * (tm.center_mass @ tm.center_mass * np.eye(3)
                                             - np.outer(tm.center_mass, tm.center_mass))
    np.testing.assert_allclose(props.second_moment, 0.5 * np.trace(inertia) * np.eye(3) - inertia,
                               rtol=1e-9, atol=1e-15)


def test_mass_given_rescales_density_and_open_meshes_need_a_mass():
    mesh = procedural_mesh("ring", 0, 0.08)
    v, f = mesh.vertices.numpy(), mesh.faces.numpy()
    assert mass_properties(v, f, mass=0.3).mass == pytest.approx(0.3)
    open_faces = f[:-10]
    with pytest.raises(ValueError, match="mass"):
        mass_properties(v, open_faces)
    shell = mass_properties(v, open_faces, mass=0.2)
    assert shell.mass == pytest.approx(0.2) and shell.volume == pytest.approx(0.2 / 1000)
    assert np.all(np.linalg.eigvalsh(shell.second_moment) > 0)


def test_mass_matrix_is_the_integral_of_jacobian_products():
    # ∫ρ JᵀJ over a box by sampling its volume densely gives the same matrix
    from contactnet.sim.reference import affine_jacobian
    from contactnet.sim.scene import box_mesh

    box = box_mesh((0.1, 0.2, 0.3))
    props = mass_properties(box.vertices.numpy(), box.faces.numpy(), density=1000.0)
    g = (torch.arange(40, dtype=torch.float64) + 0.5) / 40 - 0.5
    pts = torch.cartesian_prod(g * 0.1, g * 0.2, g * 0.3) + torch.tensor([0.0, 0.0, 0.0])
    J = affine_jacobian(pts)
    M = torch.einsum("vik,vil->kl", J, J) * (1000.0 * 0.006 / pts.shape[0])
    torch.testing.assert_close(mass_matrix(props), M, rtol=2e-3, atol=1e-9)


def test_orthogonality_gradient_and_hessian_match_autograd():
    torch.manual_seed(0)
    A = torch.eye(3, dtype=torch.float64) + 0.2 * torch.randn(5, 3, 3, dtype=torch.float64)
    w = torch.rand(5, dtype=torch.float64) + 0.5
    value, grad, hess = orthogonality_energy(A, w)

    def phi(a):
        a = a.reshape(3, 3)
        c = a @ a.T - torch.eye(3, dtype=a.dtype)
        return (c * c).sum()

    for n in range(5):
        a = A[n].reshape(9)
        assert value[n] == pytest.approx(float(w[n] * phi(a)), rel=1e-12)
        torch.testing.assert_close(grad[n], w[n] * torch.func.grad(phi)(a))
        h = w[n] * torch.func.hessian(phi)(a)
        evals, evecs = torch.linalg.eigh(h)
        torch.testing.assert_close(hess[n], evecs @ torch.diag(evals.clamp_min(0)) @ evecs.T)
        assert torch.linalg.eigvalsh(hess[n]).min() > -1e-9


def test_pose_and_twist_round_trips():
    torch.manual_seed(1)
    q = torch.randn(4, 4, dtype=torch.float64)
    q = q / q.norm(dim=1, keepdim=True)
    poses = torch.cat([torch.randn(4, 3, dtype=torch.float64), q], 1)
    back = q_to_pose(pose_to_q(poses))
    sign = torch.sign((back[:, 3:] * poses[:, 3:]).sum(1, keepdim=True))
    torch.testing.assert_close(back * torch.cat([torch.ones(4, 3, dtype=torch.float64), sign.expand(4, 4)], 1), poses)
    twist = torch.randn(4, 6, dtype=torch.float64)
    torch.testing.assert_close(q_velocity_to_twist(pose_to_q(poses), twist_to_q_velocity(pose_to_q(poses), twist)), twist)


def test_polar_rotation_of_a_stretched_matrix():
    R = quaternion_to_matrix(torch.tensor([math.cos(0.3), 0.0, math.sin(0.3), 0.0], dtype=torch.float64))
    S = torch.diag(torch.tensor([1.01, 0.99, 1.002], dtype=torch.float64))
    q = torch.cat([torch.zeros(3, dtype=torch.float64), (R @ S).reshape(9)])
    torch.testing.assert_close(quaternion_to_matrix(q_to_pose(q)[3:]), R)
