"""Load a trained collision network from a checkpoint without unpickling code.

Checkpoints written by training carry the network's configuration as plain data
(`contactnet_net_config`: nested dicts with `_target_` class names). Loading reads the file with
`torch.load(weights_only=True)` (tensors and plain containers only) and builds the network from
an allow-list of contactnet classes, so a malicious file cannot run anything. Training's own
reads of checkpoints (resuming with `ckpt_path`, testing the best one) pass `weights_only=True` to
Lightning, which hands it to the same restricted `torch.load` (`contactnet.training.train`).
"""

import math
import pickle
from pathlib import Path

import torch

from contactnet.models.collision_nets import LOCC, CollisionNet, GlobalOCN
from contactnet.models.encoder import ShapeEncoder

# The hybrid thresholds training chose on its validation split (`calibrate_checkpoint`): a dict
# {"split", "data_root", "taus": [{"frames", "max_error", "tau", "deferred", ...}, ...]}.
HYBRID_TAU_KEY = "contactnet_hybrid_tau"

ALLOWED = {
    "contactnet.models.LOCC": LOCC,
    "contactnet.models.GlobalOCN": GlobalOCN,
    "contactnet.models.ShapeEncoder": ShapeEncoder,
}


def build_net(config: dict) -> torch.nn.Module:
    """Instantiate a `_target_` config whose targets are all in ALLOWED."""
    target = config.get("_target_")
    if target not in ALLOWED:
        raise ValueError(f"checkpoint: network class {target!r} is not one of {sorted(ALLOWED)}")
    kwargs = {k: build_net(v) if isinstance(v, dict) else v for k, v in config.items() if k != "_target_"}
    return ALLOWED[target](**kwargs)


def read_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """The contents of a checkpoint file, unpickled with `weights_only=True`: a file holding
    anything but tensors and plain containers (a pickled callable, a class) is refused unread."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise ValueError(f"path: {path} holds objects other than tensors and plain containers; "
                         f"refusing to unpickle it ({error})") from error


def load_model(path: str | Path, map_location: str | torch.device = "cpu",
               containment: bool | None = None) -> CollisionNet:
    """The trained network of a training checkpoint, in eval mode, on `map_location`.
    containment: switch the net's parameter-free containment test on or off (None: as trained;
    checkpoints from before the test have it off)."""
    checkpoint = read_checkpoint(path, map_location)
    config = checkpoint.get("contactnet_net_config")
    if not isinstance(config, dict):
        raise ValueError(f"path: {path} is not a contactnet training checkpoint (no network config)")
    if containment is not None:
        config = {**config, "containment": bool(containment)}
    net = build_net(config)
    state = {k.removeprefix("net."): v for k, v in checkpoint["state_dict"].items() if k.startswith("net.")}
    net.load_state_dict(state)  # copies into the new net's CPU parameters: move them after
    return net.to(map_location).eval()


def stored_tau(path: str | Path, max_error: float = 0.0, frames: int = 1) -> float:
    """The certified hybrid's threshold tau that training chose for this checkpoint on its
    validation split (`contactnet.training.evaluate.calibrate_checkpoint`), for a target error
    `max_error` on that split (0: none of its queries wrong) with logits averaged over `frames`
    test-time frames; > 0, as `CollisionChecker(..., "hybrid", tau=...)` takes it."""
    calibration = read_checkpoint(path).get(HYBRID_TAU_KEY)
    if not isinstance(calibration, dict):
        raise ValueError(f"path: {path} holds no hybrid threshold (trained before training chose one); choose it "
                         f"with contactnet.training.evaluate.calibrate_checkpoint, or pass tau")
    taus = calibration["taus"]
    for entry in taus:
        if entry["frames"] == frames and math.isclose(entry["max_error"], max_error, abs_tol=1e-12):
            # 0: every "collide" verdict of the validation split was right; the checker takes tau > 0.
            return max(float(entry["tau"]), 1e-6)
    have = ", ".join(f"(max_error={e['max_error']}, frames={e['frames']})" for e in taus)
    raise ValueError(f"max_error, frames: {path} holds hybrid thresholds for {have}; got (max_error={max_error}, "
                     f"frames={frames}) (calibrate_checkpoint chooses more)")
