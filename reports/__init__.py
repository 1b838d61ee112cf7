"""attnbench's HTML report: reads the SQLite database (the schema is the contract, see
harness/store.cpp) and writes a static site with matplotlib plots. Never imports the C++.

    python3 -m reports build --db results/attnbench.sqlite --out results/report [--run ID]
"""
