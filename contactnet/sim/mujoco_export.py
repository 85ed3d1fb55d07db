"""The same scene in MuJoCo, for side-by-side comparisons (needs the `mujoco` package).

MuJoCo collides mesh geoms through their convex hulls: a bowl becomes a solid dome and objects
rest on its hull, the failure mode the LOCC paper shows for IsaacGym's IG-CVXH.
"""

from __future__ import annotations

import numpy as np
import torch

from contactnet.sim.scene import Scene

__all__ = ["MujocoScene", "scene_to_mjcf"]


def _floats(a) -> str:
    return " ".join(f"{x:.9g}" for x in np.asarray(a, dtype=np.float64).reshape(-1))


def scene_to_mjcf(scene: Scene, dt: float = 0.01, mu: float = 0.5, gravity=(0.0, 0.0, -9.81)) -> str:
    """MJCF text of `scene`: meshes inline, dynamic bodies with free joints and the mesh's density
    (or mass), static bodies in the world body, kinematic bodies as mocap bodies."""
    assets, bodies = [], []
    for i, body in enumerate(scene.bodies):
        v, f = body.mesh.vertices.numpy(), body.mesh.faces.numpy()
        assets.append(f'<mesh name="m{i}" vertex="{_floats(v)}" face="{" ".join(map(str, f.reshape(-1)))}"/>')
        pose = body.pose.numpy()
        mu_i = body.friction if body.friction is not None else mu
        mass = f'mass="{body.mass.mass:.9g}"'
        geom = f'<geom type="mesh" mesh="m{i}" friction="{mu_i:.6g} 0.005 0.0001" {mass}/>'
        attrs = f'name="b{i}" pos="{_floats(pose[:3])}" quat="{_floats(pose[3:])}"'
        if body.kind == "dynamic":
            bodies.append(f"<body {attrs}><freejoint/>{geom}</body>")
        elif body.kind == "kinematic":
            bodies.append(f'<body {attrs} mocap="true">{geom}</body>')
        else:
            bodies.append(f"<body {attrs}>{geom}</body>")
    return (f'<mujoco><option timestep="{dt:.9g}" gravity="{_floats(gravity)}" integrator="implicitfast"/>'
            f'<asset>{"".join(assets)}</asset><worldbody>{"".join(bodies)}</worldbody></mujoco>')


class MujocoScene:
    """A MuJoCo model and data for `scene`; `step()` drives kinematic bodies along their
    trajectories (mocap) and advances one time step; `poses` are (B, 7) [x, y, z, qw, qx, qy, qz]."""

    def __init__(self, scene: Scene, dt: float = 0.01, mu: float = 0.5, gravity=(0.0, 0.0, -9.81)):
        import mujoco

        self._mj = mujoco
        self.scene = scene
        self.model = mujoco.MjModel.from_xml_string(scene_to_mjcf(scene, dt, mu, gravity))
        self.data = mujoco.MjData(self.model)
        self._kinematic = [(i, b.trajectory) for i, b in enumerate(scene.bodies) if b.kind == "kinematic"]
        self._mocap = {i: int(self.model.body_mocapid[i + 1]) for i, _ in self._kinematic}
        mujoco.mj_forward(self.model, self.data)

    def step(self) -> None:
        t = torch.tensor([self.data.time + self.model.opt.timestep], dtype=torch.float64)
        for i, trajectory in self._kinematic:
            pose = torch.as_tensor(trajectory(t), dtype=torch.float64).reshape(-1, 7)[0].numpy()
            self.data.mocap_pos[self._mocap[i]] = pose[:3]
            self.data.mocap_quat[self._mocap[i]] = pose[3:]
        self._mj.mj_step(self.model, self.data)

    @property
    def poses(self) -> torch.Tensor:
        return torch.as_tensor(np.concatenate([self.data.xpos[1:], self.data.xquat[1:]], axis=1))
