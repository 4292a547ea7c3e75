"""Temporary: the old home of the experiments, until the core imports `thena_nb.experiments`."""

from thena_nb.experiments import Experiment, run_experiment

__all__ = ["Experiment", "run_experiment"]
