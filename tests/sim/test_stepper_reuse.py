"""What a step reuses from the one before: the pairs within d̂ that `_finish` found, only while q
is unchanged; a state changed between steps (reset, edited in place, replaced) is searched afresh."""

import pytest
import torch

from contactnet.sim import Scene, Stepper, box_mesh

CUBE = box_mesh((0.05, 0.05, 0.05), name="cube")


def falling_cube():
    scene = Scene()
    scene.add_ground()
    scene.add_body(CUBE, pose=[0, 0, 0.04, 1, 0, 0, 0])
    return scene


def fresh_step(sim: Stepper) -> Stepper:
    """A new stepper set to sim's state (nothing to reuse), stepped once."""
    other = Stepper(falling_cube(), dt=sim.dt, kappa=sim.kappa)
    other.q, other.qdot, other.time = sim.q.clone(), sim.qdot.clone(), sim.time.clone()
    other.step()
    return other


@pytest.mark.parametrize("change", ["in_place", "replaced", "reset"])
def test_a_state_changed_between_steps_is_searched_afresh(change):
    sim = Stepper(falling_cube(), dt=0.01)
    for _ in range(3):
        sim.step()  # free fall: no pair within d̂ at the end of these steps
    if change == "in_place":  # put the cube 0.3 mm above the ground, inside d̂
        sim.q[0, 1, 2] = 0.0253
    elif change == "replaced":
        q = sim.q.clone()
        q[0, 1, 2] = 0.0253
        sim.q = q
    else:
        sim.reset()
        sim.q[0, 1, 2] = 0.0253
    other = fresh_step(sim)
    info = sim.step()
    assert int(info.contacts.sum()) > 0
    assert torch.equal(sim.q, other.q) and torch.equal(sim.contact_forces, other.contact_forces)


def test_an_unchanged_state_reuses_the_last_search_and_steps_the_same():
    sim = Stepper(falling_cube(), dt=0.01)
    for _ in range(8):
        sim.step()
    other = fresh_step(sim)
    calls = []
    search = sim._mode.search
    sim._mode.search = lambda *args: calls.append(args[2] is None) or search(*args)
    sim.step()
    assert calls[0] is False  # the step's first search is a swept one: the start's was reused
    assert torch.equal(sim.q, other.q) and torch.equal(sim.contact_forces, other.contact_forces)


def test_a_step_that_starts_converged_evaluates_no_energy(monkeypatch):
    """A body at rest: the first Newton check passes, so the start energy (needed only by a line
    search) is never evaluated; a step that moves evaluates it once, at the start's pairs, and the
    trajectory is the one of an eager evaluation, bit for bit."""
    from contactnet.sim import modes, potential

    real = potential.energy

    def run(eager: bool):
        """The stepper after 60 steps, each step's Newton iterations and energy evaluations
        (eager: the start energy always, as the fixed-iteration mode does)."""
        if eager:
            monkeypatch.setattr(modes.Adaptive, "needs_start_energy", True)
        count = 0

        def counted(*args):
            nonlocal count
            count += 1
            return real(*args)

        monkeypatch.setattr(potential, "energy", counted)
        sim = Stepper(falling_cube(), dt=0.01)
        iterations, energies = [], []
        for _ in range(60):
            before = count
            iterations.append(sim.step().iterations)
            energies.append(count - before)
        return sim, iterations, energies

    lazy, its, energies = run(False)
    eager, its_eager, _ = run(True)
    assert its == its_eager and torch.equal(lazy.q, eager.q) and torch.equal(lazy.qdot, eager.qdot)
    assert 0 in its and its[0] > 0  # it lands, then rests
    # Energies per step: one per line-search trial, plus the start's where Newton moved.
    assert all(n == 0 for n, k in zip(energies, its) if k == 0)
    assert all(n >= 2 for n, k in zip(energies, its) if k > 0)


def test_a_step_where_nothing_moved_ends_with_the_pairs_it_started_with():
    """A body at rest: a step whose first Newton check passes everywhere ends where it started,
    so its end pairs are the start's (not searched again), and they are the pairs a search there
    finds."""
    sim = Stepper(falling_cube(), dt=0.01)
    searches = []
    search = sim._mode.search
    sim._mode.search = lambda *args: searches.append(args[2] is None) or search(*args)
    rested = 0
    for _ in range(60):
        before = len(searches)
        if sim.step().iterations == 0:
            rested += 1
            assert len(searches) == before  # neither a swept search nor the end's
            x, q, cand = sim._end_contacts[2], sim._end_contacts[0], sim._end_contacts[3]
            again = search(sim.packed, x, None, sim.dhat, q)
            assert cand.count > 0 and all(torch.equal(a, b) for a, b in zip(cand, again))
    assert rested > 10


def test_contact_forces_are_computed_when_read():
    """An adaptive step leaves the forces to the first read: reading them every step or only at the
    end gives the same bits, and those of the op on the step's end state; a tensor a user assigns
    is kept; reset zeroes them. A fixed-iteration step writes them into the same tensor in place."""
    runs = []
    for read_every_step in (True, False):
        sim = Stepper(falling_cube(), dt=0.01, mu=0.4)
        for _ in range(12):
            sim.step()
            if read_every_step:
                sim.contact_forces
        runs.append(sim)
    forces = runs[1].contact_forces
    assert torch.equal(runs[0].contact_forces, forces) and float(forces[0, 1, 2]) > 0  # the ground pushes up
    assert runs[1]._pending_forces is None and runs[1].contact_forces is forces  # computed once
    sim = runs[1]
    sim.step()
    x_end, cand = sim._end_contacts[2], sim._end_contacts[3]
    assert torch.equal(sim._pending_forces[0], x_end) and sim._pending_forces[2] is cand
    mine = torch.full_like(forces, 7.0)
    sim.contact_forces = mine
    assert sim.contact_forces is mine and sim._pending_forces is None
    sim.step()
    sim.reset()
    assert not sim.contact_forces.any()
    fixed = Stepper(falling_cube(), dt=0.01, mu=0.4, fixed_iterations=8)
    tensor = fixed.contact_forces
    for _ in range(12):
        fixed.step()
    assert fixed._pending_forces is None and fixed.contact_forces is tensor and float(tensor[0, 1, 2]) > 0
