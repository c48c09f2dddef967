.PHONY: run test test-fast setup
# The tests a developer runs between changes: all but those marked as needing vLLM, Chromium, a
# fault suite's stack, network namespaces, Docker, or minutes of their own (pytest.ini, tests/marks.py).
FAST = not vllm and not browser and not faults and not netns and not docker and not slow
run:   ## set up everything and run web + one worker per demo pool + beat
	scripts/run.sh
test:  ## set up and run the whole test suite
	scripts/test.sh
test-fast: ## set up and run the fast subset (FAST above; ~3 min)
	scripts/test.sh -m "$(FAST)"
setup: ## set up for development: test tools and the product's database (migrated, demo seeded)
	scripts/setup.sh --dev --product-db
