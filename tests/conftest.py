"""Settings of the whole suite."""

from hypothesis import settings

# Generated tests try this many examples in `make test`; `make unit` runs the fast tier with the `unit`
# profile (`--hypothesis-profile=unit`). A test may scale the count (the garbage tests take a tenth of it on
# SQLite) or set its own.
settings.register_profile("thorough", max_examples=10_000)
settings.register_profile("unit", max_examples=1_500)
settings.load_profile("thorough")
