"""What tools/results.py is made of: markers in the docs, the statistics, and one module per kind of
committed data (perplexity indices, training runs, the bench CSV, the paper's table)."""
