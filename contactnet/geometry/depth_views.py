"""Partial point clouds as a depth camera sees them: render a depth image of a mesh with open3d's
ray casting, add sensor noise, back-project the returns to points, estimate normals from the
points alone, and resample to the K points the shape encoder reads.

    points, normals = partial_cloud(vertices, faces, num_points=1500, seed=0)          # one view
    points, normals = partial_cloud(vertices, faces, 1500, seed=0, views=3)            # merged
    points = points_from_depth(depth, intrinsics, camera_pose)                          # your camera

Camera convention (OpenCV, as RealSense/Azure Kinect SDKs and open3d use): the camera frame has
x to the right of the image, y down, z forward along the optical axis. `camera_pose` is the
camera-to-frame transform, a (4, 4) matrix or a `[x, y, z, qw, qx, qy, qz]` pose: the frame is
whatever you want points in (the object frame here, the robot's base for a user). `intrinsics`
is the 3x3 pinhole matrix [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] in pixels; pixel (u, v) is
column u, row v, its centre at those integer coordinates. A depth image holds z-depth (distance
along the optical axis, not along the ray) in metres, 0 (or NaN / Inf / negative) meaning no
return, as depth cameras report it.

Rendering here frames the object: the camera looks at the centre of the mesh's AABB and the focal
length makes the object's bounding sphere fill the image — the crop around the object of a real
camera's image, whose pixel density a 96x96 crop matches for a 10 cm object at 0.5 m with a
640-pixel, 70-degree camera.
"""

from dataclasses import dataclass

import numpy as np
import torch

from contactnet.geometry.poses import normalize_poses, pose_to_matrix


@dataclass(frozen=True)
class ViewSpec:
    """How a view is taken: image, camera placement, depth noise and normal estimation."""

    width: int = 96  # pixels
    height: int = 96
    distance_m: tuple[float, float] = (0.4, 0.8)  # camera distance from the AABB centre, drawn uniformly
    fov_deg: float | None = None  # horizontal field of view; None frames the object's bounding sphere
    # Depth noise along each ray, Gaussian with std σ(z) = noise_std_m + noise_quadratic * z² (z in m):
    # 1.3 mm at 0.4 m, 2.3 mm at 0.8 m, the shape of structured-light / stereo sensors' error.
    noise_std_m: float = 0.001
    noise_quadratic: float = 0.002
    dropout: float = 0.0  # probability that a pixel returns nothing
    # Normals from the neighbours within normal_radius_px pixel footprints (at the view's median
    # depth), at most normal_max_nn of them: a radius keeps a surface's normal from mixing in a
    # farther surface seen just beside it, where a plain KNN would.
    normal_radius_px: float = 4.0
    normal_max_nn: int = 30

    def __post_init__(self):
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"width, height: expected positive pixel counts, got {self.width}x{self.height}")
        near, far = self.distance_m
        if not 0 < near <= far:
            raise ValueError(f"distance_m: expected (near, far) with 0 < near <= far metres, got {self.distance_m}")
        if self.fov_deg is not None and not 0 < self.fov_deg < 180:
            raise ValueError(f"fov_deg: expected None or an angle in (0, 180) degrees, got {self.fov_deg}")
        if self.noise_std_m < 0 or self.noise_quadratic < 0:
            raise ValueError(f"noise_std_m, noise_quadratic: expected >= 0, got {self.noise_std_m}, {self.noise_quadratic}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout: expected a probability in [0, 1), got {self.dropout}")
        if self.normal_radius_px <= 0 or self.normal_max_nn < 3:
            raise ValueError(f"normal_radius_px, normal_max_nn: expected > 0 and >= 3, got "
                             f"{self.normal_radius_px}, {self.normal_max_nn}")


def _open3d():
    """open3d (ray casting, normal estimation, farthest-point thinning), imported where it is used:
    it is the `pointcloud` extra, which only partial clouds need."""
    try:
        import open3d
    except (ImportError, OSError) as e:  # OSError: its shared libraries (libusb) are missing
        raise ImportError("partial point clouds need open3d: pip install 'contactnet[pointcloud]' (on Debian "
                          f"also the system package libusb-1.0-0); importing it failed with: {e}") from e
    return open3d


def _raycasting_scene(vertices, faces):
    """An open3d ray-casting scene of one mesh (its float32 vertices, uint32 faces)."""
    o3d = _open3d()
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.core.Tensor(np.asarray(vertices, dtype=np.float32)),
                        o3d.core.Tensor(np.asarray(faces, dtype=np.uint32)))
    return scene


