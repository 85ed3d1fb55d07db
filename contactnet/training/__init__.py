"""Training: the LightningModule around a collision network, baselines and checkpoints."""
