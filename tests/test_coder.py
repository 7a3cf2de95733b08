"""The Coder's prompt, the extraction of candidates from completions, and the shipped examples."""

from __future__ import annotations

import ast
import os
import random
import re

import pytest

from kernelzero_jax import coder
from kernelzero_jax import tokenizer as tok_lib
from kernelzero_jax.coder import prompts
from kernelzero_jax.sandbox import SandboxConfig, evaluate_candidate
from kernelzero_jax.sandbox import config as sandbox_config
from kernelzero_jax.sandbox.static_checks import check_candidate

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = open(os.path.join(REPO, "kernelzero_jax", "examples", "scaled_relu_reference.py"),
                 encoding="utf-8").read()
EXAMPLE_REFERENCE, TRITON_EXAMPLE = coder.example_sources("triton")
_, CUDA_EXAMPLE = coder.example_sources("cuda")

# A complete, valid candidate (short, so that extraction tests read easily).
CANDIDATE = """import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
        return out
"""


def _user(messages) -> str:
  assert [m["role"] for m in messages] == ["system", "user"]
  return messages[1]["content"]


@pytest.fixture(scope="module")
def tiny():
  return tok_lib.load_tokenizer()


# ---- prompts ---------------------------------------------------------------------------------

def test_backends_are_the_sandbox_backends():
  assert coder.BACKENDS == ("cuda", "triton")
  assert set(coder.BACKENDS) == set(sandbox_config.BACKENDS) == set(prompts.EXAMPLE_CANDIDATES)


@pytest.mark.parametrize("backend", coder.BACKENDS)
def test_one_shot_prompt_holds_instruction_example_and_task_in_order(backend):
  messages = coder.coder_messages(REFERENCE, backend)
  user = _user(messages)
  example_reference, example_candidate = coder.example_sources(backend)
  kernels = {"cuda": "CUDA kernels", "triton": "Triton kernels"}[backend]
  assert kernels in messages[0]["content"]
  # Each source verbatim, in a python fence, in KernelBench's one-shot order.
  fenced = [f"```python\n{s}```\n" for s in (example_reference, example_candidate, REFERENCE)]
  positions = [user.find(f) for f in fenced]
  assert all(p >= 0 for p in positions) and positions == sorted(positions), positions
  assert user.find("Rules:") < positions[0]
  final = user[positions[2] + len(fenced[2]):]
  assert f"Optimize the architecture named Model with custom {kernels}." in final
  assert "Name the optimized architecture ModelNew." in final
  assert "in a single ```python code block" in final
  assert "no testing code" in final
  assert user.count("class ModelNew") == 1  # only the example's


def test_each_backend_shows_its_own_example():
  cuda_user = _user(coder.coder_messages(REFERENCE, "cuda"))
  triton_user = _user(coder.coder_messages(REFERENCE, "triton"))
  assert CUDA_EXAMPLE in cuda_user and TRITON_EXAMPLE not in cuda_user
  assert TRITON_EXAMPLE in triton_user and CUDA_EXAMPLE not in triton_user
  assert "load_inline" in cuda_user and "cpp_sources" in cuda_user
  assert "@triton.jit" in triton_user and "load_inline" not in triton_user


@pytest.mark.parametrize("backend", coder.BACKENDS)
def test_zero_shot_prompt_has_no_example(backend):
  user = _user(coder.coder_messages(REFERENCE, backend, "zero_shot"))
  assert f"```python\n{REFERENCE}```\n" in user
  assert EXAMPLE_REFERENCE not in user and coder.example_sources(backend)[1] not in user
  assert "example architecture" not in user and "Here is an example" not in user
  assert "class ModelNew" not in user
  assert "Name the optimized architecture ModelNew." in user


def test_reference_without_final_newline_is_kept_verbatim():
  source = "import torch\n\nclass Model(torch.nn.Module):\n    pass"
  user = _user(coder.coder_messages(source, "triton", "zero_shot"))
  assert f"```python\n{source}\n```\n" in user


