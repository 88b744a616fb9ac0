"""model: the producer/consumer model.

Its parameter records, the priors measured on real sweeps, the throughput of one split, the simulator.
"""
