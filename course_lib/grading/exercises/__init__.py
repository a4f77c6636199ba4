"""Grader tests, one module per exercise; the module name is the exercise id (see ``registry``)."""
