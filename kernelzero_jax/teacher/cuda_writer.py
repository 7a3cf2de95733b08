"""The CUDA teacher: writes a ModelNew whose kernels (built with load_inline) compute a ModuleSpec.

Like the Triton writer, the translation is op by op (an expression emitter per op) inside a
kernel chosen by the kind:
  elementwise  one thread per element of the flattened tensors, FLAT_THREADS per block;
  reduction    one block per row: each thread strides over the row, then a warp-shuffle and
  softmax      shared-memory block reduction (softmax: an online max/sum pass, then a writing
               pass);
  matmul       a shared-memory tiled kernel (TILE x TILE outputs per block, one per thread) with
               bias and the epilogue chain applied before the store.
float32 throughout, accumulation in float32 (no tensor cores, so nothing like TF32 rounding).
Pure Python: no torch here.
"""

from __future__ import annotations

from typing import Callable

from kernelzero_jax.teacher import writer_common as wc
from kernelzero_jax.teacher.family import ModuleSpec, Op

FLAT_THREADS = 256
TILE = 16
MAX_ROW_THREADS = 1024
VALUES_PER_THREAD = 8


def _f(c: float) -> str:
  """A float literal in C (float, not double: double math is slow on most GPUs)."""
  return repr(float(c)) + "f"


def _clamp(v: str, c: tuple[float, ...]) -> str:
  lo, hi = c
  if lo != float("-inf"):
    v = f"fmaxf({v}, {_f(lo)})"
  if hi != float("inf"):
    v = f"fminf({v}, {_f(hi)})"
  return v


# Unary op -> CUDA expression of the op applied to the float `v`.
UNARY: dict[str, Callable[[str, tuple[float, ...]], str]] = {
    "relu": lambda v, c: f"fmaxf({v}, 0.0f)",
    "gelu": lambda v, c: f"0.5f * {v} * (1.0f + erff({v} * 0.70710678118654752f))",
    "gelu_tanh": lambda v, c: (f"0.5f * {v} * (1.0f + tanhf(0.79788456080286536f * "
                               f"({v} + 0.044715f * {v} * {v} * {v})))"),
    "silu": lambda v, c: f"{v} / (1.0f + expf(-{v}))",
    "sigmoid": lambda v, c: f"1.0f / (1.0f + expf(-{v}))",
    "tanh": lambda v, c: f"tanhf({v})",
    "exp": lambda v, c: f"expf({v})",
    "abs": lambda v, c: f"fabsf({v})",
    "neg": lambda v, c: f"-{v}",
    "square": lambda v, c: f"{v} * {v}",
    # log(1 + e^v), and v itself above torch's threshold of 20.
    "softplus": lambda v, c: f"({v} > 20.0f ? {v} : log1pf(expf({v})))",
    "leaky_relu": lambda v, c: f"({v} > 0.0f ? {v} : {v} * {_f(c[0])})",
    "elu": lambda v, c: f"({v} > 0.0f ? {v} : {_f(c[0])} * expm1f({v}))",
    "hardtanh": _clamp,
    "clamp": _clamp,
    "scale": lambda v, c: f"{v} * {_f(c[0])}",
    "add_const": lambda v, c: f"{v} + {_f(c[0])}",
}
# Binary op -> CUDA expression of `v` combined with the operand's value `o`.
BINARY: dict[str, Callable[[str, str], str]] = {
    "add": lambda v, o: f"{v} + {o}",
    "sub": lambda v, o: f"{v} - {o}",
    "mul": lambda v, o: f"{v} * {o}",
    "maximum": lambda v, o: f"fmaxf({v}, {o})",
    "minimum": lambda v, o: f"fminf({v}, {o})",
}


