"""Publishing a sync: a window's plan becomes a branch, a draft PR, one review and a check run."""
