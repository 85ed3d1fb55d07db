"""Procedural object families: the built-in default object set, made locally from a seed.

Every family builds a watertight solid from manifold3d primitives and booleans, then `make_object`
refines it to a few hundred to a few thousand triangles, scales it so its largest AABB side is
5–25 cm, and centres it on its AABB centre (the object frame of docs/design.md). Families are the
unit of the known/unknown split. The default set (`DEFAULT_FAMILIES`, what every data config
builds) has real concavities in every family (cavities, holes, re-entrant corners) and, in
`thin`, the flat and slender objects real scenes hold (sheets, blades, washers, sticks); four more
(vessels, superquadrics, drilled blocks, twisted extrusions) widen the variety for nets that must
generalise past it, e.g. the single-view completion's back surface.

    make_object("mug", seed=3) -> (vertices (V, 3) float64, faces (F, 3) int64), metres
"""

from collections.abc import Callable

import numpy as np

SIZE_RANGE_M = (0.05, 0.25)
TRIANGLE_RANGE = (300, 5000)


def _manifold():
    import manifold3d  # imported where used: `import contactnet` stays light

    return manifold3d


def _polygon(points) -> "object":
    m = _manifold()
    pts = np.asarray(points, dtype=np.float64)
    # manifold3d wants counter-clockwise outer contours.
    area = 0.5 * np.sum(pts[:, 0] * np.roll(pts[:, 1], -1) - np.roll(pts[:, 0], -1) * pts[:, 1])
    return m.CrossSection([pts if area > 0 else pts[::-1]])


def _revolve(profile, segments: int):
    """Solid of revolution of an (r, z) profile about the z axis."""
    return _polygon(profile).revolve(circular_segments=segments)


def _extrude(outline, height: float):
    return _polygon(outline).extrude(height)


def _cube(size, center=True):
    return _manifold().Manifold.cube(list(map(float, size)), center)


def _cylinder(height, radius, segments, center=True):
    return _manifold().Manifold.cylinder(float(height), float(radius), -1.0, int(segments), center)


# ---- families: each takes a Generator and returns a manifold3d.Manifold (unit-ish scale) ------


def bowl(rng):
    r, h, t = 1.0, rng.uniform(0.35, 0.6), rng.uniform(0.05, 0.1)
    foot = rng.uniform(0.35, 0.55)
    profile = [(0, 0), (foot, 0), (r, h), (r - t, h), (foot - t * 0.7, t), (0, t)]
    return _revolve(profile, int(rng.integers(32, 56)))


def cup(rng):
    rb, rt, h, t = rng.uniform(0.3, 0.4), rng.uniform(0.4, 0.5), rng.uniform(0.9, 1.3), rng.uniform(0.04, 0.07)
    profile = [(0, 0), (rb, 0), (rt, h), (rt - t, h), (rb - t, t), (0, t)]
    return _revolve(profile, int(rng.integers(32, 56)))


def mug(rng):
    m = _manifold()
    r, h, t = rng.uniform(0.35, 0.45), rng.uniform(0.8, 1.1), rng.uniform(0.04, 0.07)
    body = _revolve([(0, 0), (r, 0), (r, h), (r - t, h), (r - t, t), (0, t)], int(rng.integers(32, 48)))
    # Handle: half a torus (revolved in the xy plane over y >= 0), turned into the xz plane so it
    # bulges towards +x, with its two ends sunk into the outer wall.
    hr, tube = rng.uniform(0.2, 0.3), rng.uniform(0.04, 0.06)
    handle = m.CrossSection.circle(tube, 16).translate([hr, 0]).revolve(24, 180.0)
    handle = handle.rotate([90, 90, 0]).translate([r - tube, 0, h / 2])
    return body + handle


def tray(rng):
    w, d, h, t = rng.uniform(0.8, 1.0), rng.uniform(0.5, 0.8), rng.uniform(0.1, 0.2), rng.uniform(0.03, 0.06)
    return _cube([w, d, h]) - _cube([w - 2 * t, d - 2 * t, h]).translate([0, 0, t])


def open_box(rng):
    w, d, h, t = rng.uniform(0.6, 1.0), rng.uniform(0.5, 0.9), rng.uniform(0.5, 0.9), rng.uniform(0.04, 0.08)
    return _cube([w, d, h]) - _cube([w - 2 * t, d - 2 * t, h]).translate([0, 0, t])


