"""The IR: typed expressions, the loop IR, affine forms, visitor/mutator, printer."""
from .affine import Affine, to_affine
from .expr import BinOp, Buffer, Call, Cast, Const, Expr, Load, Select, UnOp, Var
from .stmt import Alloc, Block, Comment, Evaluate, For, Function, If, Stmt, Store, block
from .types import ScalarType
from .visitor import Mutator, Visitor, free_vars, substitute

__all__ = ["Affine", "to_affine", "BinOp", "Buffer", "Call", "Cast", "Const", "Expr", "Load", "Select",
           "UnOp", "Var", "Alloc", "Block", "Comment", "Evaluate", "For", "Function", "If", "Stmt",
           "Store", "block", "ScalarType", "Mutator", "Visitor", "free_vars", "substitute"]
