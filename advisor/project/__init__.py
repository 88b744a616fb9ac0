"""project: every split of G GPUs from one PipelineFit: the table, its exact refinement, sensitivity, queue advice."""
