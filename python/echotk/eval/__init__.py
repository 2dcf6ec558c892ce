"""echotk.eval: evaluations of a model whose sites go through the all-reduce.

- echotk.eval.ppl: `python -m echotk ppl`, perplexity over evenly spaced windows of a text
"""
