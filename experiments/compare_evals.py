r"""Two evaluations of the same problems, compared problem by problem (evaluation/compare.py).

    python -m experiments.compare_evals --before=WORKDIR/eval_sft --after=WORKDIR/eval_rl \
        [--by_kind] [--json_out=PATH]

Each of --before and --after is an evaluation directory (holding verdicts.jsonl, as
eval_kernelbench and the warm start write) or a verdicts .jsonl file. Prints correct samples
before and after over the problems both sampled, how many problems went up, down or stayed, and
the two-sided p-values of the sign test and of the Cochran-Mantel-Haenszel test (problems as
strata); with --by_kind also per module kind (the warm start's problem names end in _<kind>).
The same numbers as JSON on the last line (and in --json_out).
"""

import json

from absl import app
from absl import flags

from kernelzero_jax.evaluation.compare import compare, read_eval
from kernelzero_jax.teacher.generator import kind_of

_BEFORE = flags.DEFINE_string("before", None, "The first evaluation (directory or .jsonl).")
_AFTER = flags.DEFINE_string("after", None, "The second evaluation (directory or .jsonl).")
_BY_KIND = flags.DEFINE_bool("by_kind", False, "Also compare per module kind.")
_JSON_OUT = flags.DEFINE_string("json_out", None, "Also write the comparison JSON here.")
flags.mark_flags_as_required(["before", "after"])


def _line(name, c):
  return (f"{name:<12} {c['correct_before']:>4}/{c['samples_before']:<5} -> "
          f"{c['correct_after']:>4}/{c['samples_after']:<5} over {c['problems']:>3} problems: "
          f"{c['up']} up, {c['down']} down, {c['same']} same (sign test p = "
          f"{c['sign_test_p']:.2g}, CMH p = {c['cmh_p']:.2g})")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  try:
    result = compare(read_eval(_BEFORE.value), read_eval(_AFTER.value),
                     group_of=kind_of if _BY_KIND.value else None)
  except (FileNotFoundError, KeyError, ValueError) as e:
    raise app.UsageError(f"cannot compare: {e!r}") from e
  print(_line("all", result))
  for group, c in result.get("by_group", {}).items():
    print(_line(group, c))
  if result["only_before"] or result["only_after"]:
    print(f"left out: {result['only_before']} problems only before, "
          f"{result['only_after']} only after")
  if _JSON_OUT.value:
    with open(_JSON_OUT.value, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)
  print(json.dumps(result))


if __name__ == "__main__":
  app.run(main)
