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
