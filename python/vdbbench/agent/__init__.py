"""The agent area: an LLM edits the engine's Rust sources through tools; only measured gains are kept.

Five rooms, each importing only the rooms above it in this list (tests/test_layers.py checks it):

- `core`: what every room shares: the task card (`task`), the session's private git workspace
  and its builds (`workspace`, with the metrics trailer of accepted commits), the journal
  (`journal`) and the one fold of it that all its readers use (`facts`).
- `evaluation`: the judge of a submission. `evaluator` times candidate builds in processes it
  owns (`candidate` runs `harness_worker` under the machine-wide `timing_lock`) on the query
  splits of `eval_data`, with the figures of `eval_report`; `judge` decides (with `audit`);
  `reference` measures the project's own engine on the card, `transfer` the card's other data,
  `final` the session's result.
- `session`: the loop (`loop.Session`) that asks the model (`model`, `text_protocol`), runs its
  tools (`tools`, `profiling`; they and `startup` see the session through `session_api`), with
  its prompts (`prompts`, templates in prompts/, the machine from `machine` and `node`), budgets
  (`budget`), compaction (`compaction`) and strategic reviews (`review`).
- `reports`: reading journals back: the report's data (`report`, which `vdbbench.pages` draws),
  plots (`report_plots`), the terminal report and compare (`report_cli`) and the live view (`live`).
- `tournaments`: models x rollouts as Ray tasks (`tournament`), the leaderboard (`leaderboard`)
  and their commands (`tournament_cli`).

Command line (`cli`): `vdbbench agent run|resume|export|report|compare|final|tournament|leaderboard`.
"""
