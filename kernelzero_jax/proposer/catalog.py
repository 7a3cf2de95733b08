"""The Proposer's vocabulary: torch APIs, how to call them, and how to find them in code.

Each `Api` names one operation the way the Proposer's prompt names it ("conv2d", "gelu",
"sum"), gives a call a module may write and the constraints its arguments must meet, and lists
the spellings by which code uses it:
  functions  canonical dotted names of functional forms ("torch.nn.functional.gelu")
  modules    nn.Module classes whose instance computes it ("torch.nn.GELU")
  methods    Tensor method names ("gelu" in `x.gelu()`)
  operators  Python operators ("@" for matmul, "+" for add)
The catalog spans what KernelBench levels 1 and 2 exercise (matmuls, convolutions and transposed
convolutions, pooling, normalisations, activations, reductions, losses, elementwise and shape
ops); it is written from torch's API, never read from KernelBench, which is the test set.

`apis_used(source)` reads which catalog APIs a piece of code uses, from its syntax tree (never
by running it): through any import alias, as a function, a module built in `__init__` and called
in `forward`, a method or an operator. Module validation uses `forward_apis` (what a module's
`forward` really computes with); co-occurrence mining uses `apis_used` per class.
Pure Python: no torch here.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Iterable

from kernelzero_jax.teacher.ast_utils import canonical, import_aliases

CATEGORIES = ("matmul", "conv", "conv_transpose", "pool", "norm", "activation", "reduction",
              "loss", "elementwise", "shape")

_F = "torch.nn.functional."
_NN = "torch.nn."


@dataclasses.dataclass(frozen=True)
class Api:
  name: str
  category: str
  call: str                        # how a module may call it
  constraints: str = ""            # what its arguments must satisfy
  functions: tuple[str, ...] = ()
  modules: tuple[str, ...] = ()
  methods: tuple[str, ...] = ()
  operators: tuple[str, ...] = ()

  def __post_init__(self):
    if self.category not in CATEGORIES:
      raise ValueError(f"api {self.name}: unknown category {self.category!r}")
    if not (self.functions or self.modules or self.methods or self.operators):
      raise ValueError(f"api {self.name}: no spelling to find it by")


def _act(name: str, module: str, *, call: str = "", constraints: str = "",
         torch_fn: bool = True, method: bool = True, extra: tuple[str, ...] = ()) -> Api:
  functions = (_F + name,) + (("torch." + name,) if torch_fn else ()) + extra
  return Api(name, "activation", call or f"F.{name}(x)", constraints, functions=functions,
             modules=(_NN + module,), methods=(name,) if method else ())


def _conv(dims: int, transpose: bool) -> Api:
  kind = "conv_transpose" if transpose else "conv"
  name = f"{kind}{dims}d"
  cls = f"ConvTranspose{dims}d" if transpose else f"Conv{dims}d"
  spatial = {1: "L", 2: "H, W", 3: "D, H, W"}[dims]
  return Api(name, kind, f"nn.{cls}(in_channels, out_channels, kernel_size, stride=1, padding=0)",
             f"input (N, in_channels, {spatial}); kernel_size no larger than the padded input",
             functions=(f"{_F}{name}", f"torch.{name}"), modules=(_NN + cls,))


def _pool(kind: str, dims: int) -> Api:
  name = f"{kind}_pool{dims}d"
  cls = {"max": "MaxPool", "avg": "AvgPool"}[kind] + f"{dims}d"
  return Api(name, "pool", f"nn.{cls}(kernel_size, stride=None, padding=0)",
             f"input (N, C, {'L' if dims == 1 else 'spatial dims'}); padding <= kernel_size / 2",
             functions=(f"{_F}{name}", f"torch.{name}"), modules=(_NN + cls,))


def _reduction(name: str, constraints: str = "dim within the input's rank",
               functions: tuple[str, ...] = ()) -> Api:
  return Api(name, "reduction", f"torch.{name}(x, dim=1)", constraints,
             functions=(f"torch.{name}",) + functions, methods=(name,))


def _loss(name: str, cls: str, constraints: str) -> Api:
  return Api(name, "loss", f"F.{name}(predictions, targets)", constraints,
             functions=(_F + name,), modules=(_NN + cls,))


def _elementwise(name: str, operators: tuple[str, ...] = (), methods: tuple[str, ...] = (),
                 functions: tuple[str, ...] = (), call: str = "") -> Api:
  return Api(name, "elementwise", call or f"torch.{name}(x)", "shapes that broadcast",
             functions=(f"torch.{name}",) + functions, methods=methods or (name,),
             operators=operators)


CATALOG: tuple[Api, ...] = (
    # matmul
    Api("matmul", "matmul", "torch.matmul(a, b)", "a (..., M, K), b (..., K, N)",
        functions=("torch.matmul", "torch.mm"), methods=("matmul", "mm"), operators=("@",)),
    Api("bmm", "matmul", "torch.bmm(a, b)", "a (B, M, K), b (B, K, N)",
        functions=("torch.bmm", "torch.baddbmm"), methods=("bmm",)),
    Api("linear", "matmul", "nn.Linear(in_features, out_features)", "input (..., in_features)",
        functions=(_F + "linear", "torch.addmm"), modules=(_NN + "Linear",)),
    Api("einsum", "matmul", "torch.einsum('bij,bjk->bik', a, b)", "operands match the equation",
        functions=("torch.einsum",)),
    # convolutions
    *(_conv(d, t) for t in (False, True) for d in (1, 2, 3)),
    # pooling
    *(_pool(k, d) for k in ("max", "avg") for d in (1, 2, 3)),
    Api("adaptive_avg_pool2d", "pool", "nn.AdaptiveAvgPool2d(output_size)", "input (N, C, H, W)",
        functions=(_F + "adaptive_avg_pool2d", _F + "adaptive_avg_pool1d",
                   _F + "adaptive_avg_pool3d"),
        modules=(_NN + "AdaptiveAvgPool2d", _NN + "AdaptiveAvgPool1d",
                 _NN + "AdaptiveAvgPool3d")),
    Api("adaptive_max_pool2d", "pool", "nn.AdaptiveMaxPool2d(output_size)", "input (N, C, H, W)",
        functions=(_F + "adaptive_max_pool2d", _F + "adaptive_max_pool1d"),
        modules=(_NN + "AdaptiveMaxPool2d", _NN + "AdaptiveMaxPool1d")),
    # normalisations
    Api("batch_norm", "norm", "nn.BatchNorm2d(num_features)", "input (N, num_features, ...)",
        functions=(_F + "batch_norm",),
        modules=(_NN + "BatchNorm1d", _NN + "BatchNorm2d", _NN + "BatchNorm3d")),
    Api("layer_norm", "norm", "nn.LayerNorm(normalized_shape)",
        "normalized_shape equals the input's trailing dims", functions=(_F + "layer_norm",),
        modules=(_NN + "LayerNorm",)),
    Api("group_norm", "norm", "nn.GroupNorm(num_groups, num_channels)",
        "num_channels divisible by num_groups", functions=(_F + "group_norm",),
        modules=(_NN + "GroupNorm",)),
    Api("instance_norm", "norm", "nn.InstanceNorm2d(num_features)", "input (N, C, ...)",
        functions=(_F + "instance_norm",),
        modules=(_NN + "InstanceNorm1d", _NN + "InstanceNorm2d", _NN + "InstanceNorm3d")),
    Api("rms_norm", "norm", "nn.RMSNorm(normalized_shape)",
        "normalized_shape equals the input's trailing dims", functions=(_F + "rms_norm",),
        modules=(_NN + "RMSNorm",)),
    Api("normalize", "norm", "F.normalize(x, p=2, dim=1)", "dim within the input's rank",
        functions=(_F + "normalize",)),
    # activations
    _act("relu", "ReLU"),
    _act("leaky_relu", "LeakyReLU", call="F.leaky_relu(x, negative_slope=0.01)", torch_fn=False,
         method=False),
    _act("gelu", "GELU", torch_fn=False),
    _act("silu", "SiLU", torch_fn=False, method=False),
    _act("sigmoid", "Sigmoid"),
    _act("tanh", "Tanh"),
    _act("softplus", "Softplus", torch_fn=False, method=False),
    _act("elu", "ELU", torch_fn=False, method=False),
    _act("selu", "SELU"),
    _act("hardtanh", "Hardtanh", call="F.hardtanh(x, min_val=-1.0, max_val=1.0)",
         torch_fn=False, method=False),
    _act("hardsigmoid", "Hardsigmoid", torch_fn=False, method=False),
    _act("hardswish", "Hardswish", torch_fn=False, method=False),
    _act("mish", "Mish", torch_fn=False, method=False),
    _act("softsign", "Softsign", torch_fn=False, method=False),
    _act("relu6", "ReLU6", torch_fn=False, method=False),
    _act("softmax", "Softmax", call="torch.softmax(x, dim=1)", constraints="dim within rank"),
    _act("log_softmax", "LogSoftmax", call="torch.log_softmax(x, dim=1)",
         constraints="dim within rank"),
    Api("dropout", "activation", "nn.Dropout(p)", "0 <= p < 1; the module must be in eval mode "
        "or p = 0 for a deterministic output", functions=(_F + "dropout", "torch.dropout"),
        modules=(_NN + "Dropout",)),
    # reductions
    _reduction("sum"), _reduction("mean"), _reduction("max"), _reduction("min"),
    _reduction("amax"), _reduction("amin"), _reduction("argmax"), _reduction("argmin"),
    _reduction("prod"), _reduction("logsumexp"), _reduction("cumsum"), _reduction("cumprod"),
    _reduction("var"), _reduction("std"),
    _reduction("norm", "p and dim valid for the input", functions=("torch.linalg.norm",
                                                                    "torch.linalg.vector_norm")),
    # losses
    _loss("mse_loss", "MSELoss", "predictions and targets of one shape"),
    _loss("cross_entropy", "CrossEntropyLoss", "logits (N, C), integer targets in [0, C)"),
    _loss("smooth_l1_loss", "SmoothL1Loss", "predictions and targets of one shape"),
    _loss("huber_loss", "HuberLoss", "predictions and targets of one shape"),
    _loss("kl_div", "KLDivLoss", "log-probabilities and probabilities of one shape"),
    _loss("triplet_margin_loss", "TripletMarginLoss", "anchor, positive, negative of one shape"),
    _loss("binary_cross_entropy_with_logits", "BCEWithLogitsLoss",
          "logits and targets in [0, 1] of one shape"),
    _loss("hinge_embedding_loss", "HingeEmbeddingLoss", "targets in {-1, 1}"),
    Api("cosine_similarity", "loss", "F.cosine_similarity(a, b, dim=1)", "a and b of one shape",
        functions=(_F + "cosine_similarity", "torch.cosine_similarity"),
        modules=(_NN + "CosineSimilarity",)),
    # elementwise
    _elementwise("add", ("+",)), _elementwise("sub", ("-",), functions=("torch.subtract",)),
    _elementwise("mul", ("*",), functions=("torch.multiply",)),
    _elementwise("div", ("/",), functions=("torch.divide", "torch.true_divide")),
    _elementwise("exp"), _elementwise("log"), _elementwise("sqrt"), _elementwise("rsqrt"),
    _elementwise("abs"), _elementwise("pow", ("**",)),
    _elementwise("clamp", methods=("clamp", "clip"), functions=("torch.clip",),
                 call="torch.clamp(x, min=-1.0, max=1.0)"),
    _elementwise("where", call="torch.where(x > 0, x, y)"),
    _elementwise("maximum"), _elementwise("minimum"),
    # shape
    Api("reshape", "shape", "x.reshape(N, -1)", "the element count is kept",
        functions=("torch.reshape", "torch.flatten"), methods=("reshape", "view", "flatten"),
        modules=(_NN + "Flatten",)),
    Api("transpose", "shape", "x.transpose(1, 2)", "dims within rank",
        functions=("torch.transpose", "torch.permute"), methods=("transpose", "permute", "t")),
    Api("cat", "shape", "torch.cat([a, b], dim=1)", "all dims but `dim` equal",
        functions=("torch.cat", "torch.concat", "torch.concatenate", "torch.stack")),
)

BY_NAME: dict[str, Api] = {api.name: api for api in CATALOG}
if len(BY_NAME) != len(CATALOG):
  raise ValueError("duplicate API names in the catalog")

_BY_FUNCTION = {f: api.name for api in CATALOG for f in api.functions}
_BY_MODULE = {m: api.name for api in CATALOG for m in api.modules}
_BY_METHOD = {m: api.name for api in CATALOG for m in api.methods}
_OPERATOR_NODES = {ast.MatMult: "@", ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
                   ast.Pow: "**"}
_BY_OPERATOR = {o: api.name for api in CATALOG for o in api.operators}


def _call_api(node: ast.Call, aliases: dict[str, str]) -> str | None:
  name = canonical(node.func, aliases)
  if name is not None:
    if name in _BY_FUNCTION:
      return _BY_FUNCTION[name]
    if name in _BY_MODULE:
      return _BY_MODULE[name]
    return None
  if isinstance(node.func, ast.Attribute):
    receiver = node.func.value
    if isinstance(receiver, ast.Name) and receiver.id == "self":
      return None  # self.norm(x) calls a submodule (see attribute_apis), not Tensor.norm
    return _BY_METHOD.get(node.func.attr)
  return None


def _apis_in(nodes: Iterable[ast.AST], aliases: dict[str, str],
             attribute_apis: dict[str, str] | None = None) -> set[str]:
  """Catalog APIs used inside `nodes`; `attribute_apis` maps self.<attr> to the API of the
  module assigned to it, so that calling the attribute counts as using the API."""
  found: set[str] = set()
  for root in nodes:
    for node in ast.walk(root):
      if isinstance(node, ast.Call):
        api = _call_api(node, aliases)
        if (api is None and attribute_apis and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
          api = attribute_apis.get(node.func.attr)
        if api is not None:
          found.add(api)
      elif isinstance(node, (ast.BinOp, ast.AugAssign)):
        symbol = _OPERATOR_NODES.get(type(node.op))
        if symbol in _BY_OPERATOR:
          found.add(_BY_OPERATOR[symbol])
  return found


def apis_used(source: str) -> set[str]:
  """Every catalog API the code uses anywhere (a module built counts as used)."""
  tree = ast.parse(source)
  return _apis_in([tree], import_aliases(tree))


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
  return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}


def attribute_apis(init: ast.FunctionDef, aliases: dict[str, str]) -> dict[str, str]:
  """self.<attr> -> API, for attributes assigned a catalog module in `__init__`."""
  out = {}
  for node in ast.walk(init):
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
      name = canonical(node.value.func, aliases)
      if name not in _BY_MODULE:
        continue
      api = _BY_MODULE[name]
      for target in node.targets:
        if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
            and target.value.id == "self"):
          out[target.attr] = api
  return out


def forward_apis(source: str, class_name: str = "Model") -> set[str]:
  """The catalog APIs that `class_name.forward` computes with: its own calls, methods and
  operators, and the modules it calls through attributes set in `__init__`. A module built but
  never called does not count. Raises ValueError when the class or its forward is missing."""
  tree = ast.parse(source)
  aliases = import_aliases(tree)
  cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name),
             None)
  if cls is None:
    raise ValueError(f"no class {class_name}")
  methods = _methods(cls)
  if "forward" not in methods:
    raise ValueError(f"class {class_name} has no forward")
  attrs = attribute_apis(methods["__init__"], aliases) if "__init__" in methods else {}
  return _apis_in([methods["forward"]], aliases, attrs)


def class_apis(tree: ast.Module) -> list[tuple[str, set[str]]]:
  """(class name, APIs of its __init__ and forward) for every class with a forward method: the
  unit of co-occurrence (what one torch module computes)."""
  aliases = import_aliases(tree)
  out = []
  for node in ast.walk(tree):
    if isinstance(node, ast.ClassDef):
      methods = _methods(node)
      if "forward" in methods:
        attrs = attribute_apis(methods["__init__"], aliases) if "__init__" in methods else {}
        out.append((node.name, _apis_in([methods["forward"]], aliases, attrs)))
  return out
