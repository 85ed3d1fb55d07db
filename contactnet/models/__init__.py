"""Collision networks as plain nn.Modules (no Lightning): planners and simulators import these."""

from contactnet.models.checkpoint import load_model
from contactnet.models.collision_nets import LOCC, CollisionNet, GlobalOCN
from contactnet.models.completion import ViewCompletion, load_view_completion
from contactnet.models.encoder import ShapeEmbedding, ShapeEncoder

__all__ = ["LOCC", "CollisionNet", "GlobalOCN", "ShapeEmbedding", "ShapeEncoder", "ViewCompletion", "load_model",
           "load_view_completion"]