def ring(rng):
    m = _manifold()
    big, tube = 1.0, rng.uniform(0.12, 0.3)
    return m.CrossSection.circle(tube, int(rng.integers(12, 20))).translate([big, 0]).revolve(int(rng.integers(32, 56)))


def l_bracket(rng):
    a, b, t = rng.uniform(0.6, 1.0), rng.uniform(0.4, 0.8), rng.uniform(0.08, 0.15)
    return _extrude([(0, 0), (a, 0), (a, t), (t, t), (t, b), (0, b)], rng.uniform(0.2, 0.5))


def t_bracket(rng):
    w, h, t = rng.uniform(0.6, 1.0), rng.uniform(0.5, 0.9), rng.uniform(0.08, 0.15)
    outline = [(-t / 2, 0), (t / 2, 0), (t / 2, h - t), (w / 2, h - t), (w / 2, h), (-w / 2, h), (-w / 2, h - t), (-t / 2, h - t)]
    return _extrude(outline, rng.uniform(0.15, 0.4))


def u_bracket(rng):
    w, h, t = rng.uniform(0.5, 0.9), rng.uniform(0.5, 0.9), rng.uniform(0.08, 0.14)
    outline = [(0, 0), (w, 0), (w, h), (w - t, h), (w - t, t), (t, t), (t, h), (0, h)]
    return _extrude(outline, rng.uniform(0.15, 0.4))


def hook(rng):
    m = _manifold()
    tube, bend, shank = rng.uniform(0.05, 0.08), rng.uniform(0.2, 0.35), rng.uniform(0.6, 1.0)
    stem = _cylinder(shank, tube, 16, center=False).translate([bend, 0, 0])
    # Half a torus in the xz plane below z = 0 joins the shank (x = bend) to the tip (x = -bend).
    curve = m.CrossSection.circle(tube, 16).translate([bend, 0]).revolve(24, 180.0).rotate([-90, 0, 0])
    tip = _cylinder(shank * 0.35, tube, 16, center=False).translate([-bend, 0, 0])
    return stem + curve + tip


def star_prism(rng):
    n = int(rng.integers(5, 9))
    r_out, r_in = 1.0, rng.uniform(0.35, 0.6)
    angles = np.arange(2 * n) * np.pi / n
    radii = np.where(np.arange(2 * n) % 2 == 0, r_out, r_in)
    return _extrude(np.stack([radii * np.cos(angles), radii * np.sin(angles)], 1), rng.uniform(0.2, 0.6))


def gear_prism(rng):
    teeth = int(rng.integers(8, 16))
    r_root, r_tip = 0.8, 1.0
    k = np.arange(4 * teeth)
    angles = k * 2 * np.pi / (4 * teeth)
    radii = np.where((k % 4) < 2, r_tip, r_root)
    gear = _extrude(np.stack([radii * np.cos(angles), radii * np.sin(angles)], 1), rng.uniform(0.2, 0.4))
    return gear - _cylinder(2.0, rng.uniform(0.2, 0.4), 24)


def comb(rng):
    tines, length, t = int(rng.integers(3, 7)), rng.uniform(0.6, 1.0), rng.uniform(0.05, 0.08)
    width = tines * 3 * t
    shape = _cube([width, 0.2, t], center=False)
    for i in range(tines):
        shape = shape + _cube([t, length, t], center=False).translate([i * 3 * t + t, 0.2, 0])
    return shape


def random_union(rng):
    m = _manifold()
    parts = []
    for _ in range(int(rng.integers(3, 7))):
        kind = rng.integers(3)
        size = rng.uniform(0.2, 0.6)
        if kind == 0:
            part = _cube(rng.uniform(0.3, 1.0, 3) * size)
        elif kind == 1:
            part = _cylinder(size * rng.uniform(0.8, 2.0), size * 0.3, 24)
        else:
            part = m.Manifold.sphere(size * 0.5, 24)
        part = part.rotate(list(rng.uniform(0, 360, 3))).translate(list(rng.uniform(-0.4, 0.4, 3)))
        parts.append(part)
    shape = parts[0]
    for part in parts[1:]:
        shape = shape + part
    return shape