@pytest.mark.parametrize("backend", ["CUDA", "tilelang", "", None])
def test_unknown_backend_raises_naming_it(backend):
  with pytest.raises(ValueError, match=re.escape(repr(backend))):
    coder.coder_messages(REFERENCE, backend)
  with pytest.raises(ValueError, match="unknown Coder backend"):
    coder.example_sources(backend)


def test_render_and_encode_apply_the_chat_template(tiny):
  messages = coder.coder_messages(REFERENCE, "triton")
  text = coder.render_prompt(messages, tiny)
  expected = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
  assert text == expected + "<|im_start|>assistant\n"
  assert text == tok_lib.render_chat(tiny, messages)
  ids = coder.encode_prompt(tiny, messages)
  assert ids == tiny.encode(text, add_special_tokens=False)
  assert ids == tok_lib.apply_chat_template(tiny, messages)
  assert ids[0] == tiny.convert_tokens_to_ids("<|im_start|>")
  assert ids.count(tiny.convert_tokens_to_ids("<|im_start|>")) == 3
  decoded = tiny.decode(ids)
  assert decoded == text and REFERENCE in decoded and TRITON_EXAMPLE in decoded


def test_plain_rendering_without_a_chat_template():
  base = tok_lib.load_tokenizer()
  base.chat_template = None  # a base model's tokenizer
  messages = [{"role": "system", "content": "S."}, {"role": "user", "content": "U."}]
  expected = "System:\nS.\n\nUser:\nU.\n\nAssistant:\n"
  assert coder.render_prompt(messages) == expected
  assert coder.render_prompt(messages, base) == expected
  ids = coder.encode_prompt(base, coder.coder_messages(REFERENCE, "cuda"))
  decoded = base.decode(ids)
  assert decoded.endswith("\n\nAssistant:\n") and "<|im_start|>" not in decoded
  assert REFERENCE in decoded and CUDA_EXAMPLE in decoded


def test_render_rejects_malformed_messages():
  with pytest.raises(ValueError, match="no messages"):
    coder.render_prompt([])
  with pytest.raises(ValueError, match="'role' and 'content'"):
    coder.render_prompt([{"role": "user"}])
  with pytest.raises(ValueError, match="'role' and 'content'"):
    coder.render_prompt(["hello"])


# ---- extraction ------------------------------------------------------------------------------

def _ok(completion: str) -> str:
  result = coder.extract_code(completion)
  assert result.ok and result.reason is None, result.reason
  return result.code


def _fails(completion: str, *words: str) -> str:
  result = coder.extract_code(completion)
  assert not result.ok and result.code is None and result.reason, result
  for word in words:
    assert word in result.reason, result.reason
  return result.reason


@pytest.mark.parametrize("tag", ["python", "py", "", "Python", "python3"])
def test_fenced_block_with_any_python_tag(tag):
  assert _ok(f"```{tag}\n{CANDIDATE}```") == CANDIDATE


def test_prose_before_and_after_the_block():
  completion = (f"Here is the optimized version, one fused kernel.\n\n```python\n{CANDIDATE}```\n"
                "\nThe kernel is faster because it avoids a round trip to memory.\n")
  assert _ok(completion) == CANDIDATE


def test_picks_the_block_that_defines_model_new():
  kernel = "```cpp\n__global__ void k(float* x) {}\n```\n"
  usage = "```python\nmodel = ModelNew()\nprint(model(torch.randn(4)))\n```\n"
  assert _ok(f"{kernel}The module:\n```python\n{CANDIDATE}```\nUsage:\n{usage}") == CANDIDATE


def test_last_of_several_model_new_blocks_wins():
  draft = CANDIDATE.replace("BLOCK=256", "BLOCK=128")
  completion = f"First try:\n```python\n{draft}```\nBetter:\n```python\n{CANDIDATE}```\n"
  assert _ok(completion) == CANDIDATE


