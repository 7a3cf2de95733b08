"""The Proposer (issue 7, in progress): its API catalog and the co-occurrence-weighted sampling of
API sets it is asked to combine.

  catalog.py   torch APIs by category, how to call them, and which of them code uses (from its
               syntax tree: functions, modules called through attributes, methods, operators)
  api_sets.py  co-occurrence mined from the installed transformers' model files; ApiSetSampler
  frontier.py  the Proposer's reward schedules (a registry) and the pool of accepted modules
  prompts.py   the Proposer's prompt; reading a proposal and its static checks
Runtime validation of a proposed module is the sandbox's (sandbox.validate_module).
"""