def emit_ops(ops: tuple[Op, ...], operands: list[wc.Operand], at: Callable[[wc.Operand], str],
             indent: str) -> list[str]:
  """Statements that apply `ops` to `v`; `at` gives the operand's value at v's position."""
  lines = []
  for op in ops:
    lines.append(f"{indent}// {wc.op_comment(op)}")
    if op.operand is not None:
      lines.append(f"{indent}v = {BINARY[op.name]('v', at(wc.operand_of(op, operands)))};")
    else:
      lines.append(f"{indent}v = {UNARY[op.name]('v', op.consts)};")
  return lines


_BLOCK_REDUCE = '''// One value per thread to one value per block: a shuffle tree within each warp,
// then the warps' partials through shared memory (one slot per warp, at most 32 warps).
__device__ __forceinline__ float warp_{name}(float v) {{
    for (int offset = 16; offset > 0; offset >>= 1) {{
        float other = __shfl_xor_sync(0xffffffffu, v, offset);
        v = {combine};
    }}
    return v;
}}

__device__ float block_{name}(float v, float* shared) {{
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    v = warp_{name}(v);
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    const int n_warps = (blockDim.x + 31) / 32;
    v = threadIdx.x < n_warps ? shared[threadIdx.x] : {identity};
    if (warp == 0) v = warp_{name}(v);
    if (threadIdx.x == 0) shared[0] = v;
    __syncthreads();
    v = shared[0];
    __syncthreads();  // every thread has read shared[0] before it is reused
    return v;
}}
'''
# name -> (combine of v and other, identity)
_COMBINES = {"sum": ("v + other", "0.0f"), "max": ("fmaxf(v, other)", "-INFINITY"),
             "min": ("fminf(v, other)", "INFINITY")}
# name -> a thread's accumulation of its next value v into acc
_ACCUMULATE = {"sum": "acc += v;", "max": "acc = fmaxf(acc, v);", "min": "acc = fminf(acc, v);"}
# reduction -> (block reduction, squares first, finish of `total`)
_REDUCTIONS = {
    "sum": ("sum", False, "total"), "mean": ("sum", False, "total / (float)n_cols"),
    "l2norm": ("sum", True, "sqrtf(total)"), "rms": ("sum", True, "sqrtf(total / (float)n_cols)"),
    "max": ("max", False, "total"), "amax": ("max", False, "total"),
    "min": ("min", False, "total"), "amin": ("min", False, "total"),
}


def _block_reduce(name: str) -> list[str]:
  combine, identity = _COMBINES[name]
  return _BLOCK_REDUCE.format(name=name, combine=combine, identity=identity).splitlines()


def _ptr_params(operands: list[wc.Operand]) -> list[str]:
  return [f"const float* __restrict__ {o.arg}" for o in operands]


def _launcher_head(name: str, tensors: list[str]) -> list[str]:
  """The C++ launcher's first lines: every tensor checked, made contiguous (`<t>_c`)."""
  lines = [f"torch::Tensor {name}({', '.join(f'torch::Tensor {t}' for t in tensors)}) {{"]
  for t in tensors:
    lines.append(f"    TORCH_CHECK({t}.is_cuda() && {t}.scalar_type() == torch::kFloat32,")
    lines.append(f'                "{name}: {t} must be a float32 CUDA tensor");')
  lines.append("    // The kernel indexes flat row-major memory.")
  lines += [f"    auto {t}_c = {t}.contiguous();" for t in tensors]
  return lines


def _data(tensors: list[str]) -> list[str]:
  return [f"{t}_c.data_ptr<float>()" for t in tensors]


def _launch(kernel: str, config: str, args: list[str]) -> list[str]:
  head = f"    {kernel}<<<{config}, 0, at::cuda::getCurrentCUDAStream()>>>("
  return ([head] + wc.wrap_call("        ", args, ");")
          + ["    C10_CUDA_KERNEL_LAUNCH_CHECK();"])


# ---- elementwise ---------------------------------------------------------------------------

