"""The Triton teacher: writes a ModelNew whose kernels compute a ModuleSpec.

The translation is op by op: each op of the chain has an expression emitter below, and the kernel
around the chain depends on the kind:
  elementwise  one fused kernel over the flattened tensors, FLAT_BLOCK elements per program;
  reduction    one program per row; the whole row in one block when it fits in MAX_ROW_BLOCK,
  softmax      else a loop over the row's columns (softmax: an online max/sum pass, then a
               normalising pass);
  matmul       a tiled tl.dot kernel with bias and the epilogue chain fused into its store.
All values are float32. tl.dot runs with input_precision="ieee": the reference runs with TF32
off, and TF32's 10-bit mantissa would miss atol=rtol=1e-2 on long K. `input_precision` is
accepted by Triton 3.0 and later (the GPU image has 3.6, CI 3.9), where `allow_tf32` is
deprecated. tanh is written with tl.exp because tl.tanh does not exist in Triton's core language.
Pure Python: no torch here.
"""

from __future__ import annotations

from typing import Callable

from kernelzero_jax.teacher import writer_common as wc
from kernelzero_jax.teacher.family import ModuleSpec, Op

FLAT_BLOCK = 1024
MAX_ROW_BLOCK = 4096
# Matmul tiles: the next power of two of the problem's size within [MIN_TILE, max]; tl.dot needs
# at least 16 in each dim, and 64x64x32 float32 tiles keep registers and shared memory in budget.
MIN_TILE, MAX_TILE_MN, MAX_TILE_K = 16, 64, 32


def _num(c: float) -> str:
  return repr(float(c))


def _clamp(v: str, c: tuple[float, ...]) -> str:
  lo, hi = c
  if lo != float("-inf"):
    v = f"tl.maximum({v}, {_num(lo)})"
  if hi != float("inf"):
    v = f"tl.minimum({v}, {_num(hi)})"
  return v


# Unary op -> Triton expression of the op applied to `v` (a float32 block).
UNARY: dict[str, Callable[[str, tuple[float, ...]], str]] = {
    "relu": lambda v, c: f"tl.maximum({v}, 0.0)",
    "gelu": lambda v, c: f"0.5 * {v} * (1.0 + tl.erf({v} * 0.7071067811865476))",
    "gelu_tanh": lambda v, c: (f"0.5 * {v} * (1.0 + tanh_f32(0.7978845608028654 * "
                               f"({v} + 0.044715 * {v} * {v} * {v})))"),
    "silu": lambda v, c: f"{v} * tl.sigmoid({v})",
    "sigmoid": lambda v, c: f"tl.sigmoid({v})",
    "tanh": lambda v, c: f"tanh_f32({v})",
    "exp": lambda v, c: f"tl.exp({v})",
    "abs": lambda v, c: f"tl.abs({v})",
    "neg": lambda v, c: f"-{v}",
    "square": lambda v, c: f"{v} * {v}",
    # log(1 + e^v), and v itself above torch's threshold of 20 (where e^v would only lose bits).
    "softplus": lambda v, c: f"tl.where({v} > 20.0, {v}, tl.log(1.0 + tl.exp({v})))",
    "leaky_relu": lambda v, c: f"tl.where({v} > 0.0, {v}, {v} * {_num(c[0])})",
    "elu": lambda v, c: f"tl.where({v} > 0.0, {v}, {_num(c[0])} * (tl.exp({v}) - 1.0))",
    "hardtanh": _clamp,
    "clamp": _clamp,
    "scale": lambda v, c: f"{v} * {_num(c[0])}",
    "add_const": lambda v, c: f"{v} + {_num(c[0])}",
}
# Binary op -> Triton expression of `v` combined with the loaded operand `o`.
BINARY: dict[str, Callable[[str, str], str]] = {
    "add": lambda v, o: f"{v} + {o}",
    "sub": lambda v, o: f"{v} - {o}",
    "mul": lambda v, o: f"{v} * {o}",
    "maximum": lambda v, o: f"tl.maximum({v}, {o})",
    "minimum": lambda v, o: f"tl.minimum({v}, {o})",
}

