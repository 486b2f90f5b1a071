"""The agent area: an LLM edits the engine's Rust sources through tools; only measured gains are kept.

The loop (`loop.Session`) asks the model (`model`), runs its tool calls (the table in `tools`;
`profiling` renders the engine's stats and perf samples; tools and start-up see the session
through `session_api`) on a private git workspace (`workspace`), judges each submission in
candidate processes it owns (`evaluator` times them, `candidate` and `harness_worker` run them,
`eval_data` holds the query splits, `eval_report` the figures) and writes every event to the
journal (`journal`), as the task card (`task`) says. Starting and resuming (`startup`) measure the start version and the
reference line (`reference`: the project's own engine on the same card). The prompts ship with
the package (`prompts`, templates in prompts/) and state the machine (`machine`). Every reader
of the journal (budgets, live view, report, compaction, resume) goes through one fold (`facts`).
Long sessions add budgets, compaction, strategic reviews, the audit, the live view and reports
(`budget`, `compaction`, `review`, `audit`, `live`, `report`, `report_plots`, `report_cli`,
`text_protocol`). Command line: `vdbbench agent run|resume|export|report|compare`.
"""
