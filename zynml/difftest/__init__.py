"""Differential testing: random valid ZynML programs run on the `cir` reference
interpreter and on a compiled device, compared.

    generator.py   case_from_seed(n) / generate(draw, rng): a program and its inputs
                   (expressions.py, builder.py, blocks.py, nests.py make the blocks)
    strategies.py  the same for hypothesis
    runner.py      check_case / check_batch: run both, compare (compare.py), an outcome
    campaign.py    many batches in parallel processes for a time budget
    corpus.py      cases on disk (for a GPU machine, tools/differential_cuda.py)

docs/developer-guide.md ("The reference interpreter and the differential tests") says
how a finding becomes a regression test.
"""
