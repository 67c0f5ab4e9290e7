#!/usr/bin/env bash
# Executes notebooks/longsieve_stats.ipynb end to end with plain python3 (no Jupyter, nbformat or nbclient needed):
# the code cells in order, in one namespace, matplotlib on the Agg backend, each figure saved as a PNG.
#
#   tools/gpu_host/run_notebook.sh [OUTPUT_DIR] [FIGURE_DIR]
#
# OUTPUT_DIR: a job output (stats/, outputs/, runs/); default $LONGSIEVE_OUTPUT, else build/report-sample.
# FIGURE_DIR: where the figures go; default $OUT/notebook-figures when $OUT is set (device runs), else
# build/notebook-figures. Needs pyarrow, pandas and matplotlib (the GPU host's python3 has them).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export LONGSIEVE_OUTPUT="${1:-${LONGSIEVE_OUTPUT:-$ROOT/build/report-sample}}"
FIGURES="${2:-${OUT:+$OUT/notebook-figures}}"
FIGURES="${FIGURES:-$ROOT/build/notebook-figures}"
mkdir -p "$FIGURES"
export MPLBACKEND=Agg
export PYTHONUNBUFFERED=1

python3 - "$ROOT/notebooks/longsieve_stats.ipynb" "$FIGURES" <<'PY'
import json
import sys
import time

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

notebook, figures = sys.argv[1], sys.argv[2]
saved = []


def show(*args, **kwargs):
    """Stands in for plt.show(): saves every open figure, then closes them."""
    for num in plt.get_fignums():
        path = f"{figures}/figure-{len(saved) + 1:02d}.png"
        plt.figure(num).savefig(path, dpi=80, bbox_inches="tight")
        saved.append(path)
    plt.close("all")


plt.show = show
namespace = {"__name__": "__main__", "display": print}
cells = [c for c in json.load(open(notebook))["cells"] if c["cell_type"] == "code"]
for i, cell in enumerate(cells):
    t = time.time()
    print(f"===== cell {i + 1}/{len(cells)}")
    exec(compile("".join(cell["source"]), f"<{notebook} code cell {i + 1}>", "exec"), namespace)
    print(f"===== cell {i + 1} done in {time.time() - t:.2f} s")
show()
print(f"notebook ran end to end: {len(cells)} code cells, {len(saved)} figures in {figures}")
PY