def _bounding_sphere(vertices: np.ndarray) -> tuple[np.ndarray, float]:
    lo, hi = vertices.min(0), vertices.max(0)
    return (lo + hi) / 2, float(np.linalg.norm(hi - lo)) / 2


def look_at(eye, target, up=None) -> np.ndarray:
    """(4, 4) camera-to-frame transform of a camera at `eye` looking at `target` (OpenCV axes),
    with the image's "up" (-y) as close to `up` as possible; `up` defaults to +z, or +y when the
    camera looks along z."""
    eye, target = np.asarray(eye, dtype=np.float64), np.asarray(target, dtype=np.float64)
    forward = target - eye
    if not np.linalg.norm(forward) > 0:
        raise ValueError(f"eye, target: expected distinct points, got {eye.tolist()} twice")
    forward /= np.linalg.norm(forward)
    if up is None:
        up = np.array([0.0, 0.0, 1.0]) if abs(forward[2]) < 0.99 else np.array([0.0, 1.0, 0.0])
    right = np.cross(forward, np.asarray(up, dtype=np.float64))
    if not np.linalg.norm(right) > 1e-9:
        raise ValueError(f"up: expected a direction not parallel to the viewing direction, got {list(up)}")
    right /= np.linalg.norm(right)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, np.cross(forward, right), forward], 1)
    pose[:3, 3] = eye
    return pose


def pinhole_intrinsics(width: int, height: int, focal_px: float) -> np.ndarray:
    """(3, 3) intrinsics with square pixels and the principal point at the image centre."""
    return np.array([[focal_px, 0, (width - 1) / 2], [0, focal_px, (height - 1) / 2], [0, 0, 1]])


def _camera_matrix(camera_pose) -> np.ndarray:
    pose = np.asarray(camera_pose, dtype=np.float64)
    if pose.shape == (7,):
        return pose_to_matrix(normalize_poses(torch.from_numpy(pose), "camera_pose")).numpy()
    if pose.shape != (4, 4) or not np.isfinite(pose).all():
        raise ValueError(f"camera_pose: expected a finite (4, 4) camera-to-frame matrix or a (7,) pose "
                         f"[x, y, z, qw, qx, qy, qz], got shape {pose.shape}")
    return pose


def _check_intrinsics(intrinsics) -> np.ndarray:
    k = np.asarray(intrinsics, dtype=np.float64)
    if k.shape != (3, 3) or not k[0, 0] > 0 or not k[1, 1] > 0:
        raise ValueError(f"intrinsics: expected a (3, 3) pinhole matrix with fx, fy > 0, got {k.tolist()}")
    return k


def _pixel_rays(intrinsics: np.ndarray, width: int, height: int) -> np.ndarray:
    """(H, W, 3) camera-frame ray of every pixel, scaled so its z is 1: a ray parameter is a z-depth."""
    v, u = np.mgrid[0:height, 0:width].astype(np.float64)
    x = (u - intrinsics[0, 2] - intrinsics[0, 1] * (v - intrinsics[1, 2]) / intrinsics[1, 1]) / intrinsics[0, 0]
    y = (v - intrinsics[1, 2]) / intrinsics[1, 1]
    return np.stack([x, y, np.ones_like(x)], -1)


def render_depth(vertices: np.ndarray, faces: np.ndarray, intrinsics, camera_pose, width: int,
                 height: int) -> np.ndarray:
    """Exact z-depth image (height, width) float32 of the mesh, metres, 0 where a ray misses.

    vertices (V, 3), faces (F, 3) in the frame of `camera_pose` (see the module docstring).
    """
    o3d = _open3d()

    k, pose = _check_intrinsics(intrinsics), _camera_matrix(camera_pose)
    scene = _raycasting_scene(vertices, faces)
    directions = _pixel_rays(k, width, height) @ pose[:3, :3].T
    rays = np.concatenate([np.broadcast_to(pose[:3, 3], directions.shape), directions], -1)
    t_hit = scene.cast_rays(o3d.core.Tensor(rays.astype(np.float32)))["t_hit"].numpy()
    return np.where(np.isfinite(t_hit), t_hit, 0).astype(np.float32)


