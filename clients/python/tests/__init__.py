"""Tests of the idgen Python client; run `python3 -m unittest discover` in
clients/python (make py-test does, with IDGEN_BIN set)."""
