.PHONY: run test setup
run:   ## set up everything and run web + one worker per demo pool + beat
	scripts/run.sh
test:  ## set up and run the whole test suite
	scripts/test.sh
setup: ## set up for development: test tools and the product's database (migrated, demo seeded)
	scripts/setup.sh --dev --product-db
