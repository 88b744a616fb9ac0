"""fit: the model's parameters from measured logs (or bare numbers): one PipelineFit."""
