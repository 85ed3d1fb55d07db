"""Batched torch-side stepper: affine bodies with IPC contact, smooth friction and CCD.

Build a `Scene` per environment, hand one (replicated) or a list to a `Stepper`, call `step()`.
"""

from contactnet.sim.scene import Body, Scene, box_mesh
from contactnet.sim.stepper import CandidateOverflow, StepInfo, StepNotConverged, Stepper

__all__ = ["Body", "CandidateOverflow", "Scene", "StepInfo", "StepNotConverged", "Stepper", "box_mesh"]