def points_from_depth(depth: np.ndarray, intrinsics, camera_pose) -> np.ndarray:
    """Back-project a depth image: (N, 3) float64 points in the frame of `camera_pose`, one per
    pixel with a return (depth > 0 and finite), in row-major pixel order.

    depth (H, W) z-depth in metres; intrinsics (3, 3); camera_pose (4, 4) or (7,) camera-to-frame.
    """
    depth = np.asarray(depth, dtype=np.float64)
    if depth.ndim != 2:
        raise ValueError(f"depth: expected an (H, W) image, got shape {depth.shape}")
    k, pose = _check_intrinsics(intrinsics), _camera_matrix(camera_pose)
    valid = np.isfinite(depth) & (depth > 0)
    camera_points = _pixel_rays(k, depth.shape[1], depth.shape[0])[valid] * depth[valid, None]
    return camera_points @ pose[:3, :3].T + pose[:3, 3]


def estimate_normals(points: np.ndarray, camera_position, radius: float, max_nn: int = 30) -> np.ndarray:
    """(N, 3) unit normals of a point cloud from its neighbours within `radius` metres (at most
    `max_nn`), oriented towards `camera_position` (a visible surface faces its camera)."""
    o3d = _open3d()

    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, dtype=np.float64)))
    cloud.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=radius, max_nn=max_nn))
    cloud.orient_normals_towards_camera_location(np.asarray(camera_position, dtype=np.float64))
    normals = np.asarray(cloud.normals)
    # A point with fewer than 3 neighbours has no plane; the line of sight is its best guess.
    to_camera = np.asarray(camera_position) - points
    lone = np.abs(np.linalg.norm(normals, axis=1) - 1) > 1e-3
    normals[lone] = to_camera[lone] / np.linalg.norm(to_camera[lone], axis=1, keepdims=True)
    return normals