_TANH_HELPER = '''@triton.jit
def tanh_f32(x):
    # tanh(x) = sign(x) * (1 - e^(-2|x|)) / (1 + e^(-2|x|)): the exponent is never positive, so
    # it cannot overflow (Triton's core language has no tanh).
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    return tl.where(x >= 0, y, -y)
'''


def emit_ops(ops: tuple[Op, ...], operands: list[wc.Operand], load: Callable[[wc.Operand], str],
             indent: str) -> list[str]:
  """Statements that apply `ops` to the block `v`; `load` gives the expression that loads an
  operand's block at the same positions."""
  lines = []
  for op in ops:
    lines.append(f"{indent}# {wc.op_comment(op)}")
    if op.operand is not None:
      lines.append(f"{indent}v = {BINARY[op.name]('v', load(wc.operand_of(op, operands)))}")
    else:
      lines.append(f"{indent}v = {UNARY[op.name]('v', op.consts)}")
  return lines


def _ptrs(operands: list[wc.Operand]) -> list[str]:
  return [f"{o.arg}_ptr" for o in operands]


def _args(operands: list[wc.Operand]) -> list[str]:
  return [o.arg for o in operands]


def _params(*names: str, operands: list[wc.Operand]) -> str:
  """A launcher's parameter list: its fixed names, then one per operand."""
  return ", ".join(list(names) + [o.arg for o in operands])


def _contiguous(operands: list[wc.Operand], indent: str = "    ") -> list[str]:
  return [f"{indent}{o.arg} = {o.arg}.contiguous()" for o in operands]


# ---- elementwise ---------------------------------------------------------------------------

def _elementwise(spec: ModuleSpec, ops_: list[wc.Operand]) -> tuple[list[str], str]:
  def load(o: wc.Operand) -> str:
    index = "offsets" if o.kind == "input" else "offsets % n_cols"
    return f"tl.load({o.arg}_ptr + {index}, mask=mask, other=0.0)"

  kernel = [
      "@triton.jit",
      *wc.wrap_call("def fused_elementwise_kernel(",
                    ["x_ptr", *_ptrs(ops_), "out_ptr", "n_elements", "n_cols",
                     "BLOCK: tl.constexpr"], "):"),
      "    # One program per BLOCK contiguous elements of the flattened tensors; int64 offsets so",
      "    # that tensors of more than 2^31 elements index correctly.",
      "    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
      "    mask = offsets < n_elements",
      "    v = tl.load(x_ptr + offsets, mask=mask, other=0.0)",
      *emit_ops(spec.pre, ops_, load, "    "),
      "    tl.store(out_ptr + offsets, v, mask=mask)",
  ]
  launcher = [
      f"def fused_elementwise({_params('x', operands=ops_)}):",
      "    # The kernel indexes flat memory, so every tensor it reads must be contiguous.",
      "    x = x.contiguous()",
      *_contiguous(ops_),
      "    out = torch.empty_like(x)",
      "    n_elements = out.numel()",
      f"    # {FLAT_BLOCK} elements per program (8 per thread of 4 warps): enough work per program",
      "    # to hide memory latency, and enough programs to fill the GPU.",
      f"    BLOCK = {FLAT_BLOCK}",
      "    grid = (triton.cdiv(n_elements, BLOCK),)",
      *wc.wrap_call("    fused_elementwise_kernel[grid](",
                    ["x", *_args(ops_), "out", "n_elements", "x.shape[-1]", "BLOCK=BLOCK"]),
      "    return out",
  ]
  return kernel + ["", ""] + launcher, "fused_elementwise"


# ---- row kernels: reductions and softmax ----------------------------------------------------

def _row_load(o: wc.Operand) -> str:
  index = "row * n_cols + cols" if o.kind == "input" else "cols"
  return f"tl.load({o.arg}_ptr + {index}, mask=mask, other=0.0)"


# reduction -> (identity of the combine, elementwise combine, final tl reduction, squares first)
_REDUCTIONS = {
    "sum": ("0.0", "acc + v", "tl.sum", False), "mean": ("0.0", "acc + v", "tl.sum", False),
    "l2norm": ("0.0", "acc + v", "tl.sum", True), "rms": ("0.0", "acc + v", "tl.sum", True),
    "max": ('-float("inf")', "tl.maximum(acc, v)", "tl.max", False),
    "amax": ('-float("inf")', "tl.maximum(acc, v)", "tl.max", False),
    "min": ('float("inf")', "tl.minimum(acc, v)", "tl.min", False),
    "amin": ('float("inf")', "tl.minimum(acc, v)", "tl.min", False),
}
_FINISH = {"mean": "total / n_cols", "l2norm": "tl.sqrt(total)", "rms": "tl.sqrt(total / n_cols)"}


