"""`--explain`'s plug-in in the sandbox: call the learner's function, profile it."""
