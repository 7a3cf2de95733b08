"""The candidate source in a Coder completion.

A completion is whatever the sampler decoded: reasoning (<think>...</think>), prose around one
or more fenced code blocks, a chat end token and padding after the answer, Windows line endings,
or a cut at the length limit. `extract_code` finds the `ModelNew` source in it, or says why there
is none; it never raises, because one odd sample must not stop a training step. A failed
extraction is a format error that needs no sandbox call.

The rules, in order:
  1. Line endings become "\\n". The answer ends at the first chat end token (<|im_end|>,
     <|endoftext|>, ...): what follows belongs to no turn of the model's.
  2. Reasoning is dropped: every <think>...</think>, and everything before a lone </think> (the
     template opened the reasoning in the prompt). A <think> that never closes ends the answer.
  3. Fenced blocks (```python, ```py, ``` or any other tag: models mislabel) are found line by
     line. The candidate is the last closed block that defines a top-level `class ModelNew`
     (earlier ones are drafts). A last block left open is a cut-off answer, unless the model
     ended its turn right after it (rule 1 found an end token), in which case it only forgot the
     closing fence.
  4. With no fenced block at all, the whole answer is the candidate if it defines ModelNew.
  5. The candidate must compile (SyntaxError -> the line number in the reason).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap

# Tokens that end a chat turn (Qwen/ChatML, Llama 3, Gemma, Phi, SentencePiece), and the start
# of a new turn, which means the model went on talking as someone else.
END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<end_of_turn>",
              "<|end|>", "</s>", "<|im_start|>")

_THINK_BLOCK_RE = re.compile(r"<think>.*?</think>", re.DOTALL)
_CLASS_RE = "^class[ \t]+{name}\\b"
_FENCE = "```"


@dataclasses.dataclass(frozen=True)
class Extraction:
  code: str | None  # the candidate source, or None
  reason: str | None  # why extraction failed (human readable), None on success

  @property
  def ok(self) -> bool:
    return self.code is not None and self.reason is None


@dataclasses.dataclass
class _Block:
  info: str  # the fence's tag, e.g. "python"; not trusted
  lines: list[str]
  closed: bool

  @property
  def code(self) -> str:
    # Dedented because a block nested in a markdown list is indented as a whole; the blank
    # lines around the code are not part of it.
    return textwrap.dedent("\n".join(self.lines)).strip("\n") + "\n"

  def defines(self, class_re: re.Pattern) -> bool:
    return bool(class_re.search(self.code))


def _cut_at_end_token(text: str) -> tuple[str, bool]:
  """(the text before the first end token, whether there was one)."""
  cut = min((i for i in (text.find(t) for t in END_TOKENS) if i >= 0), default=-1)
  return (text, False) if cut < 0 else (text[:cut], True)


def _strip_reasoning(text: str) -> tuple[str, bool]:
  """(the text without reasoning, whether a <think> was left open)."""
  text = _THINK_BLOCK_RE.sub("", text)
  if "</think>" in text:  # opened by the chat template, so the completion starts inside it
    text = text[text.rfind("</think>") + len("</think>"):]
  if "<think>" in text:
    return text[:text.find("<think>")], True
  return text, False


def _is_closing_fence(stripped: str) -> bool:
  return stripped.startswith(_FENCE) and not stripped.strip("`").strip()


def _fenced_blocks(text: str) -> list[_Block]:
  """The fenced blocks of `text`, in order; only the last one can be open."""
  blocks: list[_Block] = []
  current: _Block | None = None
  for line in text.split("\n"):
    stripped = line.strip()
    if current is None:
      if stripped.startswith(_FENCE):
        current = _Block(info=stripped.strip("`").strip().lower(), lines=[], closed=False)
    elif _is_closing_fence(stripped):
      current.closed = True
      blocks.append(current)
      current = None
    elif stripped.endswith(_FENCE):
      # The closing fence glued to the last code line ("    return out```").
      current.lines.append(line.rstrip()[:-len(_FENCE)].rstrip("`"))
      current.closed = True
      blocks.append(current)
      current = None
    else:
      current.lines.append(line)
  if current is not None:
    blocks.append(current)
  return blocks


def _compile_error(code: str) -> str | None:
  """Why `code` does not compile, or None. Compiling runs nothing, and it catches what a bare
  parse lets through ('return' outside a function, ...), as the sandbox's import would."""
  try:
    compile(code, "<candidate>", "exec", dont_inherit=True)
  except SyntaxError as e:
    where = f"line {e.lineno}: " if e.lineno else ""
    return f"{where}{e.msg}"
  except (ValueError, RecursionError, MemoryError, OverflowError) as e:
    # Null bytes or lone surrogates (ValueError), absurd nesting (RecursionError).
    return f"{type(e).__name__}: {e}"
  return None


def _defines_top_level(code: str, class_name: str) -> bool:
  """True when `class <class_name>` is a top-level statement (not text inside a string)."""
  try:
    tree = ast.parse(code)
  except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
    return False
  return any(isinstance(n, ast.ClassDef) and n.name == class_name for n in tree.body)


def _candidate(code: str, what: str, class_name: str) -> Extraction:
  error = _compile_error(code)
  if error is not None:
    return Extraction(None, f"{what} does not parse as Python: {error}")
  if not _defines_top_level(code, class_name):
    return Extraction(None, f"{what} has no top-level `class {class_name}`")
  return Extraction(code, None)


_TRUNCATED = ("the last code block is never closed (no closing ```): the completion was "
              "probably cut off at the length limit")
_REASONING_OPEN = ("the reasoning (<think>) never ends: the completion was probably cut off at "
                   "the length limit before any code")


def extract_code(completion: str, class_name: str = "ModelNew") -> Extraction:
  """The source defining `class_name` (the Coder's `ModelNew`; the Proposer's `Model`) in
  `completion`, or the reason there is none (see the module doc)."""
  class_re = re.compile(_CLASS_RE.format(name=re.escape(class_name)), re.MULTILINE)
  if not isinstance(completion, str):
    return Extraction(None, f"the completion is a {type(completion).__name__}, not a str")
  text = completion.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
  text, ended_turn = _cut_at_end_token(text)
  text, thinking_open = _strip_reasoning(text)
  if not text.strip():
    if thinking_open:
      return Extraction(None, _REASONING_OPEN)
    return Extraction(None, "the completion is empty")

  blocks = _fenced_blocks(text)
  if blocks and not blocks[-1].closed and ended_turn:
    blocks[-1].closed = True  # the model ended its turn: it forgot the fence, it was not cut off
  closed = [b for b in blocks if b.closed and b.defines(class_re)]
  open_block = blocks[-1] if blocks and not blocks[-1].closed else None
  if open_block is not None and (open_block.defines(class_re) or not closed):
    return Extraction(None, _TRUNCATED)
  if closed:
    return _candidate(closed[-1].code, f"the code block defining {class_name}", class_name)
  if blocks:
    return Extraction(None, f"no `class {class_name}` in the completion: none of its "
                      f"{len(blocks)} code block(s) defines it")
  if class_re.search(text):
    return _candidate(text.strip("\n") + "\n", "the completion (no code block)", class_name)
  if thinking_open:
    return Extraction(None, _REASONING_OPEN)
  return Extraction(None, f"no `class {class_name}` in the completion (and no code block)")
