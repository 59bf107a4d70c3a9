"""The fuzz driver (`python tests/fuzz/run.py`): the schedule, plan and accpy.testing generators run
round-robin for a time box, each batch in a watched child process; failures minimized and written as
replay scripts; a sample of the kernels rebuilt under AddressSanitizer and UBSan."""
