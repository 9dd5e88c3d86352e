"""``python -m bench --peers``: workmem side by side with Mastra and LangGraph (see :mod:`bench.peers.base`)."""
