"""LightningModule around a collision network: it only orchestrates loss, metrics and optimiser.

Loss (LOCC §III-A): BCE(logits, labels) + α · mean ‖f_SE‖² over the batch's embeddings, with an
optional SceneCollisionNet-style hard-negative weighting of the hardest fraction of queries, plus,
for a LOCC with `distance_head`, β · smooth-L1 between its second output and the stored signed
distance clamped to ±`distance_clamp` and divided by it (a target in [-1, 1] that is most
detailed where the label flips).
Metrics on validation: accuracy, TPR (recall), TNR, precision, F1, AP and expected calibration
error. On every test split of the datamodule (`test_splits`): `collision_report` (balanced accuracy
first, and accuracy per band of true signed distance), kept in `test_reports` and logged flat.
"""

from collections.abc import Callable

import lightning as L
import torch
import torch.nn.functional as F
from torchmetrics import MetricCollection
from torchmetrics.classification import (
    BinaryAccuracy,
    BinaryAveragePrecision,
    BinaryCalibrationError,
    BinaryF1Score,
    BinaryPrecision,
    BinaryRecall,
    BinarySpecificity,
)

from contactnet.models.collision_nets import CollisionNet
from contactnet.models.encoder import ShapeEmbedding
from contactnet.training.metrics import collision_report, flat_metrics


def group_logits(net: CollisionNet, batch: dict, with_distance: bool = False):
    """Logits (B, G) for a batch of object-pair groups (each cloud encoded once), the mean squared
    embedding (the ‖f_SE‖² regulariser) and, with_distance, the distance head's (B, G) (else None)."""
    emb_a = net.encode(batch["points_a"], batch["normals_a"], batch["aabb_a"])
    emb_b = net.encode(batch["points_b"], batch["normals_b"], batch["aabb_b"])
    args = (emb_a.map(lambda x: x[:, None]), emb_b.map(lambda x: x[:, None]), batch["poses_a"], batch["poses_b"])
    penalty = 0.5 * (emb_a.features.pow(2).mean() + emb_b.features.pow(2).mean())
    if with_distance:
        logits, distance = net.predict(*args, with_distance=True)
        return logits, penalty, distance
    return net.predict(*args), penalty, None


def collision_metrics(prefix: str = "") -> MetricCollection:
    return MetricCollection({
        "acc": BinaryAccuracy(), "tpr": BinaryRecall(), "tnr": BinarySpecificity(),
        "precision": BinaryPrecision(), "f1": BinaryF1Score(), "ap": BinaryAveragePrecision(),
        "ece": BinaryCalibrationError(n_bins=10),
    }, prefix=prefix)


class CollisionModule(L.LightningModule):
    def __init__(self, net: CollisionNet, optimizer: Callable, alpha: float = 0.5,
                 hard_negative_fraction: float = 0.0, net_config: dict | None = None,
                 scheduler: Callable | None = None, beta: float = 1.0, distance_clamp: float = 0.02,
                 scheduler_interval: str = "epoch"):
        """optimizer: params -> torch optimiser; scheduler (optional): optimiser -> an LR scheduler
        stepped once per epoch, or once per optimiser step with scheduler_interval="step" (runs too
        short for several epochs); beta, distance_clamp (metres): the distance head's loss (used only
        when the net has one)."""
        super().__init__()
        self.beta, self.distance_clamp = float(beta), float(distance_clamp)
        self.net = net
        self.optimizer_factory = optimizer
        self.scheduler_factory = scheduler
        if scheduler_interval not in ("epoch", "step"):
            raise ValueError(f"scheduler_interval: expected 'epoch' or 'step', got {scheduler_interval!r}")
        self.scheduler_interval = scheduler_interval
        self.alpha = alpha
        self.hard_negative_fraction = hard_negative_fraction
        # A plain-dict description of `net` so checkpoints load without unpickling code.
        self.net_config = net_config
        self.val_metrics = collision_metrics("val/")
        self._test_outputs: dict[int, list[torch.Tensor]] = {}
        self.test_reports: dict[str, dict] = {}

    def forward_batch(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(logits, embedding penalty, distance head output or None)."""
        return group_logits(self.net, batch, with_distance=getattr(self.net, "distance_head", False))

    def _loss(self, logits, batch, penalty, distance=None):
        bce = F.binary_cross_entropy_with_logits(logits, batch["label"], reduction="none").flatten()
        if self.hard_negative_fraction > 0:
            # SceneCollisionNet's hard mining: average only the hardest fraction of queries.
            k = max(1, int(self.hard_negative_fraction * bce.numel()))
            bce = bce.topk(k).values
        loss = bce.mean() + self.alpha * penalty
        if distance is not None:
            c = self.distance_clamp
            target = batch["signed_distance"].clamp(-c, c) / c
            loss = loss + self.beta * F.smooth_l1_loss(distance, target, beta=0.1)
        return loss

    def training_step(self, batch, batch_idx):
        logits, penalty, distance = self.forward_batch(batch)
        loss = self._loss(logits, batch, penalty, distance)
        self.log("train/loss", loss, prog_bar=True, batch_size=logits.numel())
        return loss

    def validation_step(self, batch, batch_idx):
        logits, penalty, distance = self.forward_batch(batch)
        self.log("val/loss", self._loss(logits, batch, penalty, distance), batch_size=logits.numel())
        self.val_metrics.update(torch.sigmoid(logits).flatten(), batch["label"].flatten().long())

    def on_validation_epoch_end(self):
        self.log_dict(self.val_metrics.compute(), prog_bar=False)
        self.val_metrics.reset()

    def on_test_epoch_start(self):
        self._test_outputs = {}

    def test_step(self, batch, batch_idx, dataloader_idx: int = 0):
        logits, _, _ = self.forward_batch(batch)
        rows = torch.stack([torch.sigmoid(logits).flatten(), batch["label"].flatten(),
                            batch["signed_distance"].flatten()], 1)
        self._test_outputs.setdefault(dataloader_idx, []).append(rows.float())

    def on_test_epoch_end(self):
        names = self.trainer.datamodule.test_splits
        self.test_reports = {}
        for index, chunks in sorted(self._test_outputs.items()):
            rows = torch.cat(chunks)
            if self.trainer.world_size > 1:  # every rank reports on all rows
                rows = self.all_gather(rows).flatten(0, 1)
            self.test_reports[names[index]] = collision_report(rows[:, 0], rows[:, 1] > 0.5, rows[:, 2])
        self.log_dict({k: v for k, v in flat_metrics(self.test_reports).items() if v == v}, add_dataloader_idx=False,
                      sync_dist=False, rank_zero_only=True)
        self._test_outputs = {}

    def configure_optimizers(self):
        optimizer = self.optimizer_factory(self.parameters())
        if self.scheduler_factory is None:
            return optimizer
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": self.scheduler_factory(optimizer),
                                                       "interval": self.scheduler_interval}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["contactnet_net_config"] = self.net_config