def camera_eyes(vertices: np.ndarray, views: int, seed: int, spec: ViewSpec | None = None) -> np.ndarray:
    """(views, 3) camera positions around the mesh's AABB centre: uniform directions, distances
    uniform in `spec.distance_m`, pushed out to 1.5× the bounding sphere's radius for an object
    that large (a table or a shelf; a camera in its bounding sphere would not see it whole). The
    eyes `partial_cloud(..., seed, views)` uses."""
    spec = spec or ViewSpec()
    if views <= 0:
        raise ValueError(f"views: expected a positive number of views, got {views}")
    rng = np.random.default_rng([seed, 0])
    directions = rng.normal(size=(views, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    centre, radius = _bounding_sphere(np.asarray(vertices, dtype=np.float64))
    return centre + directions * np.maximum(rng.uniform(*spec.distance_m, size=(views, 1)), 1.5 * radius)


def _view(vertices, faces, eye, spec: ViewSpec, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One noisy view from `eye`: object-frame points (N, 3) and normals oriented to the camera."""
    centre, radius = _bounding_sphere(vertices)
    distance = float(np.linalg.norm(eye - centre))
    if distance <= radius:
        raise ValueError(f"distance_m: a camera {distance:.3f} m from the centre is inside the object's "
                         f"bounding sphere (radius {radius:.3f} m); expected distances beyond it")
    if spec.fov_deg is None:  # the bounding sphere's image is a disc of radius f·tan(asin(r / d))
        focal = 0.5 * min(spec.width, spec.height) * np.sqrt(distance**2 - radius**2) / radius
    else:
        focal = 0.5 * spec.width / np.tan(np.radians(spec.fov_deg) / 2)
    intrinsics, pose = pinhole_intrinsics(spec.width, spec.height, focal), look_at(eye, centre)
    depth = render_depth(vertices, faces, intrinsics, pose, spec.width, spec.height).astype(np.float64)
    hit = depth > 0
    # Noise moves a return along its own ray: a z-depth error scales the camera-frame point.
    depth[hit] += rng.normal(size=hit.sum()) * (spec.noise_std_m + spec.noise_quadratic * depth[hit] ** 2)
    if spec.dropout > 0:
        depth[rng.random(depth.shape) < spec.dropout] = 0
    points = points_from_depth(depth, intrinsics, pose)
    if len(points) < 3:
        raise ValueError(f"eye: the view from {np.round(eye, 4).tolist()} sees {len(points)} surface point(s) of "
                         f"{spec.width}x{spec.height} pixels; at least 3 are needed to estimate normals")
    footprint = np.median(depth[depth > 0]) / focal  # metres per pixel at the surface
    return points, estimate_normals(points, eye, spec.normal_radius_px * footprint, spec.normal_max_nn)


def _resample(points: np.ndarray, normals: np.ndarray, count: int, rng: np.random.Generator):
    """Exactly `count` points: farthest-point thinning (the even spread of the full clouds) when
    there are more, every point once plus random repeats when there are fewer."""
    o3d = _open3d()

    n = len(points)
    if n >= count:
        cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
        cloud.normals = o3d.utility.Vector3dVector(normals)
        cloud = cloud.farthest_point_down_sample(count, int(rng.integers(n)))
        return np.asarray(cloud.points), np.asarray(cloud.normals)
    index = np.concatenate([np.arange(n), rng.integers(n, size=count - n)])
    return points[index], normals[index]


def render_views(vertices: np.ndarray, faces: np.ndarray, eyes: np.ndarray, num_points: int, seed: int,
                 spec: ViewSpec | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The merged cloud of the views from `eyes` (E, 3), resampled to `num_points`: points and
    normals (num_points, 3) float32, object frame. Deterministic for `seed`."""
    spec = spec or ViewSpec()
    if num_points <= 0:
        raise ValueError(f"num_points: expected a positive count, got {num_points}")
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces)
    eyes = np.asarray(eyes, dtype=np.float64).reshape(-1, 3)
    rng = np.random.default_rng([seed, 1])
    views = [_view(vertices, faces, eye, spec, rng) for eye in eyes]
    points, normals = _resample(np.concatenate([p for p, _ in views]), np.concatenate([n for _, n in views]),
                                num_points, rng)
    return points.astype(np.float32), normals.astype(np.float32)


def partial_cloud(vertices: np.ndarray, faces: np.ndarray, num_points: int, seed: int, views: int = 1,
                  spec: ViewSpec | None = None) -> tuple[np.ndarray, np.ndarray]:
    """What `views` depth cameras around the object see: points and normals (num_points, 3)
    float32 in the object frame, a pure function of (mesh, num_points, seed, views, spec).

    vertices (V, 3) metres, faces (F, 3). Raises ValueError when a view sees nothing.
    """
    return render_views(vertices, faces, camera_eyes(vertices, views, seed, spec), num_points, seed, spec)


def ray_exits(vertices: np.ndarray, faces: np.ndarray, eyes: np.ndarray, points: np.ndarray, casts: int = 8):
    """Where each camera ray last leaves the object: the back surface behind each seen point (what a
    camera on the far side would see), which `ViewCompletion`'s back head learns. eyes (V, 3),
    points (V, K, 3) of views from them (object frame) → exits (V, K, 3) float32, their outward
    normals (V, K, 3), and valid (V, K) (False where the ray finds no surface that it leaves through,
    e.g. an open mesh). Each ray is followed through at most `casts` surface crossings, each cast
    starting 10 µm past the last (walls thinner than that are stepped over)."""
    eyes, points = np.asarray(eyes, dtype=np.float64), np.asarray(points, dtype=np.float64)
    if eyes.ndim != 2 or eyes.shape[1] != 3 or points.ndim != 3 or points.shape[::2] != (len(eyes), 3):
        raise ValueError(f"eyes, points: expected (V, 3) and (V, K, 3), got {eyes.shape} and {points.shape}")
    o3d = _open3d()

    scene = _raycasting_scene(vertices, faces)
    eyes = eyes[:, None].repeat(points.shape[1], 1)
    d = points - eyes
    d /= np.linalg.norm(d, axis=-1, keepdims=True).clip(1e-12)
    t = np.zeros(d.shape[:2])
    exit_t, normals = np.full(d.shape[:2], np.nan), np.zeros(d.shape, dtype=np.float32)
    live = np.ones(d.shape[:2], dtype=bool)
    for _ in range(casts):
        rays = np.concatenate([eyes + t[..., None] * d, d], -1)[live].astype(np.float32)
        hit = scene.cast_rays(o3d.core.Tensor(rays))
        t_hit, n = hit["t_hit"].numpy(), hit["primitive_normals"].numpy()
        found = np.isfinite(t_hit)
        index = np.flatnonzero(live)
        t.flat[index[found]] += t_hit[found]
        leaving = found & ((n * d.reshape(-1, 3)[index]).sum(-1) > 0)
        exit_t.flat[index[leaving]] = t.flat[index[leaving]]
        t.flat[index[found]] += 1e-5  # the next cast starts just past this crossing
        normals.reshape(-1, 3)[index[leaving]] = n[leaving]
        live.flat[index[~found]] = False
        if not live.any():
            break
    valid = np.isfinite(exit_t)
    exits = eyes + np.where(valid, exit_t, 0)[..., None] * d
    return exits.astype(np.float32), normals, valid
