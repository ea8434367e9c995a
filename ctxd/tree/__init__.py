"""The session tree: an index of parents, children and inherited state over a session file."""

from ctxd.tree.index import NONE, TreeIndex

__all__ = ["NONE", "TreeIndex"]
