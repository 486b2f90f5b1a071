"""The session loop: the model clients, the tools, the prompts (templates in prompts/), start-up and resume, budgets, compaction and strategic reviews."""