def egad_like(rng):
    """Irregular blob: a few fused spheres with a smooth random radial warp and a carved dent."""
    m = _manifold()
    shape = m.Manifold.sphere(0.5, 40)
    for _ in range(int(rng.integers(2, 4))):
        shape = shape + m.Manifold.sphere(rng.uniform(0.25, 0.45), 32).translate(list(rng.uniform(-0.45, 0.45, 3)))
    freq = rng.uniform(2.0, 5.0, (3, 3))
    phase = rng.uniform(0, 2 * np.pi, 3)
    amp = rng.uniform(0.05, 0.12)

    def warp(points):
        p = np.asarray(points)
        bump = sum(np.sin(p @ freq[i] + phase[i]) for i in range(3))
        return p * (1.0 + amp * bump)[:, None]

    shape = shape.refine(2).warp_batch(warp)
    dent = m.Manifold.sphere(rng.uniform(0.25, 0.35), 32).translate(list(rng.normal(size=3) / np.sqrt(3) * 0.6))
    return shape - dent


# ---- wider variety, outside the default set (DEFAULT_FAMILIES): training shapes for nets that must
# ---- generalise past it, e.g. the single-view completion's back surface ---------------------------


def vessel(rng):
    """Bottle, jar, vase or can: a solid of revolution of a smooth random radius profile, some
    necked, half of them hollow with an open top."""
    h = rng.uniform(0.8, 2.2)
    z = np.linspace(0.0, h, 25)
    knots = int(rng.integers(3, 7))
    r = np.interp(z, np.linspace(0.0, h, knots), rng.uniform(0.25, 0.6, knots))
    if rng.random() < 0.4:  # a bottle's neck over the top fifth
        r = np.where(z > 0.8 * h, np.minimum(r, rng.uniform(0.12, 0.2)), r)
    for _ in range(3):  # smooth the corners of the piecewise-linear profile
        r[1:-1] = 0.25 * r[:-2] + 0.5 * r[1:-1] + 0.25 * r[2:]
    outer = list(zip(r, z))
    if rng.random() < 0.5:
        return _revolve([(0.0, 0.0), *outer, (0.0, h)], int(rng.integers(32, 56)))
    t = rng.uniform(0.03, 0.07)
    inner = [(ri - t, zi) for ri, zi in zip(r[::-1], z[::-1]) if zi > t]
    return _revolve([(0.0, 0.0), *outer, *inner, (inner[-1][0], t), (0.0, t)], int(rng.integers(32, 56)))


def superquadric(rng):
    """A superellipsoid (boxy to pinched, exponents 0.2-2.5), tapered along its axis."""
    m = _manifold()
    a = rng.uniform(0.3, 1.0, 3)
    e1, e2 = rng.uniform(0.2, 2.5, 2)
    taper = rng.uniform(-0.5, 0.5, 2)

    def warp(points):
        p = np.asarray(points, dtype=np.float64)
        f = (np.abs(p[:, 0] / a[0]) ** (2 / e2) + np.abs(p[:, 1] / a[1]) ** (2 / e2)) ** (e2 / e1) \
            + np.abs(p[:, 2] / a[2]) ** (2 / e1)
        q = p * f[:, None] ** (-e1 / 2)  # the surface point on each ray from the centre
        q[:, :2] *= 1.0 + taper * (q[:, 2:] / a[2])
        return q

    return m.Manifold.sphere(1.0, 64).warp_batch(warp)


def drilled_block(rng):
    """A box or a cylinder with round holes drilled through it and blind pockets cut into it, as
    machined parts, holders and cases."""
    size = rng.uniform(0.4, 1.0, 3)
    if rng.random() < 0.5:
        shape = _cube(size)
    else:
        size[1] = size[0]
        shape = _cylinder(size[2], size[0] / 2, int(rng.integers(24, 48)))
    for _ in range(int(rng.integers(1, 5))):
        axis = int(rng.integers(3))
        others = [i for i in range(3) if i != axis]
        centre = np.zeros(3)
        centre[others] = rng.uniform(-0.25, 0.25, 2) * size[others]
        if rng.random() < 0.5:  # a hole through, at most a third of the narrower side across
            cut = _cylinder(2.0, rng.uniform(0.05, 0.17) * size[others].min(), 24)
            cut = cut.rotate([[0, 90, 0], [90, 0, 0], [0, 0, 0]][axis])
        else:  # a pocket into one face, at most 60% deep
            extent = np.zeros(3)
            extent[others] = rng.uniform(0.15, 0.45, 2) * size[others]
            depth = rng.uniform(0.2, 0.6) * size[axis]
            extent[axis] = 2 * depth
            centre[axis] = rng.choice([-1.0, 1.0]) * size[axis] / 2
            cut = _cube(extent)
        shape = shape - cut.translate(list(centre))
    return shape


