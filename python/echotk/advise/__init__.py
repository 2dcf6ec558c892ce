"""echotk.advise: `python -m echotk advise`, which all-reduce setting keeps a model within a
perplexity budget at the fewest wire bits, and which of its sites are hazardous (docs/advise.md).

- candidates: the specs evaluated, one (name, Spec) entry each
- measure, sites, hazards: the per-site measurements of a short trace and the hazards they show
- ranking, evaluate: the paired windows against 16-bit, the early stop and the ranking
- timing: the modelled all-reduce time (docs/performance.md's floors)
- loading, report, command: the model, the outputs, the command line
"""
