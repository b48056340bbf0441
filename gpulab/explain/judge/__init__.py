"""`--explain`'s plug-in in the judge: gather the facts, ask the sandbox, Nsight."""
