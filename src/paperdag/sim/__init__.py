"""Small simulated worlds shared by the pipelines (pure numpy, no method knowledge)."""