def fits_one_block(n_cols: int) -> bool:
  """Whether a row is processed in one block (held in registers) rather than in a loop."""
  return wc.next_power_of_2(n_cols) <= MAX_ROW_BLOCK


def _row_values(spec: ModuleSpec, ops_: list[wc.Operand], indent: str, cols: str) -> list[str]:
  """Loads the row's values at `cols` into `v` and applies the chain before the core."""
  return [f"{indent}cols = {cols}",
          f"{indent}mask = cols < n_cols",
          f"{indent}v = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)",
          *emit_ops(spec.pre, ops_, _row_load, indent)]


def _reduction_kernel(spec: ModuleSpec, ops_: list[wc.Operand], one_block: bool) -> list[str]:
  identity, combine, final, squares = _REDUCTIONS[spec.core]
  head = [
      "@triton.jit",
      *wc.wrap_call(f"def row_{spec.core}_kernel(",
                    ["x_ptr", *_ptrs(ops_), "out_ptr", "n_cols", "BLOCK: tl.constexpr"], "):"),
      "    # One program per row of n_cols contiguous values.",
      "    row = tl.program_id(0).to(tl.int64)",
  ]
  square = ([f"        # {spec.core} sums squares.", "        v = v * v"] if squares else [])
  if one_block:
    body = [
        "    # The whole row fits in one block (BLOCK >= n_cols): one read, reduced in registers.",
        *_row_values(spec, ops_, "    ", "tl.arange(0, BLOCK)"),
        *[s[4:] for s in square],
        "    # Lanes past the end of the row must not count.",
        f"    v = tl.where(mask, v, {identity})",
        f"    total = {final}(v, axis=0)",
    ]
  else:
    body = [
        "    # The row is longer than one block: each lane accumulates its columns over the loop,",
        "    # and the lanes are combined once at the end.",
        f"    acc = tl.full([BLOCK], {identity}, tl.float32)",
        "    for start in range(0, n_cols, BLOCK):",
        *_row_values(spec, ops_, "        ", "start + tl.arange(0, BLOCK)"),
        *square,
        f"        v = tl.where(mask, v, {identity})",
        f"        acc = {combine}",
        f"    total = {final}(acc, axis=0)",
    ]
  return head + body + [f"    tl.store(out_ptr + row, {_FINISH.get(spec.core, 'total')})"]


def _softmax_kernel(spec: ModuleSpec, ops_: list[wc.Operand], one_block: bool) -> list[str]:
  log = spec.core == "log_softmax"
  head = [
      "@triton.jit",
      *wc.wrap_call(f"def row_{spec.core}_kernel(",
                    ["x_ptr", *_ptrs(ops_), "out_ptr", "n_cols", "BLOCK: tl.constexpr"], "):"),
      "    # One program per row of n_cols contiguous values.",
      "    row = tl.program_id(0).to(tl.int64)",
  ]
  normalise = ["v = (v - row_max) - tl.log(denom)" if log else "v = tl.exp(v - row_max) / denom"]
  if one_block:
    body = [
        "    # The whole row fits in one block (BLOCK >= n_cols): one read, one write.",
        *_row_values(spec, ops_, "    ", "tl.arange(0, BLOCK)"),
        "    # Padding lanes get -inf: they never win the max and add exp(-inf) = 0 to the sum.",
        '    v = tl.where(mask, v, -float("inf"))',
        "    row_max = tl.max(v, axis=0)",
        "    denom = tl.sum(tl.exp(v - row_max), axis=0)",
        *["    " + s for s in normalise],
        *emit_ops(spec.post, ops_, _row_load, "    "),
        "    tl.store(out_ptr + row * n_cols + cols, v, mask=mask)",
    ]
  else:
    body = [
        "    # The row is longer than one block. Pass 1 keeps, per lane, a running max m and the",
        "    # sum s of exp(v - m), rescaling s whenever m grows (an online softmax), so x is read",
        "    # twice instead of three times. m starts at a finite -3e38 rather than -inf so that",
        "    # m - m_new is never -inf - (-inf) = NaN in lanes that have only seen padding.",
        "    m = tl.full([BLOCK], -3.0e38, tl.float32)",
        "    s = tl.zeros([BLOCK], dtype=tl.float32)",
        "    for start in range(0, n_cols, BLOCK):",
        *_row_values(spec, ops_, "        ", "start + tl.arange(0, BLOCK)"),
        '        v = tl.where(mask, v, -float("inf"))',
        "        m_new = tl.maximum(m, v)",
        "        s = s * tl.exp(m - m_new) + tl.exp(v - m_new)",
        "        m = m_new",
        "    row_max = tl.max(m, axis=0)",
        "    denom = tl.sum(s * tl.exp(m - row_max), axis=0)",
        "    # Pass 2: normalise and write.",
        "    for start in range(0, n_cols, BLOCK):",
        *_row_values(spec, ops_, "        ", "start + tl.arange(0, BLOCK)"),
        *["        " + s for s in normalise],
        *emit_ops(spec.post, ops_, _row_load, "        "),
        "        tl.store(out_ptr + row * n_cols + cols, v, mask=mask)",
    ]
  return head + body


