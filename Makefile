# Two commands on a fresh Linux machine: `make demo` sets everything up and runs the demo,
# `make test` runs the tests (`make check` only the fast ones, in about two minutes).
# The work is in scripts/ so CI runs exactly the same thing.
.PHONY: demo test check fuzz setup clean

setup: .venv/.ready

.venv/.ready: pyproject.toml scripts/setup.sh
	scripts/setup.sh
	touch $@

demo: setup
	.venv/bin/soak demo

test: setup
	scripts/test.sh

check: setup
	scripts/test.sh --check

# the fuzz suites at 10,000 cases each, in parts (hours on two cores; make test runs a few)
fuzz: setup
	scripts/fuzz.sh

clean:
	rm -rf .venv