def _elementwise(spec: ModuleSpec, ops_: list[wc.Operand]) -> tuple[list[str], list[str], str]:
  def at(o: wc.Operand) -> str:
    return f"{o.arg}[i]" if o.kind == "input" else f"{o.arg}[i % n_cols]"

  kernel = [
      *wc.wrap_call("__global__ void fused_elementwise_kernel(",
                    ["const float* __restrict__ x", *_ptr_params(ops_), "float* __restrict__ out",
                     "int64_t n", "int64_t n_cols"], ") {"),
      "    // One thread per element; int64 indices so that tensors over 2^31 elements index",
      "    // correctly.",
      "    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;",
      "    if (i >= n) return;",
      "    float v = x[i];",
      *emit_ops(spec.pre, ops_, at, "    "),
      "    out[i] = v;",
      "}",
  ]
  tensors = ["x"] + [o.arg for o in ops_]
  name = "fused_elementwise_cuda"
  launcher = [
      *_launcher_head(name, tensors),
      "    auto out = torch::empty_like(x_c);",
      "    const int64_t n = x_c.numel();",
      "    if (n == 0) return out;",
      f"    // {FLAT_THREADS} threads (8 warps) per block: enough blocks per SM to hide memory "
      "latency.",
      f"    const int threads = {FLAT_THREADS};",
      "    const int64_t blocks = (n + threads - 1) / threads;",
      *_launch("fused_elementwise_kernel", "(unsigned int)blocks, threads",
               _data(tensors) + ["out.data_ptr<float>()", "n", "x_c.size(-1)"]),
      "    return out;",
      "}",
  ]
  return kernel, launcher, name


# ---- row kernels: reductions and softmax ----------------------------------------------------

def _row_at(o: wc.Operand) -> str:
  return f"{o.arg}[row * n_cols + c]" if o.kind == "input" else f"{o.arg}[c]"


def _row_loop(spec: ModuleSpec, ops_: list[wc.Operand], body: list[str],
              post: bool = False) -> list[str]:
  """A loop in which each thread visits columns threadIdx.x, + blockDim.x, ... of its row."""
  return ["    for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x) {",
          "        float v = x[row * n_cols + c];",
          *emit_ops(spec.pre, ops_, _row_at, "        "),
          *body,
          *(emit_ops(spec.post, ops_, _row_at, "        ") if post else []),
          *(["        out[row * n_cols + c] = v;"] if post else []),
          "    }"]