def test_reasoning_and_end_tokens_around_the_code():
  draft = "```python\nclass ModelNew:\n    broken(\n```"
  completion = (f"<think>\nFuse it. A first draft:\n{draft}\n</think>\n\n```python\n{CANDIDATE}"
                "```<|im_end|>")
  assert _ok(completion) == CANDIDATE
  # Reasoning opened by the chat template: the completion starts inside it.
  assert _ok(f"plan: one kernel\n</think>\n```python\n{CANDIDATE}```") == CANDIDATE
  # Padding and a hallucinated next turn after the end token are not the answer.
  tail = "<|endoftext|><|endoftext|>\n<|im_start|>user\n```python\nclass ModelNew: pass\n```"
  assert _ok(f"```python\n{CANDIDATE}```\n{tail}") == CANDIDATE
  assert _ok(f"```python\n{CANDIDATE}```<|endoftext|>") == CANDIDATE


def test_unterminated_block_is_a_truncated_completion():
  reason = _fails(f"Here it is:\n```python\n{CANDIDATE[:200]}", "never closed", "cut off")
  assert "length limit" in reason
  # Even when the cut happened to leave valid code, an unclosed ModelNew block is not an answer.
  _fails(f"```python\n{CANDIDATE}", "never closed")
  # ... and it wins over an earlier closed draft: the answer being written was the last one.
  _fails(f"```python\n{CANDIDATE}```\nBetter:\n```python\n{CANDIDATE}", "never closed")
  # Reasoning that never ends.
  _fails("<think>\nLet me think about tiling. First", "never ends", "cut off")


def test_unterminated_trailing_block_after_a_complete_answer_is_ignored():
  # The answer was complete; the model went on to an example and was cut off there.
  completion = f"```python\n{CANDIDATE}```\nUsage:\n```python\nmodel = ModelNew()\nx = tor"
  assert _ok(completion) == CANDIDATE


def test_missing_closing_fence_before_an_end_token_is_accepted():
  # The model ended its turn, so it was not cut off: it only forgot the closing fence.
  assert _ok(f"```python\n{CANDIDATE}<|im_end|>") == CANDIDATE


def test_closing_fence_glued_to_the_last_line():
  assert _ok(f"```python\n{CANDIDATE.rstrip()}```\nDone.") == CANDIDATE


def test_indented_block_in_a_markdown_list_is_dedented():
  indented = "".join(f"   {line}" if line.strip() else line
                     for line in CANDIDATE.splitlines(keepends=True))
  assert _ok(f"1. The code:\n   ```python\n{indented}   ```\n") == CANDIDATE


def test_whole_completion_as_python_without_fences():
  assert _ok(CANDIDATE) == CANDIDATE
  assert _ok(f"\n\n{CANDIDATE}\n<|im_end|>") == CANDIDATE
  _fails(f"Sure! {CANDIDATE}", "no code block", "does not parse", "line 1")


def test_no_model_new_anywhere():
  _fails("```python\nclass Model(torch.nn.Module):\n    pass\n```", "no `class ModelNew`",
         "1 code block")
  _fails("I cannot optimise this model.", "no `class ModelNew`")
  _fails('```python\nx = """\nclass ModelNew:\n"""\n```', "no top-level `class ModelNew`")


def test_syntax_error_reports_the_line():
  broken = CANDIDATE.replace("return out", "return out)")
  line = broken.splitlines().index("        return out)") + 1
  reason = _fails(f"```python\n{broken}```", "does not parse", f"line {line}:")
  assert "ModelNew" in reason
  # Errors only the compiler sees, as the sandbox's import would.
  _fails(f"```python\n{CANDIDATE}return 1\n```", "does not parse", "outside function")


@pytest.mark.parametrize("completion", ["", "   \n\t\n", "<|im_end|>", "<think>a</think>  "])
def test_empty_completion(completion):
  _fails(completion, "empty")