def _row_kernel(spec: ModuleSpec, ops_: list[wc.Operand]) -> tuple[list[str], str]:
  one_block = fits_one_block(spec.x.shape[-1])
  softmax = spec.kind == "softmax"
  kernel = (_softmax_kernel if softmax else _reduction_kernel)(spec, ops_, one_block)
  name = f"row_{spec.core}"
  if softmax:
    alloc = ["    out = torch.empty_like(x)"]
  else:
    keep = " + (1,)" if spec.keepdim else ""
    alloc = [f"    out = torch.empty(x.shape[:-1]{keep}, device=x.device, dtype=x.dtype)"]
  if one_block:
    block = ["    # The whole row in one block: the next power of two of its length (tl.arange",
             "    # needs a power of two; the mask hides the padding).",
             "    BLOCK = triton.next_power_of_2(n_cols)"]
  else:
    block = [f"    # Rows longer than {MAX_ROW_BLOCK} are processed in blocks of {MAX_ROW_BLOCK} "
             "columns: larger blocks",
             "    # would spill registers.",
             f"    BLOCK = min(triton.next_power_of_2(n_cols), {MAX_ROW_BLOCK})"]
  launcher = [
      f"def {name}({_params('x', operands=ops_)}):",
      "    # The kernel reads rows of n_cols contiguous values.",
      "    x = x.contiguous()",
      *_contiguous(ops_),
      "    n_cols = x.shape[-1]",
      "    n_rows = x.numel() // n_cols",
      *alloc,
      *block,
      "    # More warps for longer rows, so that each thread holds a few values of the block.",
      "    num_warps = 4 if BLOCK <= 1024 else (8 if BLOCK <= 2048 else 16)",
      *wc.wrap_call(f"    {name}_kernel[(n_rows,)](",
                    ["x", *_args(ops_), "out", "n_cols", "BLOCK=BLOCK", "num_warps=num_warps"]),
      "    return out",
  ]
  return kernel + ["", ""] + launcher, name


# ---- matmul with a fused epilogue -----------------------------------------------------------