def _row_kernel(spec: ModuleSpec, ops_: list[wc.Operand]) -> tuple[list[str], list[str], str]:
  softmax = spec.kind == "softmax"
  head = [*wc.wrap_call(f"__global__ void row_{spec.core}_kernel(",
                        ["const float* __restrict__ x", *_ptr_params(ops_),
                         "float* __restrict__ out", "int64_t n_cols"], ") {"),
          "    // One block per row of n_cols contiguous values.",
          "    __shared__ float shared[32];",
          "    const int64_t row = blockIdx.x;"]
  if softmax:
    helpers = _block_reduce("max") + [""] + _block_reduce("sum")
    log = spec.core == "log_softmax"
    normalise = ("        v = (v - row_max) - log_denom;" if log
                 else "        v = expf(v - row_max) / denom;")
    body = [
        "    // Pass 1, per thread: a running max m and the sum s of exp(v - m), rescaled whenever",
        "    // m grows (an online softmax), so that x is read twice instead of three times.",
        "    float m = -INFINITY;",
        "    float s = 0.0f;",
        *_row_loop(spec, ops_, ["        if (v > m) {", "            s = s * expf(m - v) + 1.0f;",
                                "            m = v;", "        } else {",
                                "            s += expf(v - m);", "        }"]),
        "    // Combine the threads: the row's max, then every thread's sum rescaled to it (a",
        "    // thread that saw no column has m = -inf and s = 0, and adds 0).",
        "    const float row_max = block_max(m, shared);",
        "    const float denom = block_sum(s * expf(m - row_max), shared);",
        *(["    const float log_denom = logf(denom);"] if log else []),
        "    // Pass 2: normalise and write.",
        *_row_loop(spec, ops_, [normalise], post=True),
        "}",
    ]
  else:
    which, squares, finish = _REDUCTIONS[spec.core]
    helpers = _block_reduce(which)
    square = [f"        // {spec.core} sums squares.", "        v = v * v;"] if squares else []
    body = [
        f"    float acc = {_COMBINES[which][1]};",
        *_row_loop(spec, ops_, square + [f"        {_ACCUMULATE[which]}"]),
        f"    const float total = block_{which}(acc, shared);",
        f"    if (threadIdx.x == 0) out[row] = {finish};",
        "}",
    ]
  name = f"row_{spec.core}_cuda"
  tensors = ["x"] + [o.arg for o in ops_]
  if softmax:
    alloc = ["    auto out = torch::empty_like(x_c);"]
  else:
    alloc = ["    auto sizes = x_c.sizes().vec();",
             f"    {'sizes.back() = 1;' if spec.keepdim else 'sizes.pop_back();'}"
             f"  // the reduced last dim{' (keepdim)' if spec.keepdim else ''}",
             "    auto out = torch::empty(sizes, x_c.options());"]
  launcher = [
      *_launcher_head(name, tensors),
      "    const int64_t n_cols = x_c.size(-1);",
      "    const int64_t n_rows = n_cols == 0 ? 0 : x_c.numel() / n_cols;",
      *alloc,
      "    if (n_rows == 0) return out;",
      f"    // At least one warp; double until each thread has at most {VALUES_PER_THREAD} "
      f"values of the row,",
      f"    // up to {MAX_ROW_THREADS} threads (the block limit).",
      "    int threads = 32;",
      f"    while (threads < {MAX_ROW_THREADS} && (int64_t)threads * {VALUES_PER_THREAD} < n_cols) "
      "threads *= 2;",
      *_launch(f"row_{spec.core}_kernel", "(unsigned int)n_rows, threads",
               _data(tensors) + ["out.data_ptr<float>()", "n_cols"]),
      "    return out;",
      "}",
  ]
  return helpers + [""] + head + body, launcher, name


# ---- matmul with a fused epilogue -----------------------------------------------------------

