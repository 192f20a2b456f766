"""PyTorch layers, one concept a file: positions, norms, feed-forward, attention, blocks."""