def _matmul(spec: ModuleSpec, ops_: list[wc.Operand]) -> tuple[list[str], str]:
  linear = spec.core == "linear"
  has_bias = linear and spec.param_named(spec.core_operand).bias

  def load(o: wc.Operand) -> str:
    if o.kind == "input":
      return f"tl.load({o.arg}_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask, other=0.0)"
    return f"tl.load({o.arg}_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]"

  bias_ptr = ["linear_bias_ptr"] if has_bias else []
  bias = ["    # nn.Linear's bias, one value per output column.",
          "    v = v + tl.load(linear_bias_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]"] \
      if has_bias else []
  kernel = [
      "@triton.jit",
      *wc.wrap_call("def matmul_epilogue_kernel(",
                    ["a_ptr", "b_ptr", *bias_ptr, *_ptrs(ops_), "out_ptr", "M", "N", "K",
                     "stride_am", "stride_ak", "stride_bk", "stride_bn", "BLOCK_M: tl.constexpr",
                     "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr"], "):"),
      "    # One program per BLOCK_M x BLOCK_N tile of out = a @ b; b is read through its strides,",
      "    # so nn.Linear's weight (N, K) serves as b = weight.T without a copy.",
      "    offs_m = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)",
      "    offs_n = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)",
      "    offs_k = tl.arange(0, BLOCK_K)",
      "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
      "    for k0 in range(0, K, BLOCK_K):",
      "        ks = k0 + offs_k",
      "        a = tl.load(a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,",
      "                    mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0)",
      "        b = tl.load(b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,",
      "                    mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0)",
      "        # Full float32 products: the reference runs with TF32 off.",
      '        acc += tl.dot(a, b, input_precision="ieee")',
      "    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)",
      "    v = acc",
      *bias,
      "    # The epilogue runs on the tile while it is still in registers.",
      *emit_ops(spec.post, ops_, load, "    "),
      "    tl.store(out_ptr + offs_m[:, None] * N + offs_n[None, :], v, mask=mask)",
  ]
  if linear:
    signature = _params("x", "weight", *(["linear_bias"] if has_bias else []), operands=ops_)
    shapes = ["    M, K = x.shape", "    N = weight.shape[0]"]
    strides = ["weight.stride(1)", "weight.stride(0)"]
    b_arg, bias_arg = "weight", (["linear_bias"] if has_bias else [])
  else:
    signature = _params("x", "b", operands=ops_)
    shapes = ["    M, K = x.shape", "    N = b.shape[1]"]
    strides = ["b.stride(0)", "b.stride(1)"]
    b_arg, bias_arg = "b", []
  launcher = [
      f"def matmul_epilogue({signature}):",
      *shapes,
      *(["    # Epilogue operands are indexed as contiguous (M, N) / (N,) tensors."]
        if ops_ else []),
      *_contiguous(ops_),
      "    out = torch.empty((M, N), device=x.device, dtype=x.dtype)",
      f"    # Tiles: the next power of two of each size, at least {MIN_TILE} (tl.dot's minimum) "
      "and at",
      f"    # most {MAX_TILE_MN} x {MAX_TILE_MN} x {MAX_TILE_K}, which keeps a float32 tile pair "
      "in shared memory",
      "    # and the accumulator in registers.",
      f"    BLOCK_M = min({MAX_TILE_MN}, max({MIN_TILE}, triton.next_power_of_2(M)))",
      f"    BLOCK_N = min({MAX_TILE_MN}, max({MIN_TILE}, triton.next_power_of_2(N)))",
      f"    BLOCK_K = min({MAX_TILE_K}, max({MIN_TILE}, triton.next_power_of_2(K)))",
      "    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))",
      *wc.wrap_call("    matmul_epilogue_kernel[grid](",
                    ["x", b_arg, *bias_arg, *_args(ops_), "out", "M", "N", "K", "x.stride(0)",
                     "x.stride(1)", *strides, "BLOCK_M=BLOCK_M", "BLOCK_N=BLOCK_N",
                     "BLOCK_K=BLOCK_K"]),
      "    return out",
  ]
  return kernel + ["", ""] + launcher, "matmul_epilogue"


def write_triton(spec: ModuleSpec) -> str:
  """A Triton ModelNew source for `spec` (4-space indented, like the Coder's examples)."""
  ops_ = wc.chain_operands(spec)
  if spec.kind == "elementwise":
    body, launcher = _elementwise(spec, ops_)
  elif spec.kind in ("reduction", "softmax"):
    body, launcher = _row_kernel(spec, ops_)
  else:
    body, launcher = _matmul(spec, ops_)
  lines = ["import torch", "import torch.nn as nn", "import triton", "import triton.language as tl",
           "", ""]
  if any(o.name in ("tanh", "gelu_tanh") for o in spec.ops):
    lines += _TANH_HELPER.splitlines() + ["", ""]
  lines += body + ["", "", "class ModelNew(nn.Module):"] + wc.init_lines(spec) + [
      "", f"    def forward(self, {', '.join(i.name for i in spec.inputs)}):",
      f"        return {launcher}({', '.join(wc.forward_args(spec, ops_))})", ""]
  return "\n".join(lines)
