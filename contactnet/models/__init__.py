"""Collision networks as plain nn.Modules (no Lightning): planners and simulators import these."""

from contactnet.models.checkpoint import load_model
from contactnet.models.collision_nets import LOCC, CollisionNet, GlobalOCN
from contactnet.models.encoder import ShapeEmbedding, ShapeEncoder

__all__ = ["LOCC", "CollisionNet", "GlobalOCN", "ShapeEmbedding", "ShapeEncoder", "load_model"]
