"""Autotuning for users: `zynml tune FILE` and `Program.tune(**inputs)` time the strategy
parameters of the kernels a program compiles to on the GPU present and keep the winners
in a database (database.py) that later compiles use (compiler.tuned_target).

    database.py   the winners on disk (atomic, checked on read)
    search.py     what to try: each kernel's strategy's SEARCH sets (needs the compiler)
    tuner.py      compile, time and choose; the compile-here / time-there split
"""
