"""thena_nb: build, run and step through LLM agent workflows in Jupyter."""
