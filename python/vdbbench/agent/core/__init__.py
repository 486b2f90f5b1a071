"""What every agent room shares: the task card, the session workspace (git, path guards, builds), the journal and its fold (facts)."""
