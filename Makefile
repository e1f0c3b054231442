# Two entry points (see README): `make demo` and `make test`. Both install what they need and are
# safe to run twice.
SHELL := /bin/bash
APT_PACKAGES := nats-server prometheus cmake g++ python3 make docker.io docker-compose debootstrap chromium
# not in every Debian mirror (kubectl comes from the Kubernetes or Cloud SDK apt repository;
# python3-torch, torch with Gloo for the torch sweep's dry run, is not built for every
# architecture): installed when available, else the tests that need it say so and skip
APT_OPTIONAL := kubectl python3-torch
NATIVE_BUILD := native/nccl-sidecar/build
# Node 22 (LTS) unless NODE_MAJOR names another (`make test NODE_MAJOR=24`, or `make test-node24`).
# Where the machine's node is another major, setup unpacks that release (npm's node-linux-<arch>)
# under .tools/node-<major>; every recipe runs with it first on PATH, npm, npx and jest included.
NODE_MAJOR ?= 22
NODE_HOME := $(CURDIR)/.tools/node-$(NODE_MAJOR)
export PATH := $(NODE_HOME)/bin:$(PATH)
# node-gyp builds against the unpacked release's headers where there is one (no download; the
# environment variable, as it outranks an npmrc's nodedir)
NODE_GYP = env $$([ -d $(NODE_HOME)/include/node ] && echo npm_config_nodedir=$(NODE_HOME)) npx --no-install node-gyp rebuild --loglevel=error

.PHONY: setup apt node deps native demo test test-node24 test-unit test-integration test-system test-gpu clean

setup: apt node deps native

apt:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@for p in $(APT_OPTIONAL); do \
	  dpkg -s $$p >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$p >/dev/null 2>&1 || echo "$$p: not installable here; its tests will be skipped"; \
	done

node:
	@scripts/node-dist.sh $(NODE_MAJOR) $(NODE_HOME)
	@echo "node: $$(node --version) ($$(command -v node))"

# exactly the lock (npm ci), again whenever the lock is newer than the install
deps: node
	@if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then npm ci --no-audit --no-fund; fi
	@# the Python service example's NATS client (its test is skipped, saying so, where it cannot be had)
	@python3 -c 'import nats, cryptography' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore nats-py cryptography >/dev/null 2>&1 || echo "nats-py, cryptography: not installable here; the Python service example's test will be skipped"

native:
	@if [ -f native/nccl-sidecar/CMakeLists.txt ]; then \
	  cmake -S native/nccl-sidecar -B $(NATIVE_BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null && \
	  cmake --build $(NATIVE_BUILD) -j2 >/dev/null; \
	fi
	@# Node-API (NAPI_VERSION 8) addons: one build loads on every Node major, no rebuild per version
	@if ! ls native/reduce-addon/build/Release/*.node >/dev/null 2>&1; then \
	  cd native/reduce-addon && $(NODE_GYP) >/dev/null; \
	fi
	@shm=native/shm-transport; if [ "$$(uname -s)" = Linux ] && { [ ! -f $$shm/build/Release/cmesh_shm.node ] || \
	  [ -n "$$(find $$shm/src $$shm/binding.gyp -newer $$shm/build/Release/cmesh_shm.node)" ]; }; then \
	  cd native/shm-transport && $(NODE_GYP) >/dev/null; \
	fi

demo: setup
	node apps/cli/bin/cmesh.js demo

test: setup
	bash scripts/run-tests.sh

# the same suite on Node 24
test-node24:
	$(MAKE) test NODE_MAJOR=24

# one tier of the suite (jest projects, see jest.config.js): unit tests beside the sources
# (*.spec.ts: no process or server started, seconds); each package's test/ against real processes;
# the cross-package tests in test/
test-unit: deps
	npm run --silent test:unit

test-integration: setup
	npm run --silent test:integration

test-system: setup
	npm run --silent test:system

clean:
	rm -rf $(NATIVE_BUILD) native/reduce-addon/build native/shm-transport/build .tmp .tools