def _matmul(spec: ModuleSpec, ops_: list[wc.Operand]) -> tuple[list[str], list[str], str]:
  linear = spec.core == "linear"
  has_bias = linear and spec.param_named(spec.core_operand).bias

  def at(o: wc.Operand) -> str:
    return f"{o.arg}[r * N + c]" if o.kind == "input" else f"{o.arg}[c]"

  if linear:
    b_load = [
        "        // b = weight (N, K), read transposed: thread (ty, tx) loads weight[n, k0 + tx],",
        "        // so consecutive threads read consecutive addresses, and stores it at",
        "        // b_tile[tx][ty] (the +1 padding keeps those column writes free of bank",
        "        // conflicts).",
        "        const int64_t n = (int64_t)blockIdx.x * TILE + ty;",
        "        b_tile[tx][ty] = (n < N && k0 + tx < K) ? b[n * K + k0 + tx] : 0.0f;",
    ]
  else:
    b_load = ["        // b (K, N): thread (ty, tx) loads b[k0 + ty, c].",
              "        b_tile[ty][tx] = (k0 + ty < K && c < N) ? b[(k0 + ty) * N + c] : 0.0f;"]
  kernel = [
      f"// {TILE} x {TILE} outputs per block, one per thread (256 threads): each K-step stages a "
      f"{TILE} x {TILE}",
      "// tile of a and of b in shared memory, so each value read from global memory is used",
      f"// {TILE} times.",
      f"constexpr int TILE = {TILE};",
      "",
      *wc.wrap_call("__global__ void matmul_epilogue_kernel(",
                    ["const float* __restrict__ a", "const float* __restrict__ b",
                     *(["const float* __restrict__ linear_bias"] if has_bias else []),
                     *_ptr_params(ops_), "float* __restrict__ out", "int64_t M", "int64_t N",
                     "int64_t K"], ") {"),
      "    __shared__ float a_tile[TILE][TILE];",
      "    __shared__ float b_tile[TILE][TILE + 1];",
      "    const int tx = threadIdx.x;",
      "    const int ty = threadIdx.y;",
      "    const int64_t r = (int64_t)blockIdx.y * TILE + ty;",
      "    const int64_t c = (int64_t)blockIdx.x * TILE + tx;",
      "    float acc = 0.0f;",
      "    for (int64_t k0 = 0; k0 < K; k0 += TILE) {",
      "        a_tile[ty][tx] = (r < M && k0 + tx < K) ? a[r * K + k0 + tx] : 0.0f;",
      *b_load,
      "        __syncthreads();",
      "#pragma unroll",
      "        for (int kk = 0; kk < TILE; ++kk) acc += a_tile[ty][kk] * b_tile[kk][tx];",
      "        __syncthreads();",
      "    }",
      "    if (r >= M || c >= N) return;",
      "    float v = acc;",
      *(["    v += linear_bias[c];  // nn.Linear's bias"] if has_bias else []),
      *emit_ops(spec.post, ops_, at, "    "),
      "    out[r * N + c] = v;",
      "}",
  ]
  name = "matmul_epilogue_cuda"
  if linear:
    tensors = ["x", "weight"] + (["linear_bias"] if has_bias else [])
  else:
    tensors = ["x", "b"]
  tensors += [o.arg for o in ops_]
  n_expr = "weight_c.size(0)" if linear else "b_c.size(1)"
  launcher = [
      *_launcher_head(name, tensors),
      "    const int64_t M = x_c.size(0);",
      "    const int64_t K = x_c.size(1);",
      f"    const int64_t N = {n_expr};",
      "    auto out = torch::empty({M, N}, x_c.options());",
      "    if (M == 0 || N == 0) return out;",
      "    const dim3 threads(TILE, TILE);",
      "    const dim3 blocks((unsigned int)((N + TILE - 1) / TILE),",
      "                      (unsigned int)((M + TILE - 1) / TILE));",
      *_launch("matmul_epilogue_kernel", "blocks, threads",
               _data(tensors) + ["out.data_ptr<float>()", "M", "N", "K"]),
      "    return out;",
      "}",
  ]
  return kernel, launcher, name


def write_cuda(spec: ModuleSpec) -> str:
  """A CUDA ModelNew source for `spec` (4-space indented, like the Coder's examples)."""
  ops_ = wc.chain_operands(spec)
  if spec.kind == "elementwise":
    kernel, launcher, name = _elementwise(spec, ops_)
  elif spec.kind in ("reduction", "softmax"):
    kernel, launcher, name = _row_kernel(spec, ops_)
  else:
    kernel, launcher, name = _matmul(spec, ops_)
  declaration = launcher[0][:-2] + ";"  # the launcher's signature, for load_inline's binding
  ext = name.replace("_cuda", "_extension")
  cuda_source = ["#include <torch/extension.h>", "#include <ATen/cuda/CUDAContext.h>", "",
                 *kernel, "", *launcher]
  lines = [
      "import torch", "import torch.nn as nn", "from torch.utils.cpp_extension import load_inline",
      "", "# The kernel and its C++ launcher, which checks the inputs, allocates the output and",
      "# launches the kernel on PyTorch's current stream.",
      'cuda_source = r"""', *cuda_source, '"""', "",
      "# The launcher's declaration: load_inline generates the Python binding from it.",
      f'cpp_source = "{declaration}"', "",
      f"{ext} = load_inline(", f'    name="{ext}",', "    cpp_sources=cpp_source,",
      "    cuda_sources=cuda_source,", f'    functions=["{name}"],', "    verbose=False,", ")",
      "", "", "class ModelNew(nn.Module):", *wc.init_lines(spec), "",
      f"    def forward(self, {', '.join(i.name for i in spec.inputs)}):",
      f"        return {ext}.{name}({', '.join(wc.forward_args(spec, ops_))})", ""]
  lines[lines.index("    cpp_sources=cpp_source,")] = "    cpp_sources=cpp_source,"
  return "\n".join(lines)