def test_windows_line_endings():
  crlf = CANDIDATE.replace("\n", "\r\n")
  assert _ok(f"Here:\r\n```python\r\n{crlf}```\r\n") == CANDIDATE
  assert _ok(crlf) == CANDIDATE
  assert "\r" not in _ok(f"```python\r{CANDIDATE.replace(chr(10), chr(13))}```\r")


def test_never_raises():
  rng = random.Random(0)
  alphabet = ["```", "```python\n", "\n", "\r\n", "\r", "<think>", "</think>", "<|im_end|>",
              "class ModelNew", ":", "(", "    ", "\x00", "\ud800", "\ufeff", "`", "x", "é"]
  for _ in range(2000):
    completion = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
    result = coder.extract_code(completion)
    assert result.ok == (result.reason is None)
  _fails("```python\nclass ModelNew:\n    x = '\x00'\n```", "does not parse")
  _fails("```python\n" + "(" * 10000 + "\nclass ModelNew: pass\n```", "does not parse")
  _fails(None, "not a str")


# ---- the shipped examples are real -----------------------------------------------------------

def _signature(source: str, class_name: str) -> dict[str, list[str]]:
  classes = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}
  return {f.name: [a.arg for a in f.args.args] for f in classes[class_name].body
          if isinstance(f, ast.FunctionDef)}


def test_examples_follow_the_contracts():
  names = {n.name for n in ast.parse(EXAMPLE_REFERENCE).body
           if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
  assert {"Model", "get_inputs", "get_init_inputs"} <= names
  reference = _signature(EXAMPLE_REFERENCE, "Model")
  for example in (CUDA_EXAMPLE, TRITON_EXAMPLE):
    assert _signature(example, "ModelNew") == reference
    assert coder.extract_code(f"```python\n{example}```").code == example


@pytest.mark.parametrize("backend", coder.BACKENDS)
def test_examples_pass_the_static_checks(backend):
  report = check_candidate(coder.example_sources(backend)[1], backend)
  assert report.ok, (report.format_errors, report.rejections)
  assert report.cuda_kernel_names == (["add_kernel"] if backend == "cuda" else [])
  assert report.triton_kernel_names == (["add_kernel"] if backend == "triton" else [])


def test_cuda_example_builds_what_it_calls():
  # No GPU here, so the build cannot run; check that load_inline gets the three pieces the
  # prompt describes and that every bound function is declared and defined.
  module = ast.parse(CUDA_EXAMPLE)
  strings = {t.id: n.value.value for n in module.body if isinstance(n, ast.Assign)
             for t in n.targets if isinstance(n.value, ast.Constant)}
  (call,) = [n for n in ast.walk(module)
             if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "load_inline"]
  kwargs = {k.arg: k.value for k in call.keywords}
  assert {"name", "cpp_sources", "cuda_sources", "functions"} <= set(kwargs)
  cpp = strings[kwargs["cpp_sources"].id]
  cuda = strings[kwargs["cuda_sources"].id]
  functions = [e.value for e in kwargs["functions"].elts]
  assert functions == ["add_cuda"]
  for fn in functions:
    assert f"torch::Tensor {fn}(" in cpp and f"torch::Tensor {fn}(" in cuda
    assert f"add_extension.{fn}(" in CUDA_EXAMPLE
  assert "__global__ void add_kernel(" in cuda and "getCurrentCUDAStream()" in cuda


def test_triton_example_is_correct_in_the_sandbox():
  # The example as a chat completion would carry it, through extraction, to a verdict: the
  # Triton interpreter on the CPU.
  crlf = TRITON_EXAMPLE.replace("\n", "\r\n")
  completion = f"The kernel:\r\n```python\r\n{crlf}```<|im_end|>"
  candidate = _ok(completion)
  assert candidate == TRITON_EXAMPLE
  config = SandboxConfig(device="cpu", build_timeout_s=120.0, correctness_timeout_s=120.0)
  verdict = evaluate_candidate(EXAMPLE_REFERENCE, candidate, "triton", config)
  assert verdict.status == "correct", (verdict.status, verdict.reasons)
  assert verdict.correct and not verdict.degenerate