def extruded_outline(rng):
    """A random star-shaped outline (5-12 corners) extruded with a random twist and a scaled top."""
    n = int(rng.integers(5, 13))
    angles = np.sort(rng.uniform(0, 2 * np.pi, n))
    radii = rng.uniform(0.4, 1.0, n)
    outline = np.stack([radii * np.cos(angles), radii * np.sin(angles)], 1)
    return _polygon(outline).extrude(rng.uniform(0.2, 1.0), 8, rng.uniform(0.0, 90.0), list(rng.uniform(0.5, 1.2, 2)))


def thin(rng):
    """Flat and slender things (sheets, plates, blades, washers, bent sheet, sticks): one side 1:20
    to 1:80 of the longest, or a stick 1:15 to 1:40 across; what the other families never are."""
    m = _manifold()
    kind = int(rng.integers(5))
    t = rng.uniform(1 / 80, 1 / 20)  # thickness, of a longest side of about 1
    if kind == 0:  # a plate or sheet: a rounded random outline
        n = int(rng.integers(4, 10))
        angles = np.sort(rng.uniform(0, 2 * np.pi, n))
        outline = np.stack([np.cos(angles), rng.uniform(0.3, 1.0) * np.sin(angles)], 1) * 0.5
        return _polygon(outline).offset(0.05, m.JoinType.Round).extrude(t)
    if kind == 1:  # a blade: long, tapered to a tip, with a handle block
        w = rng.uniform(0.08, 0.2)
        blade = _extrude([(0, 0), (0.7, 0), (1.0, w * 0.2), (0.7, w), (0, w)], t)
        handle = _cube([0.35, w * 1.1, t * rng.uniform(1.5, 3.0)], center=False).translate([-0.3, -w * 0.05, 0])
        return blade + handle
    if kind == 2:  # a washer or thin disc with holes
        disc = _cylinder(t, 0.5, 48)
        return disc - _cylinder(1.0, rng.uniform(0.1, 0.3), 32)
    if kind == 3:  # bent sheet: an angle or channel of thin wall
        a, b = rng.uniform(0.5, 1.0), rng.uniform(0.3, 0.8)
        return _extrude([(0, 0), (a, 0), (a, t), (t, t), (t, b), (0, b)], rng.uniform(0.3, 1.0))
    # a stick: a rod, straight or with a bend
    r = rng.uniform(1 / 80, 1 / 30)
    stick = _cylinder(1.0, r, 16, center=False)
    if rng.random() < 0.5:
        return stick
    return stick + _cylinder(0.4, r, 16, center=False).rotate([0.0, float(rng.uniform(30, 90)), 0.0])


_DEFAULT = (bowl, cup, mug, tray, open_box, ring, l_bracket, t_bracket, u_bracket, hook, star_prism, gear_prism, comb,
            random_union, egad_like, thin)
_WIDER = (vessel, superquadric, drilled_block, extruded_outline)
FAMILIES: dict[str, Callable] = {f.__name__: f for f in _DEFAULT + _WIDER}
# What an object set without a family list holds (every data config's).
DEFAULT_FAMILIES: tuple[str, ...] = tuple(f.__name__ for f in _DEFAULT)


def make_object(family: str, seed: int, size_range=SIZE_RANGE_M) -> tuple[np.ndarray, np.ndarray]:
    """One object of `family` from `seed`: (vertices (V, 3) float64 m, faces (F, 3) int64),
    watertight, largest AABB side in `size_range`, centred on its AABB centre."""
    if family not in FAMILIES:
        raise ValueError(f"family: unknown family {family!r}; expected one of {sorted(FAMILIES)}")
    rng = np.random.default_rng(seed)
    solid = FAMILIES[family](rng)
    box = np.asarray(solid.bounding_box()).reshape(2, 3)
    extent = float((box[1] - box[0]).max())
    size = rng.uniform(*size_range)
    solid = solid.translate(list(-(box[0] + box[1]) / 2)).scale([size / extent] * 3)
    # Long thin triangles from extrusions become many well-shaped ones.
    length = size / 12
    while solid.num_tri() < TRIANGLE_RANGE[0]:
        solid = solid.refine_to_length(length)
        length /= 1.5
    if solid.num_tri() > TRIANGLE_RANGE[1]:
        solid = solid.simplify(length * 0.02)
    mesh = solid.to_mesh()
    vertices = np.asarray(mesh.vert_properties, dtype=np.float64)[:, :3]
    faces = np.asarray(mesh.tri_verts, dtype=np.int64)
    lo, hi = vertices.min(0), vertices.max(0)
    return vertices - (lo + hi) / 2, faces
