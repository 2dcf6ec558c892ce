"""advice.png of `python -m echotk advise`: quality against wire bits."""
from __future__ import annotations


def draw(advice, path: str) -> None:
    """Quality against bits: d log ppl with its paired 95% interval for each evaluated candidate,
    the candidates along the x axis in order of wire bits (labelled with them), the budget as a
    line, the colour the verdict."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    shown = sorted((c for c in advice.candidates if not c.skipped and c.diffs),
                   key=lambda c: (c.wire_bits, c.modelled_seconds))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(shown) + 2), 5))
    colours = {"recommended": "tab:green", "within budget": "tab:blue", "undecided": "tab:orange",
               "out of budget": "tab:red"}
    for x, c in enumerate(shown):
        mean, low, high = c.interval()
        kind = "recommended" if c is advice.recommended else c.verdict(advice.limit)
        ax.errorbar([x], [mean], yerr=[[mean - low], [high - mean]], fmt="o", capsize=4,
                    color=colours[kind], label=kind)
    ax.axhline(advice.limit, color="gray", linestyle="--", label=f"budget +{advice.budget_percent:g}%")
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_yscale("symlog", linthresh=max(advice.limit, 1e-3))
    ax.set_xticks(range(len(shown)))
    ax.set_xticklabels([f"{c.name}\n{c.wire_bits:g} bits" for c in shown], rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("d log ppl vs 16-bit (nats per token)")
    ax.set_title(f"{advice.source.architecture}, P = {advice.ranks}: quality against wire bits "
                 f"({advice.windows} x {advice.length} tokens)", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
