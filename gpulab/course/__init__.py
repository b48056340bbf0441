"""The course as data: the manifest and lessons (content), the learner's
workspace and progress (workspace, state), the glossary, the citations the
lessons make, the known gaps of the supported stacks, and what each
exercise compiles (compile_specs). Light to import.
"""
