"""Models written with ZynML's kernel library and device API (zynml/models/gpt.py) and
the data they train on (zynml/models/data.py)."""
