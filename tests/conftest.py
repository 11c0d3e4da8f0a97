"""Settings of the whole suite."""

from hypothesis import settings

# Generated tests try this many examples in `make test`; `make unit` runs the fast tier with the `unit`
# profile (`--hypothesis-profile=unit`). A test that sets `max_examples` itself keeps its own count.
settings.register_profile("thorough", max_examples=1000)
settings.register_profile("unit", max_examples=150)
settings.load_profile("thorough")
