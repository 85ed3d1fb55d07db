"""Score a trained network on generated test sets (the work of `python eval.py`)."""

from pathlib import Path

import torch

from contactnet.data.datamodule import PairGroups
from contactnet.data.dataset import finished_test_splits
from contactnet.data.objects import load_object_set
from contactnet.data.storage import atomic_write, write_json_atomic
from contactnet.geometry.frames import frame_quaternions
from contactnet.models import load_model
from contactnet.models.checkpoint import HYBRID_TAU_KEY, read_checkpoint, stored_tau
from contactnet.ops.mesh_query import hulls_separated
from contactnet.planning.hybrid import choose_tau, hybrid_summary
from contactnet.training.metrics import collision_report
from contactnet.training.module import group_logits


@torch.no_grad()
def predict_split(net, data_root: str | Path, split: str, groups_per_batch: int = 16, device: str = "cpu",
                  objects=None, clouds: str = "full", frames: int = 1, completion=None) -> dict[str, torch.Tensor]:
    """Flat logits, exact labels, signed distances and whether the two objects' hulls are
    certainly apart (`hulls_separated`, what the hybrid answers without the network) of every
    query of one split; frames > 1: each logit is the mean over the
    objects' first `frames` test-time frames (`frame_quaternions`, the checker's `frames`);
    completion: a ViewCompletion checkpoint that completes the views of clouds="single_view"."""
    objects = objects if objects is not None else load_object_set(Path(data_root) / "objects")
    out = {"logit": [], "label": [], "signed_distance": [], "separated": []}
    hulls = objects.convex_hulls()
    for frame, q in enumerate(frame_quaternions(frames)):
        # Frame 0 is the objects' own: read as stored, not turned by the identity (the plain scores, bitwise).
        groups = PairGroups(Path(data_root) / split, objects, clouds=clouds, frame=q if frame else None,
                            completion=completion)
        logits = []
        for batch in torch.utils.data.DataLoader(groups, batch_size=groups_per_batch):
            batch = {name: value.to(device) for name, value in batch.items()}
            logits.append(group_logits(net, batch)[0].flatten().cpu())
            if frame == 0:
                out["label"].append(batch["label"].flatten().bool().cpu())
                out["signed_distance"].append(batch["signed_distance"].flatten().cpu())
                poses_a, poses_b = batch["poses_a"].cpu(), batch["poses_b"].cpu()  # (G, P, 7)
                ids_a = batch["ids_a"].cpu()[:, None].expand(poses_a.shape[:2]).reshape(-1)
                ids_b = batch["ids_b"].cpu()[:, None].expand(poses_b.shape[:2]).reshape(-1)
                out["separated"].append(hulls_separated(hulls, ids_a, ids_b, poses_a.reshape(-1, 7),
                                                        poses_b.reshape(-1, 7)))
        out["logit"].append(torch.cat(logits))
    out["logit"] = torch.stack(out["logit"]).mean(0)
    return {name: v if name == "logit" else torch.cat(v) for name, v in out.items()}


def evaluate(ckpt_path: str, data_root: str, splits=None, groups_per_batch: int = 16,
             device: str | None = None, hybrid_max_error: float | None = None,
             tau_root: str | None = None, clouds: str = "full", frames: int = 1,
             completion: str | None = None, containment: bool | None = None) -> dict[str, dict]:
    """{split: collision_report} for each split (default: every test split under `data_root`).

    clouds: "full" surface samples, "single_view": each object as one cached depth view sees it
    (the same views for every model; built once in `<data_root>/objects/partial/` if missing), or
    "two_views": two of them fused; all on the same pairs. The hybrid's tau always comes from full
    clouds.
    completion: a `ViewCompletion` checkpoint (`python -m contactnet.training.completion`) that
    completes every single view first: the visible points and the predicted unseen side.

    frames: score each query by its logit averaged over that many test-time frames of its objects
    (`predict_split`; what `CollisionChecker(frames=...)` does), tau included.

    containment: switch the net's containment test (`contactnet.models.containment`) on or off
    (None: as the checkpoint was trained).

    hybrid_max_error: also report the certified hybrid (`CollisionChecker(..., "hybrid")`) with
    its threshold tau chosen by `choose_tau` on the validation split of `tau_root` (default
    `data_root`) for that target error: each report gains "hybrid" with tau, the fraction of
    queries deferred to the exact check, and the hybrid's accuracy and balanced accuracy. An
    evaluation-only set such as robosuite_real has no validation split: without `tau_root`, the
    tau that training chose on its own and stored in the checkpoint is used (`stored_tau`).
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    net = load_model(ckpt_path, map_location=device, containment=containment)
    objects = load_object_set(Path(data_root) / "objects")
    splits = list(splits) if splits else finished_test_splits(data_root)
    tau = None
    if hybrid_max_error is not None and tau_root is None and not (Path(data_root) / "val").is_dir():
        tau = stored_tau(ckpt_path, hybrid_max_error, frames)  # chosen on the training data's val split
    elif hybrid_max_error is not None:
        root = tau_root or data_root
        val = predict_split(net, root, "val", groups_per_batch, device, objects if root == data_root else None,
                            frames=frames)
        tau = choose_tau(val["logit"], val["label"], hybrid_max_error, val["separated"])
    results = {}
    for split in splits:
        scores = predict_split(net, data_root, split, groups_per_batch, device, objects, clouds, frames, completion)
        results[split] = collision_report(torch.sigmoid(scores["logit"]), scores["label"], scores["signed_distance"])
        results[split]["frames"] = frames
        if tau is not None:
            results[split]["hybrid"] = {"tau": tau, "max_error": hybrid_max_error,
                                        **hybrid_summary(scores["logit"], scores["label"], tau, scores["separated"])}
    return results


def calibrate_checkpoint(ckpt_path: str | Path, data_root: str | Path, frames=(1, 4), max_errors=(0.0, 0.001),
                         groups_per_batch: int = 16, device: str | None = None) -> list[dict]:
    """Choose the certified hybrid's tau (`choose_tau`) on the validation split under `data_root`
    for each number of test-time frames and target error, and store them in the checkpoint (written
    atomically), where `CollisionChecker.from_checkpoint(path, world, backend="hybrid")` and
    `stored_tau` read them. Returns the entries: frames, max_error, tau and the hybrid's summary on
    the validation split (`hybrid_summary`: the share deferred, ...)."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    net = load_model(ckpt_path, map_location=device)
    objects = load_object_set(Path(data_root) / "objects")
    entries = []
    for f in frames:
        val = predict_split(net, data_root, "val", groups_per_batch, device, objects, frames=f)
        for error in max_errors:
            tau = choose_tau(val["logit"], val["label"], error, val["separated"])
            entries.append({"frames": f, "max_error": float(error), "tau": tau,
                            **hybrid_summary(val["logit"], val["label"], tau, val["separated"])})
    checkpoint = read_checkpoint(ckpt_path)
    checkpoint[HYBRID_TAU_KEY] = {"split": "val", "data_root": str(data_root), "taus": entries}
    atomic_write(ckpt_path, lambda tmp: torch.save(checkpoint, tmp))
    return entries


def write_results(results: dict, out: str | Path) -> None:
    write_json_atomic(out, results)
