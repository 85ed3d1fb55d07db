"""An independent forward kinematics for the robot tests: the URDF's joint origins and axes composed
in numpy (Rodrigues' formula for revolute joints, <mimic> read from the XML), without
pytorch_kinematics or planning/urdf.py."""

import xml.etree.ElementTree as ET

import numpy as np


def _rpy(r, p, y):
    rx = np.array([[1, 0, 0], [0, np.cos(r), -np.sin(r)], [0, np.sin(r), np.cos(r)]])
    ry = np.array([[np.cos(p), 0, np.sin(p)], [0, 1, 0], [-np.sin(p), 0, np.cos(p)]])
    rz = np.array([[np.cos(y), -np.sin(y), 0], [np.sin(y), np.cos(y), 0], [0, 0, 1]])
    return rz @ ry @ rx


def origin(element) -> np.ndarray:
    t = np.eye(4)
    if element is not None:
        t[:3, :3] = _rpy(*[float(v) for v in element.get("rpy", "0 0 0").split()])
        t[:3, 3] = [float(v) for v in element.get("xyz", "0 0 0").split()]
    return t


def _axis_angle(axis, angle) -> np.ndarray:
    k = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    t = np.eye(4)
    t[:3, :3] = np.eye(3) + np.sin(angle) * kx + (1 - np.cos(angle)) * kx @ kx
    return t


def _value(joint, q: dict[str, float], mimics: dict) -> float:
    """The joint's value: from q, or (a <mimic> joint) multiplier * its leader's value + offset."""
    mimic = mimics.get(joint.get("name"))
    if mimic is None:
        return q[joint.get("name")]
    leader = mimic.get("joint")
    return float(mimic.get("multiplier", 1)) * _value(mimics["_joints"][leader], q, mimics) \
        + float(mimic.get("offset", 0))


def link_transforms(urdf_text: str, q: dict[str, float]) -> dict[str, np.ndarray]:
    """World transform (4, 4) of every link, root at the identity, joint values by joint name (the
    independent joints: <mimic> joints are computed from their leaders)."""
    root = ET.fromstring(urdf_text.encode())
    joints = root.findall("joint")
    mimics = {j.get("name"): j.find("mimic") for j in joints if j.find("mimic") is not None}
    mimics["_joints"] = {j.get("name"): j for j in joints}
    children = {j.find("child").get("link") for j in joints}
    out = {link.get("name"): np.eye(4) for link in root.findall("link") if link.get("name") not in children}
    pending = list(joints)
    while pending:
        for j in list(pending):
            parent, child = j.find("parent").get("link"), j.find("child").get("link")
            if parent not in out:
                continue
            axis = [float(v) for v in (j.find("axis").get("xyz") if j.find("axis") is not None else "1 0 0").split()]
            motion = np.eye(4)
            value = _value(j, q, mimics) if j.get("type") != "fixed" else 0.0
            if j.get("type") in ("revolute", "continuous"):
                motion = _axis_angle(axis, value)
            elif j.get("type") == "prismatic":
                motion[:3, 3] = np.asarray(axis) / np.linalg.norm(axis) * value
            out[child] = out[parent] @ origin(j.find("origin")) @ motion
            pending.remove(j)
    return out
