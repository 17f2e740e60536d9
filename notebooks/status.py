# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Reproduction status
#
# Every artifact of the book with the paper's number, ours, the difference, the profile that
# produced ours, and when. Generated from the results store (`data/results/store/`) and the
# committed run records; nothing on this page is typed by hand.

# %% tags=["parameters"]
profile = "smoke"
seed = 0

# %%
import pandas as pd
from IPython.display import HTML, display

from datalens_lib import store

PAGES = {"tab:image": "t1_main_utility", "tab:lowdp": "t2_low_epsilon",
         "fig:dept_bound": "f1_dependent_bound", "tab:hyperparam": "t4_hyperparameters",
         "tab:time": "t6_running_time", "tab:components": "t7_components",
         "fig:vis": "f3_samples", "privacy-explorer": "privacy_explorer"}
rows = []
for artifact, page in PAGES.items():
    rec = store.best(store.load_results(artifact))
    if rec is None:
        rows.append({"artifact": artifact, "profile": "-", "cells": 0, "compared": 0,
                     "mean difference": None, "max |difference|": None, "date": None,
                     "page": page})
        continue
    res = rec["result"]
    cells = res if isinstance(res, list) else res.get("rows", [])
    diffs = [c.get("difference") for c in cells if isinstance(c, dict)
             and c.get("difference") is not None and c.get("difference") == c.get("difference")]
    profiles = sorted({c.get("profile") for c in cells if isinstance(c, dict)
                       and c.get("profile") not in (None, "-")})
    rows.append({"artifact": artifact, "profile": ", ".join(profiles) or rec["profile"],
                 "cells": len(cells), "compared": len(diffs),
                 "mean difference": sum(diffs) / len(diffs) if diffs else None,
                 "max |difference|": max(map(abs, diffs)) if diffs else None,
                 "date": rec["created"], "git": (rec.get("git_sha") or "")[:10], "page": page})
status = pd.DataFrame(rows)
status

# %%
links = " · ".join(f'<a href="{p}.html">{a}</a>' for a, p in PAGES.items())
display(HTML(f"<p>Pages: {links}</p>"))
