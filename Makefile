# Two commands on a fresh Linux machine: `make demo` sets everything up and runs the demo,
# `make test` runs the tests. The work is in scripts/ so CI runs exactly the same thing.
.PHONY: demo test setup clean

setup: .venv/.ready

.venv/.ready: pyproject.toml scripts/setup.sh
	scripts/setup.sh
	touch $@

demo: setup
	.venv/bin/soak demo

test: setup
	scripts/test.sh

clean:
	rm -rf .venv
